"""Character-level ELMo tokenizer for transformers: words to the 50 character ids of AllenNLP's `batch_to_ids`.

`ElmoTokenizer` is transformers' tokenizer (padding, truncation, windows, decoding, saving) around
`basic_tokenization_elmo.ElmoBasicTokenizer`, which holds the rules: how raw text becomes words (the segmenters) and
words become rows of ids (UTF-8 bytes, or ELMoForManyLangs' vocabularies); its module docstring states them.
"""

import os

import numpy as np
from transformers import BatchEncoding
from transformers.tokenization_python import PreTrainedTokenizer
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

try:  # loaded as remote code, the modules are one package
    from .basic_tokenization_elmo import (
        BOS_WORD,
        EOS_WORD,
        MASK_WORD,
        PAD_WORD,
        UNK_WORD,
        VOCAB_BOS,
        VOCAB_EOS,
        VOCABULARY_FILES,
        ElmoBasicTokenizer,
        ElmoSegmenter,
        warn_once,
        write_dic,
    )
except ImportError:  # installed with pip, they are top-level modules
    from basic_tokenization_elmo import (
        BOS_WORD,
        EOS_WORD,
        MASK_WORD,
        PAD_WORD,
        UNK_WORD,
        VOCAB_BOS,
        VOCAB_EOS,
        VOCABULARY_FILES,
        ElmoBasicTokenizer,
        ElmoSegmenter,
        warn_once,
        write_dic,
    )

