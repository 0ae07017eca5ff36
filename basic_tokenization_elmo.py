"""ELMo's words and their character ids, without transformers or torch: how raw text becomes words (`ElmoSegmenter`:
white space, or jieba, fugashi, sudachipy, then OpenCC) and words become the model's input rows
(`ElmoBasicTokenizer`), shared by transformers' `ElmoTokenizer` and the inference core (`bilm_elmo.py`, an exported
graph).

The rows are AllenNLP's `batch_to_ids` (its ELMoCharacterMapper, bilm-tf's UnicodeCharsVocabulary): a word's first
48 UTF-8 bytes between begin- and end-of-word marks, every id shifted by +1 so that 0 is no word; an
ELMoForManyLangs model's rows are its `create_one_batch`'s from its char.dic and word.dic. The rules in full:
docs/behaviour.md (Inputs) and docs/coming-from-elmoformanylangs.md (the segmenters, character-vocabulary mode).
"""

import functools
import logging
import os
import re
import threading

import numpy as np

logger = logging.getLogger(__name__)

# The most characters per word a tokenizer may ask for (the published models use 50): a larger value is a typo or a
# hostile file.
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

# The vocabulary files of a model folder, by the argument that takes each: the language model's words (bilm-tf's
# vocab.txt) and ELMoForManyLangs' character and word vocabularies.
VOCABULARY_FILES = {"vocab_file": "vocab.txt", "char_vocab_file": "char.dic", "word_vocab_file": "word.dic"}

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
            raise ValueError(
                f"{path}, line {number}: NUL characters in the word; the file is likely UTF-16, not "
                "UTF-8: convert it, e.g. with iconv"
            )
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


# How raw text is split into words (`segmenter`): the packages each segmenter needs and the extra installing them.
SEGMENTERS = {
    "whitespace": None,
    "jieba": ("jieba", "zh"),
    "fugashi": ("fugashi unidic-lite", "ja"),
    "sudachipy": ("sudachipy sudachidict-core", "ja"),
}
OPENCC = ("opencc-python-reimplemented", "zh")
# Scripts written without spaces (Han, kana, Thai, Lao, Myanmar, Khmer, with CJK and full-width punctuation): white
# space does not find their words, so the whitespace split warns about text holding any of them, whatever its length.
UNSEGMENTED_SCRIPT = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3001-\u303f\u3040-\u30ff"
    r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uffef]"
)
# What a segmenter's analyser gets (one rule for all of them): control characters (NUL, which ends MeCab's text, and
# the rest of Unicode's Cc but the line end) and lone surrogates (which UTF-8 cannot encode: MeCab and SudachiPy
# raise) are not text; each becomes a space, so it separates words and is no word. The text then goes in pieces of at
# most 8,000 characters, cut after sentence ends (。！？ or a line end), or after 4,000 characters where a sentence is
# longer: SudachiPy refuses an input over about 49 KB, and MeCab (fugashi) crashes the process on one of about
# 450,000 characters.
NOT_TEXT = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
SEGMENTER_PIECE = re.compile(r"[^。！？\n]{1,4000}[。！？\n]{0,4000}|[。！？\n]{1,4000}")
_warned = set()


def warn_once(key, message, log=logger):
    """Log `message` (to `log`, this module's logger by default) the first time `key` is seen in this process (the
    first case is the one shown): the one rule of the model modules' warnings."""
    if key not in _warned:
        _warned.add(key)
        log.warning(message)


def missing_package(what, packages, extra):
    return ValueError(
        f"this tokenizer needs {what}, which is not installed: "
        f'pip install "elmo-transformers[{extra}]" (or pip install {packages})'
    )


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

            jieba.setLogLevel(logging.WARNING)  # it logs its dictionary loading to stderr
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
# Words whose rows a tokenizer keeps for reuse (`ElmoBasicTokenizer`'s table, which doubles as it fills: at most
# about 52 MB at 50 ids a word); a tokenizer that holds more starts again with an empty table.
WORD_CACHE_SIZE = 1 << 16


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
        warn_once(
            "byte cut",
            f"Words longer than {max_chars - 2} UTF-8 bytes are cut to their first {max_chars - 2} "
            f"bytes: {word[:20]!r}... keeps {len(kept)} of its {len(word)} characters ({kept!r}); a text "
            "without spaces must be segmented into words first",
        )
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


