"""The fill-mask pipeline (pipeline_elmo.ElmoFillMaskPipeline) on the converted AllenNLP LM fixture: LAMA's rule
(mean of the forward log-prob from the left context and the backward log-prob from the right context, normalised
over the vocabulary) computed from AllenNLP's own log-probabilities (tests/fixtures/allennlp-lm-tiny)."""

import json

import numpy as np
import pytest
import torch
from conftest import LM_FIXTURE as LM
from tolerance import assert_close_to_reference
from transformers import pipeline

import elmo_transformers

# (sentence, masked word): first, middle and last words, a one-word sentence, an OOV word, the longest sentence.
MASKED = [(0, 0), (0, 4), (1, 6), (2, 1), (3, 0), (4, 3), (5, 9)]


def reference_scores(expected, sentence, word):
    """LAMA's score of every vocabulary word from AllenNLP's log-probs: the forward prediction of word k is at
    position k, the backward one at position k + 1 (position 0 predicts <S>)."""
    mean = 0.5 * (expected["forward_log_probs"][sentence, word] + expected["backward_log_probs"][sentence, word + 1])
    scores = np.exp(mean.astype(np.float64) - mean.max())
    return scores / scores.sum()


def masked_texts():
    sentences = json.loads((LM / "sentences.json").read_text(encoding="utf-8"))
    texts = []
    for i, k in MASKED:
        words = list(sentences[i])
        words[k] = "<mask>"
        texts.append(" ".join(words))
    return texts


@pytest.mark.fidelity
@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("remote_code", [True, False])
def test_ranking_and_scores_equal_allennlp(lm_dir, batch_size, remote_code):
    expected = dict(np.load(LM / "expected.npz", allow_pickle=False))
    words = (LM / "vocab.txt").read_text(encoding="utf-8").splitlines()
    if remote_code:  # registered here: the model is the installed class, the pipeline the folder's (the same code)
        fill = pipeline("fill-mask", model=str(lm_dir), trust_remote_code=True)
        assert type(fill).__module__.startswith("transformers_modules.")
    else:
        fill = pipeline("fill-mask", model=str(lm_dir), pipeline_class=elmo_transformers.ElmoFillMaskPipeline)
    assert type(fill.model).__module__ == "modeling_elmo"  # the installed class, not the folder's copy
    assert type(fill).__name__ == "ElmoFillMaskPipeline"
    texts = masked_texts()
    results = fill(texts, top_k=100, batch_size=batch_size)
    for (i, k), text, result in zip(MASKED, texts, results):
        want = reference_scores(expected, i, k)
        assert len(result) == len(words) - 3  # every word but <S>, </S>, <UNK>
        assert all(r["token_str"] not in ("<S>", "</S>", "<UNK>") for r in result)
        got_ids = [r["token"] for r in result]
        assert_close_to_reference([r["score"] for r in result], want[got_ids], what=text)
        ranked = [j for j in np.argsort(-want, kind="stable") if words[j] not in ("<S>", "</S>", "<UNK>")]
        assert got_ids == ranked, text
        for r in result:
            assert r["token_str"] == words[r["token"]] and r["sequence"] == text.replace("<mask>", r["token_str"])
    # The scores are normalised over the whole vocabulary: with the special words they sum to 1.
    specials = sum(reference_scores(expected, *MASKED[0])[words.index(w)] for w in ("<S>", "</S>", "<UNK>"))
    assert abs(sum(r["score"] for r in results[0]) + specials - 1) < 1e-5


def test_top_k_targets_and_whitespace(lm_dir):
    expected = dict(np.load(LM / "expected.npz", allow_pickle=False))
    words = (LM / "vocab.txt").read_text(encoding="utf-8").splitlines()
    fill = pipeline("fill-mask", model=str(lm_dir), pipeline_class=elmo_transformers.ElmoFillMaskPipeline)
    text = "He  sat\ton <mask> bank of the river ."  # sentence 0, word 3; odd white space is kept in `sequence`
    top = fill(text, top_k=2)
    assert len(top) == 2 and top[0]["score"] >= top[1]["score"]
    assert top[0]["sequence"] == text.replace("<mask>", top[0]["token_str"])
    targets = ["river", "the", "film"]
    got = fill(text, targets=targets)
    want = reference_scores(expected, 0, 3)
    assert sorted(r["token_str"] for r in got) == sorted(targets)
    assert [r["token_str"] for r in got] == sorted(targets, key=lambda w: -want[words.index(w)])
    assert_close_to_reference([r["score"] for r in got], [want[words.index(r["token_str"])] for r in got])
    assert len(fill(text, targets="river", top_k=3)) == 1


@pytest.mark.parametrize(
    "text, kwargs, match",
    [
        ("no mask here", {}, "exactly one <mask>"),
        ("<mask> and <mask>", {}, "exactly one <mask>"),
        ("glued<mask> .", {}, "exactly one <mask>"),
        ("the <mask> .", {"targets": ["zebra"]}, r"not: \['zebra'\]"),
        ("the <mask> .", {"targets": ["<UNK>"]}, r"not: \['<UNK>'\]"),
        ("the <mask> .", {"top_k": 0}, "top_k must be a positive int"),
    ],
)
def test_bad_input_is_refused_by_name(lm_dir, text, kwargs, match):
    fill = pipeline("fill-mask", model=str(lm_dir), pipeline_class=elmo_transformers.ElmoFillMaskPipeline)
    with pytest.raises(ValueError, match=match):
        fill(text, **kwargs)


def test_masked_word_log_probs_never_read_the_masked_word(lm_dir):
    from modeling_elmo import ElmoForLanguageModeling
    from tokenization_elmo import ElmoTokenizer

    model, tokenizer = ElmoForLanguageModeling.from_pretrained(lm_dir).eval(), ElmoTokenizer.from_pretrained(lm_dir)
    batch = tokenizer([["a", "<mask>", "movie"], ["a", "good", "movie"]], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        scores = model.masked_word_log_probs(**batch, positions=1)
    assert torch.equal(scores[0], scores[1])
    with pytest.raises(ValueError, match="one word index per sentence"):
        model.masked_word_log_probs(**batch, positions=torch.tensor([1, 3]))


def test_a_folder_of_another_version_is_not_mixed_with_the_installed_code(lm_dir, tmp_path):
    """After register(), trust_remote_code takes the model from the installed package and the pipeline from the
    folder: that runs where the folder's files are the installed code, and is refused in one message naming both
    ways where one of them differs (a folder saved by another version)."""
    import shutil

    elmo_transformers.register()
    other = shutil.copytree(lm_dir, tmp_path / "other-version")
    with open(other / "tokenization_elmo.py", "a", encoding="utf-8") as f:
        f.write("\n# saved by another version\n")
    with pytest.raises(
        ValueError,
        match=r"would mix two versions of the code .*the folder's files differ from the "
        r"installed package's.*pipeline_class=elmo_transformers.ElmoFillMaskPipeline",
    ):
        pipeline("fill-mask", model=str(other), trust_remote_code=True)
    fill = pipeline("fill-mask", model=str(other), pipeline_class=elmo_transformers.ElmoFillMaskPipeline)
    assert fill("the <mask> sat", top_k=1)
