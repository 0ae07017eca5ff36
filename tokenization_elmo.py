"""Character-level ELMo tokenizer: words to the 50 character ids of AllenNLP's `batch_to_ids`.

Rules (identical to AllenNLP's ELMoCharacterMapper and bilm-tf's UnicodeCharsVocabulary at inference):

- Raw text is split into words by the tokenizer's `segmenter` (saved in tokenizer_config.json): "whitespace" (the
  default) is Python's `str.split()` (runs of Unicode whitespace); "jieba" segments Chinese with jieba (its default
  accurate mode); "fugashi" segments Japanese into UniDic short units with MeCab (fugashi + unidic-lite), the units
  of UD Japanese on which ELMoForManyLangs' Japanese model was trained; "sudachipy" into SudachiPy's shortest units
  (mode A, sudachidict-core). Segmenters drop white space and keep `mask_token` whole; control characters (NUL...)
  and lone surrogates are white space to them, and a long text reaches their analysers in sentence-sized pieces
  (NOT_TEXT, SEGMENTER_PIECE); they are imported on first use (the extras `[zh]`, `[ja]`). `opencc_config` (e.g.
  "s2t") converts each word with OpenCC after the split (a simplified-Chinese text for the traditional-Chinese
  model). Pre-tokenized input (`is_split_into_words=True`) is
  used as given, and any `str`, even `""`, is a word.
- A word becomes `[begin-of-word] + its UTF-8 bytes + [end-of-word]`, padded with the padding character to
  `max_characters_per_token` (50), every id then shifted by +1 so that 0 means "no word".
- **The 48-byte rule:** only the first `max_characters_per_token - 2` (48) UTF-8 bytes of a word are kept; the cut
  is by bytes and may split a multi-byte character. Longer words are cut with a warning, never rejected.
- Characters UTF-8 cannot encode (lone surrogates such as "\\ud800") are dropped, as `encode(errors="ignore")`.
- The words `<S>` and `</S>` map to the sentence-boundary characters the model itself adds around every sentence.

Character-vocabulary mode (ELMoForManyLangs models, given `char_vocab_file` and/or `word_vocab_file`, their char.dic
and word.dic), following ELMoForManyLangs' `read_list` and `create_one_batch`:

- A word keeps its first `max_characters_per_token - 2` characters (code points, not bytes); the cut word is also
  what the word vocabulary looks up. Unknown characters and words get the `<oov>` id.
- A row is `[word id]` (with a word vocabulary) followed by `[<eow>] + char ids + [<bow>]` padded with `<pad>`
  (with a character vocabulary): ELMoForManyLangs puts the `<eow>` id first and the `<bow>` id last (its
  `create_one_batch` swaps them, and its models were trained that way). Every id is shifted by +1 (0 = no word).
- The words `<bos>` and `<eos>` are the sentence boundaries the model adds: `[<eow>, <bos>, <bow>, <pad>...]`.
"""

import functools
import logging as std_logging
import os
import re

import numpy as np
from transformers import BatchEncoding
from transformers.tokenization_python import PreTrainedTokenizer
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy
from transformers.utils import logging

logger = logging.get_logger(__name__)

# The most characters per word a tokenizer may ask for (the published models use 50): a larger value is a typo or a
# hostile file. Declared here, not in configuration_elmo (whose base class, transformers' PretrainedConfig, imports
# torch), so that the tokenizer runs without torch (serving an exported ONNX model, docs/serving.md).
MAX_CHARACTERS_PER_TOKEN = 1024

# Raw character ids (before the +1 shift): bytes are 0-255, then these markers.
BEGINNING_OF_SENTENCE_CHAR = 256
END_OF_SENTENCE_CHAR = 257
BEGINNING_OF_WORD_CHAR = 258
END_OF_WORD_CHAR = 259
PADDING_CHAR = 260
# Ids after the shift run from 0 ("no word") to 261: the size of the character embedding table.
CHAR_VOCAB_SIZE = 262

BOS_WORD = "<S>"
EOS_WORD = "</S>"
UNK_WORD = "<UNK>"
# The word the fill-mask pipeline fills (any text would do: LAMA's rule never reads the masked word's characters).
MASK_WORD = "<mask>"
PAD_WORD = "<pad>"  # the padding token transformers' collators ask for; ELMo pads with zero rows

# The symbols of an ELMoForManyLangs char.dic / word.dic (the word vocabulary needs only <oov> and <pad>).
VOCAB_BOS, VOCAB_EOS, VOCAB_OOV, VOCAB_PAD, VOCAB_BOW, VOCAB_EOW = "<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"
CHAR_VOCAB_SYMBOLS = (VOCAB_BOS, VOCAB_EOS, VOCAB_OOV, VOCAB_PAD, VOCAB_BOW, VOCAB_EOW)
WORD_VOCAB_SYMBOLS = (VOCAB_OOV, VOCAB_PAD)


