import json

import numpy as np
import pytest
import torch
from conftest import SHIPPED
from transformers import DataCollatorForTokenClassification, DataCollatorWithPadding

from basic_tokenization_elmo import char_ids_to_word, word_to_char_ids
from tokenization_elmo import ElmoTokenizer


@pytest.fixture(scope="module")
def tok():
    return ElmoTokenizer()


def test_char_rules_by_hand(tok):
    ids = word_to_char_ids("ab")
    assert ids[:4] == (259, 98, 99, 260) and set(ids[4:]) == {261} and len(ids) == 50
    assert word_to_char_ids("") == (259, 260) + (261,) * 48  # the empty string is a real word
    assert word_to_char_ids("<S>")[:3] == (259, 257, 260)
    assert word_to_char_ids("</S>")[:3] == (259, 258, 260)


def test_48_byte_rule_and_lone_surrogate(tok):
    long = "é" * 500  # 1000 UTF-8 bytes
    ids = word_to_char_ids(long)
    assert ids[1:49] == tuple(b + 1 for b in long.encode()[:48]) and ids[49] == 260
    assert word_to_char_ids("x" * 1000) == word_to_char_ids("x" * 48)  # documented: cut, not rejected
    assert word_to_char_ids("a\ud800b") == word_to_char_ids("ab")  # unencodable code points are dropped


def test_one_row_encoder_with_one_cache(monkeypatch):
    """The tokenizer, its basic tokenizer (what `embed` and the inference core call) and `token_row` make rows by
    the same code, from one table: each distinct word's row is made once, whichever asks first; a copy or a pickle
    starts with an empty table and makes the same rows; a tokenizer past WORD_CACHE_SIZE words starts again."""
    import copy
    import pickle

    import basic_tokenization_elmo

    made = []
    monkeypatch.setattr(
        basic_tokenization_elmo,
        "word_to_char_ids",
        lambda word, max_chars: made.append(word) or word_to_char_ids(word, max_chars),
    )
    tokenizer = ElmoTokenizer()
    sentences = [["Hello", "world", "!"], [], ["x" * 60, "café", "東京", "Hello"], ["<S>", "</S>"]]
    words = ["Hello", "world", "!", "x" * 60, "café", "東京", "<S>", "</S>"]
    expected = np.zeros((4, 4, 50), np.int64)
    for i, sentence in enumerate(sentences):
        expected[i, : len(sentence)] = [word_to_char_ids(word) for word in sentence] or np.zeros((0, 50))
    for _ in range(2):
        ragged = tokenizer(sentences, is_split_into_words=True)["input_ids"]
        assert ragged == [[list(word_to_char_ids(word)) for word in sentence] for sentence in sentences]
        encoded = tokenizer.basic.encode(sentences)
        assert encoded["input_ids"].dtype == np.int64
        np.testing.assert_array_equal(encoded["input_ids"], expected)
        np.testing.assert_array_equal(encoded["attention_mask"], expected.any(axis=-1))
        assert [tokenizer.token_row(word) for word in words] == [word_to_char_ids(word) for word in words]
    assert made == words
    for copied in (copy.deepcopy(tokenizer), pickle.loads(pickle.dumps(tokenizer))):
        np.testing.assert_array_equal(copied.basic.encode(sentences)["input_ids"], expected)
    assert made == words * 3
    monkeypatch.setattr(basic_tokenization_elmo, "WORD_CACHE_SIZE", 4)
    made.clear()
    tokenizer.basic.encode([["a", "b", "c"]])  # 8 words kept, past 4: an empty table, then these 3
    tokenizer.basic.encode([["a", "d", "e"]])  # 5 words kept
    assert tokenizer.token_row("a") == word_to_char_ids("a")  # an empty table again: "a" made again
    assert made == ["a", "b", "c", "d", "e", "a"]


def test_raw_text_whitespace_split_and_shapes(tok):
    single = tok("Hello   world\t!\n")
    assert np.array(single["input_ids"]).shape == (3, 50) and single["attention_mask"] == [1, 1, 1]
    pt = tok("Hello world !", return_tensors="pt")
    assert pt["input_ids"].shape == (1, 3, 50) and pt["input_ids"].dtype == torch.long
    batch = tok(["a b c", "d", "   "], padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (3, 3, 50)
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]]
    assert not batch["input_ids"][1, 1:].any() and not batch["input_ids"][2].any()