class ElmoSegmenter:
    """How raw text becomes words (the module docstring's rules): `segmenter` ("whitespace", "jieba", "fugashi",
    "sudachipy") and `opencc_config`, keeping `mask_token` whole. A segmenter that needs a package that is not
    installed fails here, naming it."""

    def __init__(self, segmenter="whitespace", opencc_config=None, mask_token=MASK_WORD):
        if not isinstance(segmenter, str) or segmenter not in SEGMENTERS:
            raise ValueError(
                f"segmenter must be one of {', '.join(SEGMENTERS)} (a string), got {segmenter!r:.100}: "
                "set it so in tokenizer_config.json"
            )
        if opencc_config is not None and not isinstance(opencc_config, str):
            raise ValueError(
                f"opencc_config must be an OpenCC conversion name (a string, e.g. 's2t') or null, got "
                f"{opencc_config!r:.100}: set it so in tokenizer_config.json"
            )
        if segmenter != "whitespace":
            load_segmenter(segmenter)
        if opencc_config is not None:
            load_opencc(opencc_config)
        self.segmenter, self.opencc_config, self.mask_token = segmenter, opencc_config, str(mask_token)

    @property
    def splits_on_whitespace(self):
        """Whether raw text becomes words by `str.split()` alone (no segmenter, no OpenCC conversion)."""
        return self.segmenter == "whitespace" and self.opencc_config is None

    def packages(self):
        """The packages whose version decides how text is split (another version may split otherwise)."""
        return [
            *((SEGMENTERS[self.segmenter] or ("",))[0].split()),
            *(OPENCC[0].split() if self.opencc_config is not None else []),
        ]

    def segment(self, text):
        """(words, spans) of raw `text`: its words, and where each is in `text`, (start, end)."""
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
            warn_once(
                "unsegmented",
                f"ElmoTokenizer splits text on white space, and {text.strip()[:20]!r} holds "
                "Chinese, Japanese or Thai characters, whose words white space does not find (a sentence "
                "becomes one word), and a model trained on another language (the default model: English) "
                "does not read them. Pass the words (is_split_into_words=True; also for text already split "
                "with spaces), or use a model of that language whose tokenizer has a segmenter "
                "(segmenter='jieba' for Chinese, 'fugashi' for Japanese; see docs/zh, docs/ja)",
            )