def read_dic(path, required=()):
    """An ELMoForManyLangs char.dic / word.dic, read as its `Embedder` reads it: each line is `token TAB id`; a
    line that has one field after stripping white space is the ideographic space U+3000 (which the strip removed);
    a token listed twice keeps its last id. Raises ValueError naming the line for anything else."""
    vocab = {}
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().splitlines()  # the line breaks of its codecs reader, which include U+2028, \x1c...
    for number, line in enumerate(lines, 1):
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields.insert(0, "\u3000")
        try:
            token, index = fields
            vocab[token] = int(index)
        except ValueError:
            raise ValueError(f"{path}, line {number}: expected 'token<TAB>id', got {line!r}") from None
    missing = [symbol for symbol in required if symbol not in vocab]
    if missing:
        raise ValueError(f"{path} lacks the symbols {missing} (an ELMoForManyLangs vocabulary lists {list(required)})")
    return vocab


def read_vocabulary(path):
    """A bilm-tf / lm_1b word vocabulary: one word a line, word id = line number (bilm-tf's `Vocabulary`: each line
    stripped of white space). `<S>`, `</S>` and `<UNK>` may be on any line (bilm-tf files put them first, lm_1b's
    begins `</S>`, `<S>`, `<UNK>`). Raises ValueError naming a missing special word or a word listed twice."""
    with open(path, encoding="utf-8") as f:
        words = [line.strip() for line in f]
    for number, word in enumerate(words, 1):
        if "\x00" in word:  # UTF-16 without a byte-order mark decodes as UTF-8 with a NUL beside every letter
            raise ValueError(f"{path}, line {number}: NUL characters in the word; the file is likely UTF-16, not "
                             "UTF-8: convert it, e.g. with iconv")
    missing = [w for w in (BOS_WORD, EOS_WORD, UNK_WORD) if w not in words]
    if missing:
        raise ValueError(
            f"{path} lacks the words {missing}: a bilm-tf vocabulary lists <S>, </S> and <UNK>, one word a line"
        )
    if len(set(words)) != len(words):
        first = {}
        for number, word in enumerate(words, 1):
            if word in first:
                raise ValueError(f"{path} lists the word {word!r} twice (lines {first[word]} and {number})")
            first[word] = number
    return words