def test_pretokenized_equals_raw(tok):
    a = tok([["Hello", "world"], ["x"]], is_split_into_words=True, padding=True, return_tensors="pt")
    b = tok(["Hello world", "x"], padding=True, return_tensors="pt")
    assert torch.equal(a["input_ids"], b["input_ids"])
    one = tok(["Hello", "world"], is_split_into_words=True)
    assert one["input_ids"] == a["input_ids"][0].tolist()


def test_padding_and_truncation_count_words(tok):
    enc = tok(["a b c d e", "f"], padding="max_length", truncation=True, max_length=3, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 3, 50)
    assert enc["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    enc = tok(["a b c", "f"], padding=True, pad_to_multiple_of=4, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 4, 50)
    with pytest.raises(ValueError, match="right"):
        tok(["a b", "c"], padding=True, padding_side="left")


def test_word_ids_alignment(tok):
    enc = tok(["a b c", "d"], padding=True, return_tensors="pt")
    assert enc.word_ids(0) == [0, 1, 2] and enc.word_ids(1) == [0, None, None]
    assert tok("x y").word_ids() == [0, 1]


def test_pad_collators_with_3d_ids(tok):
    features = [dict(tok(s)) for s in ["a b c", "d", "e f"]]
    batch = DataCollatorWithPadding(tok)(features)
    assert batch["input_ids"].shape == (3, 3, 50) and batch["attention_mask"].shape == (3, 3)
    labelled = [dict(f, labels=list(range(len(f["attention_mask"])))) for f in features]
    batch = DataCollatorForTokenClassification(tok)(labelled)
    assert batch["labels"].tolist() == [[0, 1, 2], [0, -100, -100], [0, 1, -100]]
    assert batch["input_ids"].shape == (3, 3, 50)
    seq = [dict(f, label=i % 2) for i, f in enumerate(features)]
    assert DataCollatorWithPadding(tok)(seq)["labels"].tolist() == [0, 1, 0]


def test_pad_accepts_tensors(tok):
    enc = tok("a b", return_tensors="pt")
    padded = tok.pad({"input_ids": enc["input_ids"]}, padding="max_length", max_length=4)
    assert padded["input_ids"].shape == (1, 4, 50) and padded["attention_mask"].tolist() == [[1, 1, 0, 0]]


def test_decode_is_best_effort_inverse(tok):
    enc = tok(["Hello café 😀", "<S> x </S>"], padding=True, return_tensors="pt")
    assert tok.decode(enc["input_ids"][0]) == "Hello café 😀"
    assert tok.batch_decode(enc["input_ids"], skip_special_tokens=True) == ["Hello café 😀", "x"]
    assert tok.decode(enc["input_ids"][0, 0]) == "Hello"
    cut = char_ids_to_word(word_to_char_ids("x" * 47 + "é"))  # the cut splits the two bytes of é
    assert cut == "x" * 47 + "\ufffd"


def test_save_and_load_with_vocabulary(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\nthe\ncat\n", encoding="utf-8")
    tok = ElmoTokenizer(vocab_file=str(vocab), max_characters_per_token=20)
    assert tok.convert_tokens_to_ids(["the", "dog", "<S>"]) == [3, 2, 0]
    tok.save_pretrained(tmp_path / "saved")
    again = ElmoTokenizer.from_pretrained(tmp_path / "saved")
    assert again.get_vocab() == tok.get_vocab() and again.max_characters_per_token == 20
    assert again("the cat", return_tensors="pt")["input_ids"].shape == (1, 2, 20)
    bad = tmp_path / "bad.txt"
    bad.write_text("the\n<S>\ncat\n")
    with pytest.raises(ValueError, match=r"lacks the words \['</S>', '<UNK>'\]"):
        ElmoTokenizer(vocab_file=str(bad))
    lm_1b = tmp_path / "lm_1b.txt"  # lm_1b's order; word ids are line numbers
    lm_1b.write_text("</S>\n<S>\n<UNK>\nthe\n", encoding="utf-8")
    tok = ElmoTokenizer(vocab_file=str(lm_1b))
    assert (tok.bos_token_id, tok.eos_token_id, tok.unk_token_id, tok.vocab_size) == (1, 0, 2, 4)
    assert tok.convert_tokens_to_ids(["the", "dog"]) == [3, 2] and tok.mask_token == "<mask>"


@pytest.mark.parametrize(
    "text, kwargs, error, match",
    [
        ([], {}, ValueError, "empty batch"),
        (None, {}, ValueError, "text"),
        ([["a", None]], {"is_split_into_words": True}, TypeError, "sentence 0, word 1 is None"),
        (["a", 3], {}, TypeError, "sentence 1 is 3"),
        ([["a", "b"]], {}, ValueError, "is_split_into_words=True"),
        (["a", ["b"]], {"is_split_into_words": True}, TypeError, "sentence 0 is 'a'"),
        ("a b", {"is_split_into_words": True}, TypeError, "expects a list of words"),
        (12, {}, TypeError, "expects a str"),
        ("a", {"text_pair": ["b"]}, ValueError, "text is one sentence, text_pair a batch of 1"),
        (["a", "b"], {"text_pair": ["c"]}, ValueError, "text is a batch of 2, text_pair a batch of 1"),
        (
            "a",
            {"text_pair": "b", "return_overflowing_tokens": True, "truncation": True, "max_length": 1},
            ValueError,
            "return_overflowing_tokens with text_pair",
        ),
    ],
)
def test_bad_input_is_named(tok, text, kwargs, error, match):
    with pytest.raises(error, match=match):
        tok(text, **kwargs)


def test_empty_inputs_are_defined(tok):
    assert tok("")["input_ids"] == [] and tok("   \t\n")["attention_mask"] == []
    enc = tok(["", " "], padding=True, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 0, 50)
    assert tok([], is_split_into_words=True)["input_ids"] == []  # one pre-tokenized sentence with no words


def test_ids_the_tokenizer_could_not_have_made_are_refused(tok):
    """pad (data collators) and decode take ids from users: floats, bools and out-of-range ids are refused; a
    negative max_length is not read as "keep everything"."""
    row = tok(["a"], is_split_into_words=False)["input_ids"][0][0]
    for bad, match in [
        ([[[1.5] * 50]], "integer ids per word, got float64"),
        ([[[True] * 50]], "got bool"),
        ([[[-1] * 50]], r"outside this tokenizer's range \(0 to 261\), e.g. \[-1"),
        ([[[262] * 50]], r"e.g. \[262"),
    ]:
        with pytest.raises(ValueError, match=match):
            tok.pad({"input_ids": bad})
        with pytest.raises(ValueError, match=match):
            tok.decode(bad[0])
    assert tok.decode([row]) == "a" and tok.pad({"input_ids": [[row]]})["input_ids"] == [[row]]
    for max_length in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_length must be a non-negative int"):
            tok(["a b"], truncation=True, max_length=max_length)


def test_do_lower_case_lower_cases_every_word_but_the_special_and_added_tokens(tmp_path):
    """transformers passes do_lower_case to every tokenizer: for ELMo it means something (a model trained on
    lower-cased text), so it is done, kept by save_pretrained, and leaves <S>, <mask> and added tokens whole."""
    lower = ElmoTokenizer(do_lower_case=True)
    lower.add_tokens(["[NEW]"], special_tokens=True)
    cased = ElmoTokenizer()
    assert lower.tokenize("The CAT <mask> <S> [NEW]") == ["the", "cat", "<mask>", "<S>", "[NEW]"]
    assert lower("The CAT sat")["input_ids"] == cased("the cat sat")["input_ids"]
    assert lower(["The", "Ünïcode"], is_split_into_words=True)["input_ids"] == cased("the ünïcode")["input_ids"]
    assert cased("The")["input_ids"] != lower("The")["input_ids"]
    lower.save_pretrained(tmp_path)
    assert ElmoTokenizer.from_pretrained(tmp_path).tokenize("The Cat") == ["the", "cat"]
    with pytest.raises(ValueError, match="do_lower_case must be True or False, got 'yes'"):
        ElmoTokenizer(do_lower_case="yes")


@pytest.mark.parametrize(
    "option",
    [{"strip_accents": True}, {"tokenize_chinese_chars": True}, {"add_bos_token": True}, {"add_eos_token": True}],
)
def test_options_that_would_change_the_vectors_are_refused_by_name(option):
    """Accepting these and doing nothing would silently give other vectors than asked for: refused in one line, also
    through from_pretrained (where the option is passed on to __init__)."""
    ((name, value),) = option.items()
    for make in (lambda: ElmoTokenizer(**option), lambda: ElmoTokenizer.from_pretrained(SHIPPED, **option)):
        with pytest.raises(ValueError, match=f"ElmoTokenizer cannot honour {name}={value}: .*; leave it out"):
            make()


@pytest.mark.parametrize(
    "option",
    [
        {"add_prefix_space": True},
        {"never_split": ["x"]},
        {"wordpieces_prefix": "##"},
        {"add_bos_token": False},
        {"strip_accents": False},
        {"do_lower_case": False},
    ],
)
def test_options_of_other_tokenizers_that_mean_nothing_here_are_accepted(option, caplog):
    """What transformers passes to every tokenizer is accepted: an option that asks for what ELMo's rules do anyway
    silently, one that means nothing for words split on white space with a one-time warning naming it; the
    numbers are those of the plain tokenizer."""
    ((name, value),) = option.items()
    plain = ElmoTokenizer()("Some words here")["input_ids"]
    with caplog.at_level("WARNING"):
        tokenizer = ElmoTokenizer.from_pretrained(SHIPPED, **option)
        ElmoTokenizer(**option)
    assert tokenizer("Some words here")["input_ids"] == plain
    assert tokenizer.init_kwargs[name] == value
    warned = [r.getMessage() for r in caplog.records if f"ElmoTokenizer ignores {name}=" in r.getMessage()]
    meaningless = name in ("add_prefix_space", "never_split", "wordpieces_prefix")
    assert len(warned) == (1 if meaningless else 0), caplog.text


def test_options_named_like_methods_are_refused_as_transformers_refuses_them():
    with pytest.raises(AttributeError, match="add_special_tokens conflicts with the method"):
        ElmoTokenizer(add_special_tokens=True)


def test_get_vocab_includes_added_tokens():
    tokenizer = ElmoTokenizer()
    tokenizer.add_tokens(["[NEW]"])
    vocab = tokenizer.get_vocab()
    assert vocab == {"<S>": 0, "</S>": 1, "<UNK>": 2, "<pad>": 3, "<mask>": 4, "[NEW]": 5}
    assert len(vocab) == len(tokenizer) and tokenizer.vocab_size == 3  # the LM softmax's words stay 3


def test_overflowing_tokens_are_windows_of_words(tok):
    """return_overflowing_tokens, as transformers' fast tokenizers give it: every word in a window of max_length
    words, `stride` words shared by neighbours, overflow_to_sample_mapping naming each window's sentence."""

    def windows(text, **kwargs):
        encoding = tok(text, truncation=True, return_overflowing_tokens=True, **kwargs)
        return tok.batch_decode(encoding["input_ids"]), encoding["overflow_to_sample_mapping"]

    assert windows("a b c d e", max_length=2) == (["a b", "c d", "e"], [0, 0, 0])
    assert windows("a b c d e", max_length=3, stride=1) == (["a b c", "c d e"], [0, 0])
    assert windows(["a b c", "d", ""], max_length=2) == (["a b", "c", "d", ""], [0, 0, 1, 2])
    batch = tok(
        ["a b c", "d"], max_length=2, truncation=True, padding=True, return_overflowing_tokens=True, return_tensors="pt"
    )
    assert batch["input_ids"].shape == (3, 2, 50) and batch["overflow_to_sample_mapping"].tolist() == [0, 0, 1]
    assert batch["attention_mask"].tolist() == [[1, 1], [1, 0], [1, 0]]
    for stride in (2, -1):
        with pytest.raises(ValueError, match=f"stride must be an int from 0 to max_length - 1 = 1 .*got {stride}"):
            tok("a b c", max_length=2, truncation=True, stride=stride, return_overflowing_tokens=True)


@pytest.mark.parametrize("field, value", [("segmenter", ["jieba"]), ("segmenter", "mecab"), ("opencc_config", ["s2t"])])
def test_a_segmenter_of_the_wrong_type_in_tokenizer_config_is_one_line(tmp_path, field, value):
    """A list where tokenizer_config.json wants a name is a one-line ValueError naming the value and where to set it,
    not a raw TypeError (unhashable type)."""
    ElmoTokenizer().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(ValueError) as refused:
        ElmoTokenizer.from_pretrained(tmp_path)
    message = str(refused.value)
    assert "\n" not in message and repr(value) in message and "set it so in tokenizer_config.json" in message


@pytest.mark.parametrize(
    "option",
    [
        {"bos_token": "<s>"},
        {"eos_token": "</s>"},
        {"unk_token": "[UNK]"},
        {"clean_up_tokenization_spaces": True},
        {"split_special_tokens": True},
        {"model_input_names": ["input_ids"]},
        {"padding_side": "left"},
    ],
)
def test_option_values_the_rules_cannot_honour_are_refused(option):
    (name,) = option
    with pytest.raises(ValueError, match=name):
        ElmoTokenizer(**option)


def test_call_options_the_rules_cannot_honour_are_refused(tok):
    with pytest.raises(ValueError, match="split_special_tokens"):
        tok("a b", split_special_tokens=True)
    with pytest.raises(ValueError, match="clean_up_tokenization_spaces"):
        tok.decode(tok("a .")["input_ids"], clean_up_tokenization_spaces=True)


def test_options_that_work():
    """truncation_side="left" keeps the last words; model_max_length bounds truncation=True; the shipped folder's
    own options (and from_pretrained's bookkeeping) load."""
    text = "one two three four"
    right = ElmoTokenizer(model_max_length=2)
    left = ElmoTokenizer(truncation_side="left")
    assert right.decode(right(text, truncation=True)["input_ids"]) == "one two"
    assert left.decode(left(text, truncation=True, max_length=2)["input_ids"]) == "three four"
    assert left.decode(left(text, truncation=True, max_length=0)["input_ids"]) == ""
    assert ElmoTokenizer.from_pretrained(SHIPPED, truncation_side="left").truncation_side == "left"


def test_text_pairs_are_two_sequences(tok):
    """A pair is the first sentence's fields as for one sentence, and the second's under `pair_`: each padded and
    truncated on its own, never joined; the data collators pad both."""
    row = lambda word: list(word_to_char_ids(word))  # noqa: E731
    one = tok("A man sleeps", "Nobody")
    assert one["input_ids"] == [row("A"), row("man"), row("sleeps")] and one["attention_mask"] == [1, 1, 1]
    assert one["pair_input_ids"] == [row("Nobody")] and one["pair_attention_mask"] == [1]
    batch = tok(["a b c", "d"], ["e", "f g"], padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == (2, 3, 50) and batch["pair_input_ids"].shape == (2, 2, 50)
    assert batch["pair_attention_mask"].tolist() == [[1, 0], [1, 1]]
    assert batch["pair_input_ids"][0, 1].eq(0).all() and batch["pair_input_ids"][1, 1].tolist() == row("g")
    words = tok(
        [["a", "b", "c"], ["d"]], [["e"], ["f", "g", "h"]], is_split_into_words=True, truncation=True, max_length=2
    )
    assert words["input_ids"] == [[row("a"), row("b")], [row("d")]]
    assert words["pair_input_ids"] == [[row("e")], [row("f"), row("g")]]
    features = [{key: values[i] for key, values in words.items()} for i in range(2)]
    collated = DataCollatorWithPadding(tok)(features)
    assert collated["input_ids"].shape == (2, 2, 50) and collated["pair_input_ids"].shape == (2, 2, 50)
    assert collated["attention_mask"].tolist() == [[1, 1], [1, 0]]
    assert collated["pair_attention_mask"].tolist() == [[1, 0], [1, 1]]
    for truncation, lengths in [
        (True, (2, 2)),
        ("longest_first", (2, 2)),
        ("only_first", (2, 4)),
        ("only_second", (3, 2)),
    ]:
        cut = tok("a b c", "d e f g", truncation=truncation, max_length=2)
        assert (len(cut["input_ids"]), len(cut["pair_input_ids"])) == lengths, truncation
    with pytest.raises(ValueError, match="truncation='only_second' truncates the second sentences of text pairs"):
        tok("a b c", truncation="only_second", max_length=2)
    with pytest.raises(ValueError, match="encoding 1 has the keys .* a batch is all text pairs or all single"):
        tok.pad([tok("a b", "c"), tok("d")])  # (the second's keys are fewer)
    with pytest.raises(ValueError, match="encoding 1 has the keys .* a batch is all text pairs or all single"):
        tok.pad([tok("d"), tok("a b", "c")])  # (its pair was dropped, silently)