# What transformers' loading passes to __init__ besides options (from_pretrained's bookkeeping, saved configs).
LOADING_KEYS = frozenset(
    {
        "name_or_path",
        "added_tokens_decoder",
        "auto_map",
        "backend",
        "files_loaded",
        "is_local",
        "local_files_only",
        "tokenizer_file",
        "processor_class",
        "special_tokens_map_file",
        "tokenizer_class",
        "model_specific_special_tokens",
    }
)
# transformers' tokenizer options that work here as there (values ElmoTokenizer cannot honour are refused, see
# `check_options`).
BASE_OPTIONS = frozenset(
    {
        "model_max_length",
        "padding_side",
        "truncation_side",
        "model_input_names",
        "verbose",
        "extra_special_tokens",
        "additional_special_tokens",
        "clean_up_tokenization_spaces",
        "split_special_tokens",
        "chat_template",
    }
)
# Options of other tokenizers that ask for what ElmoTokenizer's rules already do at one value (accepted) and for a
# change of the words at the other (refused: accepting it would silently give other vectors than asked for).
# Any other option means nothing for words split on white space: it is stored and ignored, with a warning.
FIXED_OPTIONS = {
    "add_bos_token": (
        False,
        "the model adds <S> and </S> around every sentence itself; a second one would change every vector",
    ),
    "add_eos_token": (
        False,
        "the model adds <S> and </S> around every sentence itself; a second one would change every vector",
    ),
    "strip_accents": (False, "words keep every character, as the model read them in training"),
    "tokenize_chinese_chars": (
        False,
        "Chinese is split into words by the segmenter (segmenter='jieba'), not into characters",
    ),
}


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

    Text pairs (`tokenizer(text, text_pair)`) are two sequences, never joined: ELMo's vectors are those of each
    sentence on its own, so the second sentence comes as `pair_input_ids` and `pair_attention_mask` beside the first's
    `input_ids` and `attention_mask` (what `ElmoForSequenceClassification` and `ElmoForQuestionAnswering` read);
    truncation and padding apply to each of the two (`truncation="only_first"` or `"only_second"`: to that one).
    """

    vocab_files_names = VOCABULARY_FILES
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
        self.vocab_file = vocab_file
        self.basic = ElmoBasicTokenizer.from_files(
            max_characters_per_token,
            ElmoSegmenter(segmenter, opencc_config, mask_token),
            do_lower_case,
            vocab_file=vocab_file,
            char_vocab_file=char_vocab_file,
            word_vocab_file=word_vocab_file,
        )
        self.segmenter, self.opencc_config = segmenter, opencc_config
        self.max_characters_per_token, self.do_lower_case = max_characters_per_token, do_lower_case
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
                warn_once(
                    f"option {name}",
                    f"ElmoTokenizer ignores {name}={value!r:.100}: it is an option of other "
                    "tokenizers; ElmoTokenizer splits text into words (on white space, or with its segmenter) "
                    "and keeps every character of each word",
                )
        fixed = {"bos_token": BOS_WORD, "eos_token": EOS_WORD, "unk_token": UNK_WORD}
        for name, value in special_tokens.items():
            if str(value) != fixed[name]:
                raise ValueError(
                    f"ElmoTokenizer's {name} is {fixed[name]!r} (the character rules and the word "
                    f"vocabulary use it), got {str(value)!r:.100}"
                )
        if kwargs.setdefault("padding_side", "right") != "right":
            raise ValueError(
                "ElmoTokenizer pads on the right only (padding_side='right'): the biLM reads each "
                "sentence from position 0"
            )
        refused = {
            "clean_up_tokenization_spaces": False,
            "split_special_tokens": False,
            "model_input_names": ["input_ids", "attention_mask"],
        }
        for name, allowed in refused.items():
            value = kwargs.get(name)
            if value is not None and (list(value) if isinstance(value, (list, tuple)) else value) != allowed:
                raise ValueError(f"ElmoTokenizer does not support {name}={value!r:.100} (only {allowed!r})")

    # -- word vocabulary (language-model targets) -------------------------------------------------------------

    @property
    def vocab_size(self):
        return len(self.basic.words)

    @property
    def vocab(self):
        """The word vocabulary (vocab.txt: {word: id}), the LM softmax's words."""
        return self.basic.vocab

    @property
    def ids_to_words(self):
        return self.basic.words

    @property
    def char_vocab(self):
        return self.basic.char_vocab

    @property
    def word_vocab(self):
        return self.basic.word_vocab

    def get_vocab(self):
        """The word vocabulary (vocab.txt, `self.vocab`: the LM softmax's words), then the added tokens (`<pad>`,
        `<mask>`, `add_tokens`)."""
        return {**self.vocab, **self.added_tokens_encoder}

    def _convert_token_to_id(self, token):
        return self.basic.word_id(token)

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

    # -- words and characters: the rules of ElmoBasicTokenizer --------------------------------------------------

    @property
    def vocabulary_inputs(self):
        """True in character-vocabulary mode (ELMoForManyLangs), False for UTF-8 bytes (AllenNLP)."""
        return self.basic.vocabulary_inputs

    @property
    def input_width(self):
        """Ids per word: the word id (with a word vocabulary), then the char ids (bytes or a char vocabulary)."""
        return self.basic.input_width

    def token_row(self, word):
        """The `input_ids` row of one word (a tuple of `input_width` ints)."""
        return self.basic.token_row(word)

    def check_rows(self, rows, where="input_ids"):
        """Refuse word rows that this tokenizer could not have made (`ElmoBasicTokenizer.check_rows`)."""
        self.basic.check_rows(rows, where)

    def segment(self, text):
        """(words, spans) of raw `text` (`ElmoSegmenter.segment`): the words, and where each is in `text`."""
        return self.basic.segmenter.segment(text)

    @property
    def splits_on_whitespace(self):
        """Whether raw text becomes words by `str.split()` alone (no segmenter, no OpenCC conversion)."""
        return self.basic.splits_on_whitespace

    def split_words(self, text):
        """The words of raw `text`, as the segmenter splits it."""
        return self.basic.split_words(text)

    def tokenize(self, text, **kwargs):
        """The words of `split_words` (lower-cased with `do_lower_case`); no special-token splitting."""
        return self.cased(self.split_words(text))

    def _tokenize(self, text, **kwargs):
        return self.tokenize(text)

    def cased(self, words):
        """`words` as the model reads them: lower-cased with `do_lower_case`, but the special and added tokens."""
        return self.basic.cased(words, set(self.all_special_tokens) | set(self.added_tokens_encoder))

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
        unsupported = {
            "return_token_type_ids": return_token_type_ids,  # one sentence at a time: no token types
            "return_offsets_mapping": return_offsets_mapping,
            "stride": stride if not return_overflowing_tokens else 0,
            "return_overflowing_tokens with text_pair": return_overflowing_tokens and text_pair is not None,
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
        pairs = None
        if text_pair is not None:
            pair_batched, pairs = self._sentences(text_pair, is_split_into_words)
            if (pair_batched, len(pairs)) != (is_batched, len(sentences)):
                forms = [
                    f"a batch of {len(s)}" if batched else "one sentence"
                    for batched, s in ((is_batched, sentences), (pair_batched, pairs))
                ]
                raise ValueError(
                    f"text_pair must give a second sentence for each of text: text is {forms[0]}, text_pair {forms[1]}"
                )
        truncate = truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None
        windows_of = None
        if return_overflowing_tokens and truncate:
            sentences, windows_of = self.windows(sentences, max_length, stride)
            is_batched = True
        elif truncate:
            if truncation_strategy == TruncationStrategy.ONLY_SECOND and pairs is None:
                raise ValueError(
                    "truncation='only_second' truncates the second sentences of text pairs, and no text_pair was "
                    "given: pass truncation=True"
                )
            if truncation_strategy != TruncationStrategy.ONLY_SECOND:
                sentences = self.truncated(sentences, max_length)
            if pairs is not None and truncation_strategy != TruncationStrategy.ONLY_FIRST:
                pairs = self.truncated(pairs, max_length)
        encoded = {"input_ids": [self.basic.rows(words).tolist() for words in sentences]}
        if pairs is not None:
            encoded["pair_input_ids"] = [self.basic.rows(words).tolist() for words in pairs]
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

    def truncated(self, sentences, max_length):
        """Each sentence cut to its first `max_length` words (its last with `truncation_side="left"`)."""
        left = self.truncation_side == "left"
        return [words[len(words) - max_length :] if left else words[:max_length] for words in sentences]

    @staticmethod
    def windows(sentences, max_length, stride):
        """`return_overflowing_tokens`, as transformers' fast tokenizers give it: each sentence as windows of
        `max_length` words, each starting `stride` words before the previous one ends, left to right (every word in
        at least one window); returns the windows and the sentence of each (`overflow_to_sample_mapping`)."""
        if not (isinstance(stride, int) and 0 <= stride < max_length):
            raise ValueError(
                f"stride must be an int from 0 to max_length - 1 = {max_length - 1} (words the windows "
                f"of return_overflowing_tokens share), got {stride!r}"
            )
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
        A single sentence keeps no batch axis unless tensors are returned. Text pairs' second sentences
        (`pair_input_ids`, `pair_attention_mask`) are padded the same way, to their own length. Other keys (labels,
        lengths...) pass through unchanged.
        """
        if isinstance(encoded_inputs, (list, tuple)):
            if len(encoded_inputs) == 0:
                raise ValueError("empty batch: nothing to pad")
            for i, example in enumerate(encoded_inputs):
                if set(example.keys()) != set(encoded_inputs[0].keys()):
                    raise ValueError(
                        f"encoding {i} has the keys {sorted(example.keys())}, encoding 0 "
                        f"{sorted(encoded_inputs[0].keys())}: a batch is all text pairs or all single sentences"
                    )
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
        strategy, _, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding, max_length=max_length, verbose=verbose
        )
        # The first sentences, and the second ones of text pairs: each sequence padded to its own length.
        for prefix in ("", "pair_") if "pair_input_ids" in encoded else ("",):
            ids = encoded[prefix + "input_ids"]
            lengths = [len(s) for s in ids]
            for i, sentence in enumerate(ids):
                for j, chars in enumerate(sentence):
                    if len(chars) != self.input_width:
                        raise ValueError(
                            f"{prefix}sentence {i}, word {j} has {len(chars)} ids; expected {self.input_width}"
                        )
                self.check_rows(sentence, f"{prefix}sentence {i}")
            if prefix + "attention_mask" not in encoded and return_attention_mask is not False:
                encoded[prefix + "attention_mask"] = [[1] * n for n in lengths]
            target = None
            if strategy == PaddingStrategy.LONGEST:
                target = max(lengths)
            elif strategy == PaddingStrategy.MAX_LENGTH:
                target = max_length
            if target is not None and pad_to_multiple_of:
                target = -(-target // pad_to_multiple_of) * pad_to_multiple_of
            if target is not None:
                pads = {"input_ids": [0] * self.input_width, "attention_mask": 0, "special_tokens_mask": 1}
                for key, pad_value in pads.items():
                    if prefix + key in encoded:
                        encoded[prefix + key] = [
                            list(s) + [pad_value] * (target - len(s)) for s in encoded[prefix + key]
                        ]
            if return_tensors is not None and not any(encoded[prefix + "input_ids"]):
                # No sentence has a word: nested empty lists would lose the character axis.
                encoded[prefix + "input_ids"] = np.zeros((len(lengths), 0, self.input_width), dtype=np.int64)
        if not is_batched and return_tensors is None:
            encoded = {k: v[0] for k, v in encoded.items()}
        return ElmoBatchEncoding(encoded, tensor_type=return_tensors)

    # -- decoding -----------------------------------------------------------------------------------------------

    def decode(self, token_ids, skip_special_tokens=False, **kwargs):
        """Char ids back to text (best effort, see `char_ids_to_word`): one word [50] -> a word, one sentence
        [words, 50] -> a space-joined string, a batch [batch, words, 50] -> a list of strings. Padding words are
        skipped; `skip_special_tokens` also drops `<S>` and `</S>`."""
        if kwargs.get("clean_up_tokenization_spaces"):
            raise ValueError(
                "ElmoTokenizer does not support clean_up_tokenization_spaces=True: words are joined with "
                "one space, as they were split"
            )
        ids = token_ids.tolist() if hasattr(token_ids, "tolist") else token_ids
        self.check_rows(ids, "token_ids")
        if len(ids) and isinstance(ids[0], int):
            return self.basic.row_to_word(ids) or ""
        if _nesting_depth(ids) == 3:
            return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in ids]
        words = [self.basic.row_to_word(chars) for chars in ids]
        boundaries = {VOCAB_BOS, VOCAB_EOS} if self.vocabulary_inputs else {BOS_WORD, EOS_WORD}
        skip = {None, *boundaries} if skip_special_tokens else {None}
        return " ".join(w for w in words if w not in skip)

    def batch_decode(self, sequences, skip_special_tokens=False, **kwargs):
        ids = sequences.tolist() if hasattr(sequences, "tolist") else sequences
        return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in ids]