def write_dic(vocab, path):
    """Write a vocabulary in the char.dic / word.dic format (U+3000 round-trips through `read_dic`'s rule)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(f"{token}\t{index}\n" for token, index in sorted(vocab.items(), key=lambda item: item[1]))


def _marker_word(marker, max_chars):
    raw = [BEGINNING_OF_WORD_CHAR, marker, END_OF_WORD_CHAR] + [PADDING_CHAR] * (max_chars - 3)
    return tuple(c + 1 for c in raw)


def sentence_boundary_char_ids(max_chars=50):
    """Shifted char ids of the BOS and EOS words the model adds around each sentence."""
    return _marker_word(BEGINNING_OF_SENTENCE_CHAR, max_chars), _marker_word(END_OF_SENTENCE_CHAR, max_chars)


# What transformers' loading passes to __init__ besides options (from_pretrained's bookkeeping, saved configs).
LOADING_KEYS = frozenset({"name_or_path", "added_tokens_decoder", "auto_map", "backend", "files_loaded", "is_local",
                          "local_files_only", "tokenizer_file", "processor_class", "special_tokens_map_file",
                          "tokenizer_class", "model_specific_special_tokens"})
# transformers' tokenizer options that work here as there (values ElmoTokenizer cannot honour are refused, see
# `check_options`).
BASE_OPTIONS = frozenset({"model_max_length", "padding_side", "truncation_side", "model_input_names", "verbose",
                          "extra_special_tokens", "additional_special_tokens", "clean_up_tokenization_spaces",
                          "split_special_tokens", "chat_template"})
# Options of other tokenizers that ask for what ElmoTokenizer's rules already do at one value (accepted) and for a
# change of the words at the other (refused: accepting it would silently give other vectors than asked for).
# Any other option means nothing for words split on white space: it is stored and ignored, with a warning.
FIXED_OPTIONS = {
    "add_bos_token": (False, "the model adds <S> and </S> around every sentence itself; a second one would change "
                      "every vector"),
    "add_eos_token": (False, "the model adds <S> and </S> around every sentence itself; a second one would change "
                      "every vector"),
    "strip_accents": (False, "words keep every character, as the model read them in training"),
    "tokenize_chinese_chars": (False, "Chinese is split into words by the segmenter (segmenter='jieba'), not into "
                               "characters"),
}


# How raw text is split into words (`segmenter`): the packages each segmenter needs and the extra installing them.
SEGMENTERS = {"whitespace": None, "jieba": ("jieba", "zh"), "fugashi": ("fugashi unidic-lite", "ja"),
              "sudachipy": ("sudachipy sudachidict-core", "ja")}
OPENCC = ("opencc-python-reimplemented", "zh")
# Scripts written without spaces (Han, kana, Thai, Lao, Myanmar, Khmer, with CJK and full-width punctuation): white
# space does not find their words, so the whitespace split warns about text holding any of them, whatever its length.
UNSEGMENTED_SCRIPT = re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3001-\u303f\u3040-\u30ff"
                                r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uffef]")
# What a segmenter's analyser gets (one rule for all of them): control characters (NUL, which ends MeCab's text, and
# the rest of Unicode's Cc but the line end) and lone surrogates (which UTF-8 cannot encode: MeCab and SudachiPy
# raise) are not text; each becomes a space, so it separates words and is no word. The text then goes in pieces of at
# most 8,000 characters, cut after sentence ends (。！？ or a line end), or after 4,000 characters where a sentence is
# longer: SudachiPy refuses an input over about 49 KB, and MeCab (fugashi) crashes the process on one of about
# 450,000 characters.
NOT_TEXT = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
SEGMENTER_PIECE = re.compile(r"[^。！？\n]{1,4000}[。！？\n]{0,4000}|[。！？\n]{1,4000}")
_warned = set()


def warn_once(key, message):
    """Log `message` the first time `key` is seen in this process (the first case is the one shown)."""
    if key not in _warned:
        _warned.add(key)
        logger.warning(message)


def missing_package(what, packages, extra):
    return ValueError(f"this tokenizer needs {what}, which is not installed: "
                      f"pip install \"elmo-transformers[{extra}]\" (or pip install {packages})")


@functools.lru_cache(maxsize=None)
def load_segmenter(name):
    """`text -> [(start, end)]` of the words segmenter `name` finds in `text`, white space left out, by the rule of
    NOT_TEXT and SEGMENTER_PIECE. One per process, outside the tokenizer, so that a tokenizer stays picklable
    (datasets' map)."""
    analyse = load_analyser(name)

    def segment(text):
        text, spans = NOT_TEXT.sub(" ", text), []
        for piece in SEGMENTER_PIECE.finditer(text):
            start = piece.start()
            spans += [(start + s, start + e) for s, e in analyse(piece.group())]
        return spans

    return segment


def load_analyser(name):
    """`text -> [(start, end)]` of segmenter `name`'s own analyser, white space left out; imported here (not at the
    top of this module) so that the folder's copy of this module loads where no segmenter is installed."""
    packages, extra = SEGMENTERS[name]
    try:
        if name == "jieba":
            import jieba

            jieba.setLogLevel(std_logging.WARNING)  # it logs its dictionary loading to stderr
            tokenizer = jieba.Tokenizer()
            return lambda text: [(s, e) for word, s, e in tokenizer.tokenize(text) if not word.isspace()]
        if name == "fugashi":
            import fugashi
            import unidic_lite

            tagger = fugashi.Tagger(f'-d "{unidic_lite.DICDIR}" -r {os.devnull}')
            return lambda text: surface_spans(text, (node.surface for node in tagger(text)))
        import sudachipy

        tokenizer = sudachipy.Dictionary(dict="core").tokenizer(mode=sudachipy.SplitMode.A)
        return lambda text: [(m.begin(), m.end()) for m in tokenizer.tokenize(text) if not m.surface().isspace()]
    except ImportError:
        raise missing_package(f"the {name} segmenter", packages, extra) from None


def surface_spans(text, surfaces):
    """Where each of `surfaces` (the words of `text`, in order) is in `text`."""
    spans, position = [], 0
    for surface in surfaces:
        start = text.find(surface, position)
        if not surface or start < 0:
            continue
        position = start + len(surface)
        spans.append((start, position))
    return spans


@functools.lru_cache(maxsize=None)
def load_opencc(config):
    try:
        import opencc
    except ImportError:
        raise missing_package("OpenCC for opencc_config", *OPENCC) from None
    try:
        return opencc.OpenCC(config).convert
    except Exception as e:  # noqa: BLE001 - the packages raise different errors for an unknown configuration
        raise ValueError(f"opencc_config {config!r} is not an OpenCC conversion (e.g. s2t, t2s, s2tw): {e}") from None


WORD = re.compile(r"\S+")  # the words of str.split() (\s is str.isspace)
# Words whose rows are kept for reuse (the byte rules' LRU cache; the vocabulary rows of each tokenizer).
WORD_CACHE_SIZE = 1 << 17


@functools.lru_cache(maxsize=WORD_CACHE_SIZE)
def word_to_char_ids(word, max_chars=50):
    """Shifted char ids (a tuple of `max_chars` ints) of one word; see the module docstring for the rules."""
    if word == BOS_WORD:
        return sentence_boundary_char_ids(max_chars)[0]
    if word == EOS_WORD:
        return sentence_boundary_char_ids(max_chars)[1]
    encoded = word.encode("utf-8", errors="ignore")
    if len(encoded) > max_chars - 2:
        encoded = encoded[: max_chars - 2]
        kept = encoded.decode("utf-8", errors="ignore")
        warn_once("byte cut", f"Words longer than {max_chars - 2} UTF-8 bytes are cut to their first {max_chars - 2} "
                  f"bytes: {word[:20]!r}... keeps {len(kept)} of its {len(word)} characters ({kept!r}); a text "
                  "without spaces must be segmented into words first")
    raw = [BEGINNING_OF_WORD_CHAR, *encoded, END_OF_WORD_CHAR] + [PADDING_CHAR] * (max_chars - 2 - len(encoded))
    return tuple(c + 1 for c in raw)


def char_ids_to_word(char_ids):
    """Best-effort inverse of `word_to_char_ids`; None for an all-zero (padding) row.

    Lossy by design: bytes beyond the 48-byte cut and dropped surrogates are gone, and a multi-byte character split
    by the cut decodes to U+FFFD.
    """
    raw = [c - 1 for c in char_ids]
    if all(c == -1 for c in raw):
        return None
    max_chars = len(raw)
    bos, eos = sentence_boundary_char_ids(max_chars)
    if tuple(char_ids) == bos:
        return BOS_WORD
    if tuple(char_ids) == eos:
        return EOS_WORD
    end = raw.index(END_OF_WORD_CHAR) if END_OF_WORD_CHAR in raw else max_chars
    return bytes(c for c in raw[1:end] if 0 <= c < 256).decode("utf-8", errors="replace")


def _nesting_depth(ids):
    """2 for one sentence ([words][chars]), 3 for a batch ([sentences][words][chars])."""
    if len(ids) == 0:
        return 2
    if len(ids[0]) == 0 or isinstance(ids[0][0], (list, tuple)):
        return 3
    return 2


class ElmoBatchEncoding(BatchEncoding):
    """BatchEncoding with `word_ids()`: ELMo has one position per word, so position i is word i."""

    def word_ids(self, batch_index=0):
        ids = self["input_ids"]
        ids = ids.tolist() if hasattr(ids, "tolist") else ids
        if _nesting_depth(ids) == 3:
            ids = ids[batch_index]
        return [i if any(chars) else None for i, chars in enumerate(ids)]


class ElmoTokenizer(PreTrainedTokenizer):
    """Character-level tokenizer for ELMo.

    `input_ids` has shape [batch, words, max_characters_per_token] and `attention_mask` [batch, words]. Padding and
    truncation count words (padding is always on the right, as the biLM reads sentences from their first position;
    truncation keeps the first words, the last ones with `truncation_side="left"`; `return_overflowing_tokens`
    gives every window of `max_length` words). The options of other tokenizers are taken as `check_options` says.
    An optional word vocabulary (`vocab.txt`, bilm-tf format: one word a line, word id = line number, `<S>`, `</S>`
    and `<UNK>` on any line; see `read_vocabulary`) maps words to ids for language-model targets; the model's inputs
    are always characters. `mask_token` marks the word the fill-mask pipeline fills. `do_lower_case=True` lower-cases
    every word but the special and added tokens (for a model trained on lower-cased text).
    """

    vocab_files_names = {"vocab_file": "vocab.txt", "char_vocab_file": "char.dic", "word_vocab_file": "word.dic"}
    model_input_names = ["input_ids", "attention_mask"]
    # What `register_for_auto_class()` sets (save_pretrained then writes the auto_map of remote code); calling it would
    # import transformers' Auto modules, and with them torch, into a process that serves an exported model.
    _auto_class = "AutoTokenizer"
    padding_side = "right"
    truncation_side = "right"

    def __init__(
        self,
        vocab_file=None,
        max_characters_per_token=50,
        bos_token=BOS_WORD,
        eos_token=EOS_WORD,
        unk_token=UNK_WORD,
        pad_token=PAD_WORD,
        mask_token=MASK_WORD,
        char_vocab_file=None,
        word_vocab_file=None,
        segmenter="whitespace",
        opencc_config=None,
        do_lower_case=False,
        **kwargs,
    ):
        if not isinstance(segmenter, str) or segmenter not in SEGMENTERS:
            raise ValueError(f"segmenter must be one of {', '.join(SEGMENTERS)} (a string), got {segmenter!r:.100}: "
                             "set it so in tokenizer_config.json")
        if opencc_config is not None and not isinstance(opencc_config, str):
            raise ValueError(f"opencc_config must be an OpenCC conversion name (a string, e.g. 's2t') or null, got "
                             f"{opencc_config!r:.100}: set it so in tokenizer_config.json")
        if segmenter != "whitespace":
            load_segmenter(segmenter)  # a folder that needs a missing package fails now, naming it
        if opencc_config is not None:
            load_opencc(opencc_config)
        self.segmenter, self.opencc_config = segmenter, opencc_config
        value = max_characters_per_token
        if isinstance(value, bool) or not isinstance(value, int) or not 3 <= value <= MAX_CHARACTERS_PER_TOKEN:
            raise ValueError(f"max_characters_per_token must be an integer from 3 to {MAX_CHARACTERS_PER_TOKEN:,} "
                             f"(begin-of-word, at least one character, end-of-word), got {value!r:.100}")
        self.max_characters_per_token = max_characters_per_token
        self.vocab_file = vocab_file
        words = [BOS_WORD, EOS_WORD, UNK_WORD] if vocab_file is None else read_vocabulary(vocab_file)
        self.vocab = {w: i for i, w in enumerate(words)}
        self.ids_to_words = words
        # Character-vocabulary mode (see the module docstring): ELMoForManyLangs' vocabularies.
        self.char_vocab = None if char_vocab_file is None else read_dic(char_vocab_file, CHAR_VOCAB_SYMBOLS)
        self.word_vocab = None if word_vocab_file is None else read_dic(word_vocab_file, WORD_VOCAB_SYMBOLS)
        self._rows, self._inverse = {}, {}
        if not isinstance(do_lower_case, bool):
            raise ValueError(f"do_lower_case must be True or False, got {do_lower_case!r:.100}")
        self.do_lower_case = do_lower_case
        self.check_options(kwargs, bos_token=bos_token, eos_token=eos_token, unk_token=unk_token)
        super().__init__(
            vocab_file=vocab_file,
            max_characters_per_token=max_characters_per_token,
            bos_token=bos_token,
            eos_token=eos_token,
            unk_token=unk_token,
            pad_token=pad_token,
            mask_token=mask_token,
            char_vocab_file=char_vocab_file,
            word_vocab_file=word_vocab_file,
            segmenter=segmenter,
            opencc_config=opencc_config,
            do_lower_case=do_lower_case,
            **kwargs,
        )

    @staticmethod
    def check_options(kwargs, **special_tokens):
        """Take the options transformers passes to every tokenizer: options of other tokenizers that mean nothing
        for words split on white space (`add_prefix_space`, `never_split`...) are stored and ignored with a warning;
        those of `FIXED_OPTIONS` and values these rules cannot honour are refused by name, as accepting them would
        silently change the vectors. Truncation keeps the first words, or the last with `truncation_side="left"`."""
        for name in sorted(set(kwargs) - LOADING_KEYS - BASE_OPTIONS):
            value = kwargs[name]
            if name in FIXED_OPTIONS:
                allowed, reason = FIXED_OPTIONS[name]
                if value is not None and value != allowed:
                    raise ValueError(f"ElmoTokenizer cannot honour {name}={value!r:.100}: {reason}; leave it out")
            elif not callable(getattr(ElmoTokenizer, name, None)):  # a method's name: transformers refuses it
                warn_once(f"option {name}", f"ElmoTokenizer ignores {name}={value!r:.100}: it is an option of other "
                          "tokenizers; ElmoTokenizer splits text into words (on white space, or with its segmenter) "
                          "and keeps every character of each word")
        fixed = {"bos_token": BOS_WORD, "eos_token": EOS_WORD, "unk_token": UNK_WORD}
        for name, value in special_tokens.items():
            if str(value) != fixed[name]:
                raise ValueError(f"ElmoTokenizer's {name} is {fixed[name]!r} (the character rules and the word "
                                 f"vocabulary use it), got {str(value)!r:.100}")
        if kwargs.setdefault("padding_side", "right") != "right":
            raise ValueError("ElmoTokenizer pads on the right only (padding_side='right'): the biLM reads each "
                             "sentence from position 0")
        refused = {"clean_up_tokenization_spaces": False, "split_special_tokens": False,
                   "model_input_names": ["input_ids", "attention_mask"]}
        for name, allowed in refused.items():
            value = kwargs.get(name)
            if value is not None and (list(value) if isinstance(value, (list, tuple)) else value) != allowed:
                raise ValueError(f"ElmoTokenizer does not support {name}={value!r:.100} (only {allowed!r})")

    # -- word vocabulary (language-model targets) -------------------------------------------------------------

    @property
    def vocab_size(self):
        return len(self.vocab)

    def get_vocab(self):
        """The word vocabulary (vocab.txt, `self.vocab`: the LM softmax's words), then the added tokens (`<pad>`,
        `<mask>`, `add_tokens`)."""
        return {**self.vocab, **self.added_tokens_encoder}

    def _convert_token_to_id(self, token):
        return self.vocab.get(token, self.vocab[UNK_WORD])

    def _convert_id_to_token(self, index):
        return self.ids_to_words[index]

    def save_vocabulary(self, save_directory, filename_prefix=None):
        prefix = filename_prefix + "-" if filename_prefix else ""
        path = os.path.join(save_directory, prefix + "vocab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(w + "\n" for w in self.ids_to_words)
        paths = [path]
        for vocab, name in ((self.char_vocab, "char.dic"), (self.word_vocab, "word.dic")):
            if vocab is not None:
                paths.append(os.path.join(save_directory, prefix + name))
                write_dic(vocab, paths[-1])
        return tuple(paths)

    # -- characters ---------------------------------------------------------------------------------------------

    @property
    def vocabulary_inputs(self):
        """True in character-vocabulary mode (ELMoForManyLangs), False for UTF-8 bytes (AllenNLP)."""
        return self.char_vocab is not None or self.word_vocab is not None

    @property
    def input_width(self):
        """Ids per word: the word id (with a word vocabulary), then the char ids (bytes or a char vocabulary)."""
        if not self.vocabulary_inputs:
            return self.max_characters_per_token
        return (self.word_vocab is not None) + (self.max_characters_per_token if self.char_vocab is not None else 0)

    def token_row(self, word):
        """The `input_ids` row of one word (a tuple of `input_width` ints), by the rules of the module docstring."""
        if not self.vocabulary_inputs:
            return word_to_char_ids(word, self.max_characters_per_token)
        row = self._rows.get(word)
        if row is None:
            if len(self._rows) >= WORD_CACHE_SIZE:  # bounded like the byte rules' cache
                self._rows.clear()
            row = self._rows[word] = self._vocabulary_row(word)
        return row

    def _vocabulary_row(self, word):
        max_chars = self.max_characters_per_token
        if len(word) > max_chars - 2:
            logger.warning_once(f"Words longer than {max_chars - 2} characters are cut to their first {max_chars - 2}.")
            word = word[: max_chars - 2]
        row = []
        if self.word_vocab is not None:
            row.append(self.word_vocab.get(word, self.word_vocab[VOCAB_OOV]))
        if self.char_vocab is not None:
            chars = self.char_vocab
            if word in (VOCAB_BOS, VOCAB_EOS):
                ids = [chars[word]]
            else:
                ids = [chars.get(c, chars[VOCAB_OOV]) for c in word]
            # <eow> first, <bow> last: ELMoForManyLangs' swap (see the module docstring).
            row += [chars[VOCAB_EOW], *ids, chars[VOCAB_BOW]] + [chars[VOCAB_PAD]] * (max_chars - 2 - len(ids))
        return tuple(i + 1 for i in row)

    def check_rows(self, rows, where="input_ids"):
        """Refuse word rows that this tokenizer could not have made: non-integers (floats, bools) or ids outside its
        ranges (0 = no word, then the byte ids up to 261, or the vocabularies' ids + 1). `rows` is [..., words,
        input_width], nested lists or an array."""
        array = np.asarray(rows)
        if array.size == 0:
            return
        if array.dtype.kind not in "iu" or array.shape[-1] != self.input_width:
            raise ValueError(f"{where} must be rows of {self.input_width} integer ids per word, got "
                             f"{array.dtype} values of shape {list(array.shape)}")
        high = np.full(self.input_width, CHAR_VOCAB_SIZE - 1)
        if self.vocabulary_inputs:
            sizes = ([len(self.word_vocab)] if self.word_vocab else []) + [len(self.char_vocab or ())] * (
                self.input_width - (1 if self.word_vocab else 0))
            high = np.array(sizes)
        if array.min() < 0 or (array > high).any():
            raise ValueError(f"{where} holds ids outside this tokenizer's range (0 to {high.max()}), e.g. "
                             f"{array[(array < 0) | (array > high)][:3].tolist()}")

    def _row_to_word(self, row):
        """Best-effort inverse of `token_row`; None for an all-zero (padding) row."""
        if not self.vocabulary_inputs:
            return char_ids_to_word(row)
        if not any(row):
            return None
        if self.char_vocab is None:
            return self._inverse_vocab("word").get(row[0] - 1, VOCAB_OOV)
        ids = [i - 1 for i in row[-self.max_characters_per_token :][1:]]
        end = self.char_vocab[VOCAB_BOW]
        ids = ids[: ids.index(end)] if end in ids else ids
        chars = self._inverse_vocab("char")
        return "".join(chars.get(i, "") for i in ids)

    def _inverse_vocab(self, kind):
        """id -> token of the char or word vocabulary (built on first use, for decoding)."""
        inverse = self._inverse.get(kind)
        if inverse is None:
            inverse = self._inverse[kind] = {i: t for t, i in getattr(self, f"{kind}_vocab").items()}
        return inverse

    def segment(self, text):
        """(words, spans) of raw `text`: its words by `segmenter` and `opencc_config` (module docstring), and where
        each is in `text`, (start, end)."""
        if self.segmenter == "whitespace":
            self.check_segmented(text)
            spans = [match.span() for match in WORD.finditer(text)]
        else:
            segment, mask, spans, start = load_segmenter(self.segmenter), self.mask_token, [], 0
            while start <= len(text):  # the segmenter sees the text between masks; a mask is a word
                end = text.find(mask, start) if mask else -1
                end = len(text) if end < 0 else end
                spans += [(start + s, start + e) for s, e in segment(text[start:end])]
                if end < len(text):
                    spans.append((end, end + len(mask)))
                start = end + max(len(mask), 1)
        words = [text[s:e] for s, e in spans]
        if self.opencc_config is not None:
            convert = load_opencc(self.opencc_config)
            words = [w if w == self.mask_token else convert(w) for w in words]
        return words, spans

    @property
    def splits_on_whitespace(self):
        """Whether raw text becomes words by `str.split()` alone (no segmenter, no OpenCC conversion)."""
        return self.segmenter == "whitespace" and self.opencc_config is None

    def split_words(self, text):
        """The words of raw `text` (`segment`)."""
        if self.splits_on_whitespace:
            self.check_segmented(text)
            return text.split()
        return self.segment(text)[0]

    @staticmethod
    def check_segmented(text):
        """Warn (once) when the whitespace split meets text of a script written without spaces."""
        if "unsegmented" not in _warned and UNSEGMENTED_SCRIPT.search(text):
            warn_once("unsegmented", f"ElmoTokenizer splits text on white space, and {text.strip()[:20]!r} holds "
                      "Chinese, Japanese or Thai characters, whose words white space does not find (a sentence "
                      "becomes one word), and a model trained on another language (the default model: English) "
                      "does not read them. Pass the words (is_split_into_words=True; also for text already split "
                      "with spaces), or use a model of that language whose tokenizer has a segmenter "
                      "(segmenter='jieba' for Chinese, 'fugashi' for Japanese; see docs/zh, docs/ja)")

    def tokenize(self, text, **kwargs):
        """The words of `split_words` (lower-cased with `do_lower_case`); no special-token splitting."""
        return self.cased(self.split_words(text))

    def _tokenize(self, text, **kwargs):
        return self.tokenize(text)

    def cased(self, words):
        """`words` as the model reads them: lower-cased with `do_lower_case`, but the special and added tokens."""
        if not self.do_lower_case:
            return words
        kept = set(self.all_special_tokens) | set(self.added_tokens_encoder)
        return [word if word in kept else word.lower() for word in words]

    def _sentences(self, text, is_split_into_words):
        """Normalise every accepted input form to (is_batched, list of word lists), rejecting the rest by name."""

        def check_words(words, where):
            for j, word in enumerate(words):
                if not isinstance(word, str):
                    raise TypeError(f"{where}word {j} is {word!r} ({type(word).__name__}); every word must be a str")
            return list(words)

        if isinstance(text, str):
            if is_split_into_words:
                raise TypeError("is_split_into_words=True expects a list of words (or a batch of them), got a str")
            return False, [self.tokenize(text)]
        if not isinstance(text, (list, tuple)):
            raise TypeError(f"ElmoTokenizer expects a str, a list of str or a list of word lists, got {type(text)}")
        if is_split_into_words:
            if all(isinstance(t, str) for t in text):
                return False, [self.cased(check_words(text, ""))]
            sentences = []
            for i, words in enumerate(text):
                if not isinstance(words, (list, tuple)):
                    raise TypeError(
                        f"sentence {i} is {words!r} ({type(words).__name__}); with is_split_into_words=True a "
                        "batch must be a list of word lists"
                    )
                sentences.append(self.cased(check_words(words, f"sentence {i}, ")))
            return True, sentences
        if len(text) == 0:
            raise ValueError("empty batch: pass at least one sentence (an empty string is a sentence with no words)")
        sentences = []
        for i, t in enumerate(text):
            if isinstance(t, (list, tuple)):
                raise ValueError(f"sentence {i} is a list: pass is_split_into_words=True for pre-tokenized input")
            if not isinstance(t, str):
                raise TypeError(f"sentence {i} is {t!r} ({type(t).__name__}); expected a str")
            sentences.append(self.tokenize(t))
        return True, sentences

    def _encode_plus(
        self,
        text,
        text_pair=None,
        add_special_tokens=True,
        padding_strategy=PaddingStrategy.DO_NOT_PAD,
        truncation_strategy=TruncationStrategy.DO_NOT_TRUNCATE,
        max_length=None,
        stride=0,
        is_split_into_words=False,
        pad_to_multiple_of=None,
        padding_side=None,
        return_tensors=None,
        return_token_type_ids=None,
        return_attention_mask=None,
        return_overflowing_tokens=False,
        return_special_tokens_mask=False,
        return_offsets_mapping=False,
        return_length=False,
        verbose=True,
        **kwargs,
    ):
        if text_pair is not None:
            raise ValueError("ElmoTokenizer encodes single sentences; text pairs are not supported")
        unsupported = {
            "return_token_type_ids": return_token_type_ids,  # one sentence at a time: no token types
            "return_offsets_mapping": return_offsets_mapping,
            "stride": stride if not return_overflowing_tokens else 0,
            "split_special_tokens": kwargs.get("split_special_tokens"),  # special words are words like any other
        }
        for name, value in unsupported.items():
            if value:
                raise ValueError(f"ElmoTokenizer does not support {name}={value!r}")
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 0
        ):
            raise ValueError(f"max_length must be a non-negative int (words per sentence) or None, got {max_length!r}")
        is_batched, sentences = self._sentences(text, is_split_into_words)
        truncate = truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None
        windows_of = None
        if return_overflowing_tokens and truncate:
            sentences, windows_of = self.windows(sentences, max_length, stride)
            is_batched = True
        elif truncate:
            left = self.truncation_side == "left"
            sentences = [words[len(words) - max_length :] if left else words[:max_length] for words in sentences]
        encoded = {"input_ids": [[list(self.token_row(w)) for w in s] for s in sentences]}
        if windows_of is not None:
            encoded["overflow_to_sample_mapping"] = windows_of
        if return_length:
            encoded["length"] = [len(s) for s in sentences]
        if return_special_tokens_mask:
            encoded["special_tokens_mask"] = [[0] * len(s) for s in sentences]
        if not is_batched:
            encoded = {k: v[0] for k, v in encoded.items()}
        return self.pad(
            encoded,
            padding=padding_strategy,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
            return_tensors=return_tensors,
            verbose=verbose,
        )

    @staticmethod
    def windows(sentences, max_length, stride):
        """`return_overflowing_tokens`, as transformers' fast tokenizers give it: each sentence as windows of
        `max_length` words, each starting `stride` words before the previous one ends, left to right (every word in
        at least one window); returns the windows and the sentence of each (`overflow_to_sample_mapping`)."""
        if not (isinstance(stride, int) and 0 <= stride < max_length):
            raise ValueError(f"stride must be an int from 0 to max_length - 1 = {max_length - 1} (words the windows "
                             f"of return_overflowing_tokens share), got {stride!r}")
        windows, windows_of = [], []
        for index, words in enumerate(sentences):
            for start in range(0, max(len(words) - stride, 1), max_length - stride):
                windows.append(words[start : start + max_length])
                windows_of.append(index)
        return windows, windows_of

    def pad(
        self,
        encoded_inputs,
        padding=True,
        max_length=None,
        pad_to_multiple_of=None,
        padding_side=None,
        return_attention_mask=None,
        return_tensors=None,
        verbose=True,
    ):
        """Pad sentences with all-zero words (and `attention_mask` with 0) on the right.

        Accepts one encoding, a dict of batched lists, a list of encodings (as data collators pass), and tensors.
        A single sentence keeps no batch axis unless tensors are returned. Keys other than `input_ids`,
        `attention_mask` and `special_tokens_mask` (labels, lengths...) pass through unchanged.
        """
        if isinstance(encoded_inputs, (list, tuple)):
            if len(encoded_inputs) == 0:
                raise ValueError("empty batch: nothing to pad")
            encoded_inputs = {k: [example[k] for example in encoded_inputs] for k in encoded_inputs[0].keys()}
        encoded = dict(encoded_inputs)
        if "input_ids" not in encoded:
            raise ValueError(f"pad needs input_ids, got the keys {list(encoded)}")
        for key, value in encoded.items():
            if hasattr(value, "tolist"):
                if return_tensors is None:
                    return_tensors = "pt" if hasattr(value, "detach") else "np"
                encoded[key] = value.tolist()
            elif isinstance(value, list) and value and hasattr(value[0], "tolist"):
                if return_tensors is None:
                    return_tensors = "pt" if hasattr(value[0], "detach") else "np"
                encoded[key] = [v.tolist() for v in value]
        if (padding_side or self.padding_side) != "right":
            raise ValueError("ElmoTokenizer pads on the right only: the biLM reads each sentence from position 0")

        is_batched = _nesting_depth(encoded["input_ids"]) == 3
        if not is_batched:
            encoded = {k: [v] for k, v in encoded.items()}
        ids = encoded["input_ids"]
        lengths = [len(s) for s in ids]
        for i, sentence in enumerate(ids):
            for j, chars in enumerate(sentence):
                if len(chars) != self.input_width:
                    raise ValueError(f"sentence {i}, word {j} has {len(chars)} ids; expected {self.input_width}")
            self.check_rows(sentence, f"sentence {i}")
        if "attention_mask" not in encoded and return_attention_mask is not False:
            encoded["attention_mask"] = [[1] * n for n in lengths]

        strategy, _, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding, max_length=max_length, verbose=verbose
        )
        target = None
        if strategy == PaddingStrategy.LONGEST:
            target = max(lengths)
        elif strategy == PaddingStrategy.MAX_LENGTH:
            target = max_length
        if target is not None and pad_to_multiple_of:
            target = -(-target // pad_to_multiple_of) * pad_to_multiple_of
        if target is not None:
            pad_word = [0] * self.input_width
            pads = {"input_ids": pad_word, "attention_mask": 0, "special_tokens_mask": 1}
            for key, pad_value in pads.items():
                if key in encoded:
                    encoded[key] = [list(s) + [pad_value] * (target - len(s)) for s in encoded[key]]
        if not is_batched and return_tensors is None:
            encoded = {k: v[0] for k, v in encoded.items()}
        elif return_tensors is not None and not any(encoded["input_ids"]):
            # No sentence has a word: nested empty lists would lose the character axis.
            encoded["input_ids"] = np.zeros((len(lengths), 0, self.input_width), dtype=np.int64)
        return ElmoBatchEncoding(encoded, tensor_type=return_tensors)

    # -- decoding -----------------------------------------------------------------------------------------------

    def decode(self, token_ids, skip_special_tokens=False, **kwargs):
        """Char ids back to text (best effort, see `char_ids_to_word`): one word [50] -> a word, one sentence
        [words, 50] -> a space-joined string, a batch [batch, words, 50] -> a list of strings. Padding words are
        skipped; `skip_special_tokens` also drops `<S>` and `</S>`."""
        if kwargs.get("clean_up_tokenization_spaces"):
            raise ValueError("ElmoTokenizer does not support clean_up_tokenization_spaces=True: words are joined with "
                             "one space, as they were split")
        ids = token_ids.tolist() if hasattr(token_ids, "tolist") else token_ids
        self.check_rows(ids, "token_ids")
        if len(ids) and isinstance(ids[0], int):
            return self._row_to_word(ids) or ""
        if _nesting_depth(ids) == 3:
            return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in ids]
        words = [self._row_to_word(chars) for chars in ids]
        boundaries = {VOCAB_BOS, VOCAB_EOS} if self.vocabulary_inputs else {BOS_WORD, EOS_WORD}
        skip = {None, *boundaries} if skip_special_tokens else {None}
        return " ".join(w for w in words if w not in skip)

    def batch_decode(self, sequences, skip_special_tokens=False, **kwargs):
        ids = sequences.tolist() if hasattr(sequences, "tolist") else sequences
        return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in ids]

