"""sentence-transformers (a test extra, not a dependency): `SentenceTransformer(folder)` (the package imported) or
with `trust_remote_code=True` gives TF-Hub's `default` sentence vector, the mean of the ELMo vectors over the
sentence's words."""

import numpy as np
import pytest
import sentence_transformers  # the test extra: pip install ".[test]"
from conftest import load_fixture
from tolerance import assert_close_to_reference

import elmo_transformers

elmo_transformers.register()  # SentenceTransformer(folder) then loads the installed code


@pytest.mark.slow
@pytest.mark.parametrize("trust_remote_code", [True, False], ids=["remote-code", "installed-code"])
def test_sentence_transformer_equals_tf_hub_default(tiny_model_dir, trust_remote_code):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    # Texts that whitespace splitting gives back as the fixture's words (the model reads whole words).
    kept = [i for i, words in enumerate(sentences) if words and " ".join(words).split() == words]
    model = sentence_transformers.SentenceTransformer(
        str(tiny_model_dir), trust_remote_code=trust_remote_code, device="cpu"
    )
    got = model.encode([" ".join(sentences[i]) for i in kept], batch_size=4)
    for row, i in zip(got, kept):
        n = len(sentences[i])  # AllenNLP's ELMo vectors of the sentence, averaged: TF-Hub's `default`
        want = expected["elmo_representation"][i, :n].mean(axis=0)
        assert_close_to_reference(np.asarray(row), want, what=f"sentence {i}")
    assert len(kept) >= 8