class ElmoBasicTokenizer:
    """Words to the model's input rows (the module docstring's rules), as transformers' `BasicTokenizer` is the part of
    `BertTokenizer` that needs no transformers: the segmenter (`ElmoSegmenter`), `do_lower_case` (every word but
    those of `keep_case`: the special and added tokens), the rows of UTF-8 bytes or of ELMoForManyLangs' vocabularies
    (`char_vocab`, `word_vocab`: {token: id} of char.dic / word.dic), and the language model's word vocabulary
    (`words`: vocab.txt's lines; word id = line number)."""

    def __init__(
        self,
        max_characters_per_token=50,
        segmenter=None,
        do_lower_case=False,
        keep_case=(),
        char_vocab=None,
        word_vocab=None,
        words=None,
    ):
        value = max_characters_per_token
        if isinstance(value, bool) or not isinstance(value, int) or not 3 <= value <= MAX_CHARACTERS_PER_TOKEN:
            raise ValueError(
                f"max_characters_per_token must be an integer from 3 to {MAX_CHARACTERS_PER_TOKEN:,} "
                f"(begin-of-word, at least one character, end-of-word), got {value!r:.100}"
            )
        if not isinstance(do_lower_case, bool):
            raise ValueError(f"do_lower_case must be True or False, got {do_lower_case!r:.100}")
        self.max_characters_per_token = max_characters_per_token
        self.segmenter = segmenter or ElmoSegmenter()
        self.do_lower_case, self.keep_case = do_lower_case, frozenset(keep_case)
        self.char_vocab, self.word_vocab = char_vocab, word_vocab
        self.words = [BOS_WORD, EOS_WORD, UNK_WORD] if words is None else list(words)
        self.vocab = {w: i for i, w in enumerate(self.words)}
        self._inverse = {}
        self._empty_table()

    def _empty_table(self):
        """The table of the rows of the words seen (`_row_numbers`): row 0 is padding (all zeros), then a row for
        each word, whose number `_row_of` gives; the lock lets threads share it."""
        self._lock = threading.Lock()
        self._row_of, self._table = {}, np.zeros((1024, self.input_width), np.int64)

    def __getstate__(self):  # pickled (datasets' map) or copied without the table of rows and its lock
        state = dict(self.__dict__)
        for name in ("_lock", "_row_of", "_table"):
            del state[name]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._empty_table()

    @classmethod
    def from_files(
        cls,
        max_characters_per_token=50,
        segmenter=None,
        do_lower_case=False,
        keep_case=(),
        vocab_file=None,
        char_vocab_file=None,
        word_vocab_file=None,
    ):
        """The tokenizer whose vocabularies are in these files: vocab.txt (`read_vocabulary`), char.dic and word.dic
        (`read_dic`)."""
        return cls(
            max_characters_per_token,
            segmenter,
            do_lower_case,
            keep_case,
            None if char_vocab_file is None else read_dic(char_vocab_file, CHAR_VOCAB_SYMBOLS),
            None if word_vocab_file is None else read_dic(word_vocab_file, WORD_VOCAB_SYMBOLS),
            None if vocab_file is None else read_vocabulary(vocab_file),
        )

    @classmethod
    def from_settings(cls, settings, **files):
        """The tokenizer a model folder's tokenizer_config.json (`settings`) describes (max_characters_per_token,
        segmenter, opencc_config, do_lower_case, the special and added tokens), with its vocabulary `files`
        (`from_files`)."""

        def content(token):  # a token as tokenizer_config.json holds it: a string, or an AddedToken's dict
            return token.get("content") if isinstance(token, dict) else token

        mask = content(settings.get("mask_token", MASK_WORD))
        kept = [content(settings.get(name)) for name in ("bos_token", "eos_token", "unk_token", "pad_token")]
        kept += [content(token) for token in (settings.get("added_tokens_decoder") or {}).values()]
        segmenter = ElmoSegmenter(settings.get("segmenter", "whitespace"), settings.get("opencc_config"), mask)
        return cls.from_files(
            settings.get("max_characters_per_token", 50),
            segmenter,
            settings.get("do_lower_case", False),
            {token for token in [*kept, mask] if isinstance(token, str)},
            **files,
        )

    def settings(self):
        """What decides the rows of a word besides the vocabularies (what a model's identity records)."""
        segmenter = self.segmenter
        return {
            "max_characters_per_token": self.max_characters_per_token,
            "segmenter": segmenter.segmenter,
            "opencc_config": segmenter.opencc_config,
            "mask_token": segmenter.mask_token,
            "do_lower_case": self.do_lower_case,
        }

    @property
    def mask_token(self):
        """The word the fill-mask pipeline fills (a segmenter keeps it whole)."""
        return self.segmenter.mask_token

    @property
    def splits_on_whitespace(self):
        """Whether raw text becomes words by `str.split()` alone (no segmenter, no OpenCC conversion)."""
        return self.segmenter.splits_on_whitespace

    def split_words(self, text):
        """The words of raw `text` as its segmenter splits it (not lower-cased: `cased`)."""
        return self.segmenter.split_words(text)

    def cased(self, words, keep_case=None):
        """`words` as the model reads them: lower-cased with `do_lower_case`, but those of `keep_case` (default: the
        special and added tokens given at construction)."""
        if not self.do_lower_case:
            return words
        kept = self.keep_case if keep_case is None else keep_case
        return [word if word in kept else word.lower() for word in words]

    @property
    def vocab_size(self):
        """Words in the language model's vocabulary (vocab.txt)."""
        return len(self.words)

    def word_id(self, word):
        """The language model's id of `word` (vocab.txt's line), `<UNK>`'s for a word outside it."""
        return self.vocab.get(word, self.vocab[UNK_WORD])

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
        """The `input_ids` row of one word as given (a tuple of `input_width` ints), by the module docstring's rules."""
        return tuple(self.rows([word])[0].tolist())

    def rows(self, words):
        """The `input_ids` rows of `words` as given (as the model reads them: `cased` already), [len(words),
        input_width] (int64), each word's row made once (`_row_numbers`)."""
        table, numbers = self._row_numbers([words])
        return table[numbers[0]]

    def encode(self, sentences):
        """{"input_ids": [batch, longest, input_width], "attention_mask": [batch, longest]} (int64 NumPy arrays) of
        word lists, as the model reads them (`cased`), padded on the right with all-zero rows: one NumPy gather from
        the table of rows (`_row_numbers`)."""
        table, numbers = self._row_numbers([self.cased(words) for words in sentences])
        return {"input_ids": table[numbers], "attention_mask": (numbers > 0).astype(np.int64)}

    def _row_numbers(self, sentences):
        """(table, numbers): the table of rows and the number of each word's row in it, [batch, longest] (0 for
        padding). Every row of the words of `sentences` (word lists as the model reads them) is made here, once
        (`_new_row`), and kept in the table: the one cache of this tokenizer's rows. A numbered row never changes (a
        full table is copied into a larger one, a table past WORD_CACHE_SIZE words replaced by an empty one), so the
        table returned is read outside the lock."""
        longest = max(map(len, sentences), default=0)
        numbers = np.zeros((len(sentences), longest), np.int64)
        with self._lock:
            if len(self._row_of) > WORD_CACHE_SIZE:
                self._row_of, self._table = {}, np.zeros_like(self._table[:1024])
            row_of, new_row = self._row_of, self._new_row
            for i, words in enumerate(sentences):
                numbers[i, : len(words)] = [row_of.get(word) or new_row(word) for word in words]
            return self._table, numbers

    def _new_row(self, word):
        """Add the row of `word` to the table (the byte rules, `word_to_char_ids`, or the vocabularies'); its
        number."""
        number = len(self._row_of) + 1
        if number == len(self._table):
            self._table = np.concatenate([self._table, np.zeros_like(self._table)])
        if self.vocabulary_inputs:
            self._table[number] = self._vocabulary_row(word)
        else:
            self._table[number] = word_to_char_ids(word, self.max_characters_per_token)
        self._row_of[word] = number
        return number

    def _vocabulary_row(self, word):
        max_chars = self.max_characters_per_token
        if len(word) > max_chars - 2:
            warn_once(
                "character cut", f"Words longer than {max_chars - 2} characters are cut to their first {max_chars - 2}."
            )
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
            raise ValueError(
                f"{where} must be rows of {self.input_width} integer ids per word, got "
                f"{array.dtype} values of shape {list(array.shape)}"
            )
        high = np.full(self.input_width, CHAR_VOCAB_SIZE - 1)
        if self.vocabulary_inputs:
            sizes = ([len(self.word_vocab)] if self.word_vocab else []) + [len(self.char_vocab or ())] * (
                self.input_width - (1 if self.word_vocab else 0)
            )
            high = np.array(sizes)
        if array.min() < 0 or (array > high).any():
            raise ValueError(
                f"{where} holds ids outside this tokenizer's range (0 to {high.max()}), e.g. "
                f"{array[(array < 0) | (array > high)][:3].tolist()}"
            )

    def row_to_word(self, row):
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
