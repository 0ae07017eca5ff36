"""sentence-transformers (a test extra, not a dependency): `SentenceTransformer(folder, trust_remote_code=True)` makes
a Transformer + mean Pooling model from the folder's feature extraction; its sentence vectors are TF-Hub's `default`
(the mean of the ELMo vectors, the scalar mix, over each sentence's words: `masked_mean`)."""

import numpy as np
import pytest
import sentence_transformers  # the test extra: pip install -e ".[test]"
from conftest import load_fixture
from tolerance import assert_close_to_reference

from elmo_transformers import DEFAULT_MODEL, ElmoEmbedder

# Sentences of different lengths in one batch (padding), a one-word sentence.
SENTENCES = ["The cat sat on the mat .", "ELMo is contextual", "Hello", "She put the money in the bank ."]


@pytest.mark.fidelity
def test_sentence_vectors_are_the_mean_of_allennlps_elmo_vectors(tiny_model_dir):
    """On the converted AllenNLP fixture: each sentence vector is the mean of AllenNLP's ELMo vectors of its words."""
    sentences, expected, _ = load_fixture("allennlp-tiny")
    model = sentence_transformers.SentenceTransformer(str(tiny_model_dir), trust_remote_code=True, device="cpu")
    got = model.encode([" ".join(words) for words in sentences if words], batch_size=4)
    want = np.stack([expected["elmo_representation"][i, : len(words)].mean(axis=0)
                     for i, words in enumerate(sentences) if words])
    assert_close_to_reference(got, want, what="SentenceTransformer.encode")


def test_the_default_model_gives_tf_hubs_default_output():
    model = sentence_transformers.SentenceTransformer(DEFAULT_MODEL, trust_remote_code=True, device="cpu")
    got = model.encode(SENTENCES, batch_size=4)
    want = ElmoEmbedder().tf_hub_outputs(SENTENCES)["default"].numpy()
    assert got.shape == (4, 256)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
