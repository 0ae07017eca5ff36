"""What one request of the demo page may take (demo/senses.py, demo/language_model.py): every limit is a one-line
refusal before any work, and what is accepted is embedded in bounded batches whose numbers equal each sentence run
alone."""

import re

import pytest
import torch
from conftest import SHIPPED
from tolerance import ATOL, RTOL

from elmo_transformers import ElmoEmbedder
from elmo_transformers.demo import senses
from elmo_transformers.demo.language_model import MAX_TEXT_WORDS, text_words
from elmo_transformers.errors import DataError
from modeling_elmo import ElmoModel
from tokenization_elmo import ElmoTokenizer


@pytest.fixture(scope="module")
def shipped():
    """transformers' model and tokenizer of the shipped model, and the page's embedder on them."""
    model, tokenizer = ElmoModel.from_pretrained(SHIPPED).eval(), ElmoTokenizer.from_pretrained(SHIPPED)
    return model, tokenizer, ElmoEmbedder(model, tokenizer)


def test_limits_are_refused_before_any_work(shipped):
    _, tokenizer, embedder = shipped
    cases = [
        (
            ["the bank " + "word " * 9_797] + ["bank"] * 199,
            "a sentence of 9,799 words (line 1): the limit is 500 words a sentence",
        ),
        (["bank " + "x" * 99_999, "bank"], "100,009 characters: the limit is 100,000 a request"),  # line end too
        (["The bank ."] * 201, "201 sentences: the limit is 200"),
    ]
    for sentences, message in cases:
        with pytest.raises(DataError, match=re.escape(message)):
            senses.word_uses(embedder, sentences, "bank")
    with pytest.raises(DataError, match="1,001 words: the limit is 1,000"):
        text_words("word " * (MAX_TEXT_WORDS + 1), tokenizer)
    assert len(text_words("word " * MAX_TEXT_WORDS, tokenizer)) == MAX_TEXT_WORDS  # one text may be one long sentence


def test_uses_are_embedded_in_bounded_batches_with_each_sentences_own_numbers(shipped):
    """Sentences of very different lengths, in batches of at most 40 padded words: each use's vector is the one
    of its sentence run alone; the sentences without the word are not run."""
    model, tokenizer, embedder = shipped
    sentences = [
        "The bank of the river was muddy after the rain .",
        "The bank lends money .",
        "A long line " + "about money and water " * 20 + "near the bank .",
        "No use of the word here .",
    ]
    places = [(i, j) for i, s in enumerate(sentences) for j, w in enumerate(s.split()) if w == "bank"]
    calls = []
    original = model.forward

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[:2])
        return original(*args, **kwargs)

    model.forward = counted
    try:
        vectors = senses.use_vectors(embedder, [s.split() for s in sentences], places, batch_words=40)
    finally:
        del model.forward
    assert [tuple(c) for c in calls] == [(2, 11), (1, 87)]  # shortest first; sentence 3 alone, sentence 4 not run
    with torch.no_grad():
        for use, (i, j) in enumerate(places):
            alone = model(**tokenizer([sentences[i]], return_tensors="pt"), output_hidden_states=True)
            for name, expected in [
                ("mix", alone.last_hidden_state[0, j]),
                *((f"layer {n}", h[0, j]) for n, h in enumerate(alone.hidden_states)),
            ]:
                torch.testing.assert_close(vectors[name][use], expected.float(), atol=ATOL, rtol=RTOL)


def test_a_request_past_its_time_budget_is_refused(shipped):
    embedder = shipped[2]
    with pytest.raises(DataError, match=r"ran past its time budget \(0 s on this machine\)"):
        senses.use_vectors(embedder, [["a", "bank", "."], ["the", "bank", "."]], [(0, 1), (1, 1)], time_budget=0)


def test_words_are_counted_as_the_models_tokenizer_splits_them(shipped):
    """A model whose tokenizer segments (jieba, for Chinese written without spaces) has its words counted as it
    splits them: a line of 520 words holds no white space, and str.split() would count it as one word."""
    model = shipped[0]
    tokenizer = ElmoTokenizer.from_pretrained(SHIPPED, segmenter="jieba")
    sentence = "我来到北京清华大学" * 130  # jieba's README example (我 / 来到 / 北京 / 清华大学), 130 times: 520 words
    assert " " not in sentence and len(sentence.split()) == 1
    with pytest.raises(DataError, match=re.escape("a sentence of 520 words (line 1): the limit is 500 words")):
        senses.word_uses(ElmoEmbedder(model, tokenizer), [sentence, "北京 北京"], "北京")
    with pytest.raises(DataError, match="1,040 words: the limit is 1,000"):
        text_words(sentence * 2, tokenizer)
    assert len(text_words(sentence, tokenizer)) == 520


def test_blank_lines_count_toward_the_limit(shipped):
    """Blank lines count toward a request's limit: they are counted before they are dropped."""
    _, tokenizer, embedder = shipped
    with pytest.raises(
        DataError, match=re.escape("100,019 characters: the limit is 100,000 a request (blank lines included)")
    ):
        senses.word_uses(embedder, ["The bank .", *[""] * 100_000, "A bank ."], "bank")
    with pytest.raises(DataError, match="characters: the limit is 100,000 a request"):
        text_words("a" + "\n" * 100_000 + "b", tokenizer)


def test_a_lone_surrogate_is_one_line(shipped):
    _, tokenizer, embedder = shipped
    message = "line 2 holds a lone surrogate (U+D800, character 5), which is not Unicode text: remove it"
    with pytest.raises(DataError, match=re.escape(message)):
        senses.word_uses(embedder, ["The bank .", "The \ud800 bank ."], "bank")
    with pytest.raises(DataError, match="line 1 holds a lone surrogate"):
        text_words("He sat \udfff .", tokenizer)


def test_the_surprise_scores_a_text_holding_mask_and_leaves_it_unscored(lm_dir):
    """The Surprise box scores a text holding <mask> (whose id is past the softmax) and leaves that word unscored."""
    from elmo_transformers.demo import model as demo_model
    from elmo_transformers.demo.language_model import word_scores

    loaded = demo_model.load(str(lm_dir))
    scores = word_scores(loaded.lm, loaded.tokenizer, "the <mask> sat on the mat .")
    assert scores.unknown[1] and scores.forward[1] is scores.backward[1] is scores.mean[1] is None
    assert scores.words[0] == "the" and not scores.unknown[0] and scores.mean[0] < 0
