"""The converted fixtures reproduce AllenNLP's own outputs, and the NumPy reference covers what AllenNLP cannot run."""

import json

import numpy as np
import pytest
import torch
from conftest import FIXTURE_NAMES, FIXTURES, load_fixture
from tolerance import assert_close_to_reference
from elmo_transformers.conversion.allennlp import convert, options_from_config, write_random_weights
from reference_elmo import load_hdf5, reference_sentence

from configuration_elmo import ElmoConfig

pytestmark = pytest.mark.fidelity


def run(model, tokenizer, sentences):
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return enc, model(**enc, output_hidden_states=True)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_char_ids_equal_batch_to_ids(tiny, name):
    _, tokenizer = tiny
    sentences, expected, _ = load_fixture(name)
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    np.testing.assert_array_equal(enc["input_ids"].numpy(), expected["char_ids"])
    np.testing.assert_array_equal(enc["attention_mask"].numpy().astype(bool), expected["mask"])


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_layers_and_elmo_match_allennlp(tiny, name):
    model, tokenizer = tiny
    sentences, expected, _ = load_fixture(name)
    _, out = run(model, tokenizer, sentences)
    layers = torch.stack(out.hidden_states).numpy()
    assert layers.shape == expected["bilm_activations"].shape
    assert_close_to_reference(layers, expected["bilm_activations"], "biLM layers")
    assert_close_to_reference(out.last_hidden_state, expected["elmo_representation"], "ELMo vectors")
    assert out.elmo_representations[0] is out.last_hidden_state
    np.testing.assert_array_equal(out.mask.numpy(), expected["mask"])
    mix = model.scalar_mixes[0]
    assert_close_to_reference(torch.softmax(mix.scalar_parameters, 0), expected["scalar_mix_normed_weights"], "mix")
    assert_close_to_reference(mix.gamma, expected["scalar_mix_gamma"], "gamma")
    for i, n in enumerate(expected["n_tokens"]):  # the per-sentence, unpadded arrays
        assert_close_to_reference(layers[:, i, :n], expected[f"sent_{i}_activations"], f"sentence {i}")
        assert not layers[:, i, n:].any(), "padding must be zeros"


def test_clipping_really_happens_in_fixture():
    """Guards the fixture's value as a test of clipping: AllenNLP clipped 20% of cells there."""
    _, expected, _ = load_fixture("allennlp-tiny")
    assert expected["clip_memory_clipped"].sum() > 1000 and expected["clip_proj_clipped"].sum() > 100


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_numpy_reference_matches_allennlp(name):
    """Validates reference_elmo.py itself, so that it can stand in where AllenNLP cannot."""
    sentences, expected, options = load_fixture(name)
    arrays = load_hdf5(FIXTURES / name / "weights.hdf5")
    for i, n in enumerate(expected["n_tokens"]):
        if n == 0:
            continue
        ref = reference_sentence(arrays, options, expected["char_ids"][i, :n])
        assert_close_to_reference(ref, expected[f"sent_{i}_activations"], f"sentence {i}")


VARIANTS = {
    "no-skip-connections": dict(use_skip_connections=False),
    "one-layer-flat-bilm-tf": dict(n_layers=1, flat=True),
    "one-layer-nested": dict(n_layers=1),
    "three-layers-tanh-no-clip": dict(n_layers=3, activation="tanh", cell_clip=None, proj_clip=None),
    "n-characters-261-two-highway": dict(n_characters=261, n_highway=2),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variants_match_numpy_reference(tmp_path, variant):
    settings = dict(VARIANTS[variant])
    flat = settings.pop("flat", False)
    fields = dict(
        char_embedding_dim=4,
        filters=[[1, 4], [2, 8], [3, 16]],
        n_highway=1,
        lstm_dim=16,
        projection_dim=8,
        n_layers=2,
        cell_clip=3.0,
        proj_clip=3.0,
    )
    fields.update(settings)
    options = options_from_config(ElmoConfig(**fields))
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_random_weights(ElmoConfig(**fields), tmp_path / "weights.hdf5", seed=7, scale=3.0, flat=flat)

    model, tokenizer = convert(tmp_path / "options.json", tmp_path / "weights.hdf5")
    sentences = [["A", "short", "one", "."], ["x"], ["Longer", "sentence", "with", "café", "and", "😀", "!"]]
    enc, out = run(model, tokenizer, sentences)
    layers = torch.stack(out.hidden_states).numpy()
    assert layers.shape[0] == fields["n_layers"] + 1
    arrays = load_hdf5(tmp_path / "weights.hdf5")
    for i, words in enumerate(sentences):
        ref = reference_sentence(arrays, options, enc["input_ids"][i, : len(words)].numpy())
        assert_close_to_reference(layers[:, i, : len(words)], ref, f"sentence {i}")


@pytest.mark.slow
def test_original_size_in_float64_equals_the_float64_reference():
    """In float64 the port computes the NumPy reference's numbers on the Original size (2 x 4096 LSTM, projection
    512, the 2048-filter char CNN), with random weights large enough to clip cells and projections: only float64
    rounding remains. (In float32 the difference from exact arithmetic grows with the sentence length, for this port
    and AllenNLP alike: benchmarks/float32_vs_float64.py, docs/behaviour.md.)"""
    from elmo_transformers.conversion.allennlp import expected_shapes, to_state_dict
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    config = ElmoConfig()
    rng = np.random.default_rng(0)
    arrays = {
        name: rng.standard_normal(shape) * 3.0 * (2.0 / (sum(shape[-2:]) if len(shape) > 1 else shape[0])) ** 0.5
        for name, shape in expected_shapes(config).items()
    }  # the layout write_random_weights(scale=3) writes
    model = ElmoModel(config).double().eval()
    missing, unexpected = model.load_state_dict(to_state_dict(config, arrays), strict=False)
    assert not unexpected and all(name.startswith("scalar_mixes.") for name in missing)
    tokenizer = ElmoTokenizer()
    sentences = [["The", "cat", "sat", "on", "the", "mat", "."], ["ELMo", "!"], ["A", "third", "one"]]
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        layers = torch.stack(model(**enc, output_hidden_states=True).hidden_states).numpy()
    options = options_from_config(config)
    for i, words in enumerate(sentences):
        reference = reference_sentence(arrays, options, enc["input_ids"][i, : len(words)].numpy())
        assert np.abs(reference[1:]).max() > 2.9  # the clipped range is reached
        # float64 (unit roundoff 1.1e-16) through sums of up to 16,384 terms and the recurrence: measured 1e-13.
        np.testing.assert_allclose(layers[:, i, : len(words)], reference, rtol=1e-10, atol=1e-10)
