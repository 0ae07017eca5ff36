"""`pipeline("feature-extraction")` gives AllenNLP's ELMo vectors per word; masked_mean gives sentence vectors."""

import numpy as np
import pytest
import torch
from conftest import load_fixture
from transformers import pipeline

from modeling_elmo import masked_mean


@pytest.fixture(scope="module")
def extractor(tiny_model_dir):
    return pipeline("feature-extraction", model=str(tiny_model_dir), trust_remote_code=True)


def test_feature_extraction_gives_allennlp_elmo_vectors(extractor):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    for i in (0, 1, 3, 5, 9):  # ASCII, one word, accents, emoji + ZWJ, a long mixed sentence
        vectors = np.array(extractor(" ".join(sentences[i])))
        n = int(expected["n_tokens"][i])
        assert vectors.shape == (1, n, 16)
        np.testing.assert_allclose(vectors[0], expected["elmo_representation"][i, :n], atol=1e-5, rtol=0)


def test_sentence_vectors_are_the_masked_mean(extractor, tiny):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    model, tokenizer = tiny
    batch = tokenizer(sentences[:4], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    got = masked_mean(out.last_hidden_state, out.mask).numpy()
    want = [expected["elmo_representation"][i, : expected["n_tokens"][i]].mean(axis=0) for i in range(4)]
    np.testing.assert_allclose(got, np.stack(want), atol=1e-5, rtol=0)
    # The pipeline's one-sentence output: the same vector as the batched model's.
    single = extractor(" ".join(sentences[2]), return_tensors=True)
    np.testing.assert_allclose(masked_mean(single, torch.ones(single.shape[:2])).numpy()[0], want[2], atol=1e-5)
    # A sentence with no words: no word vectors, a zero sentence vector (not NaN).
    empty = extractor("", return_tensors=True)
    assert empty.shape == (1, 0, 16)
    assert masked_mean(empty, torch.ones(empty.shape[:2])).abs().sum() == 0
