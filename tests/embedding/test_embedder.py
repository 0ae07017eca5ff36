"""elmo_transformers.ElmoEmbedder / batch_to_ids / tf_hub_outputs against AllenNLP 2.10.1's own fixture outputs."""

import io
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from conftest import FIXTURE_NAMES, FIXTURES, load_fixture
from tolerance import assert_close_to_reference

from elmo_transformers import ElmoEmbedder, batch_to_ids


@pytest.fixture(scope="module")
def embedder(tiny_model_dir):
    return ElmoEmbedder(tiny_model_dir, device="cpu")


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_batch_to_ids_equals_allennlp(name):
    sentences, expected, _ = load_fixture(name)
    ids = batch_to_ids(sentences)
    assert ids.dtype == torch.int64
    np.testing.assert_array_equal(ids.numpy(), expected["char_ids"])


def test_batch_to_ids_rejects_what_allennlp_would_misread():
    with pytest.raises(TypeError, match="list of word lists"):
        batch_to_ids("Hello world")
    with pytest.raises(TypeError, match=r"sentence 1 is a str; pass each sentence as a list of words"):
        batch_to_ids([["a"], "b c"])
    with pytest.raises(ValueError, match="empty batch"):
        batch_to_ids([])


@pytest.mark.slow
@pytest.mark.fidelity
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_embed_batch_and_embed_sentence_match_allennlp(embedder, name):
    sentences, expected, _ = load_fixture(name)
    batch = embedder.embed_batch(sentences)
    assert len(batch) == len(sentences)
    for i, (words, vectors) in enumerate(zip(sentences, batch)):
        want = expected[f"sent_{i}_activations"]  # AllenNLP: (3, n, 2P), (3, 0, 2P) for an empty sentence
        assert vectors.dtype == np.float32 and vectors.shape == want.shape == (3, len(words), 16)
        assert_close_to_reference(vectors, want, what=f"{name} embed_batch sentence {i}")
        assert_close_to_reference(embedder.embed_sentence(words), want, what=f"{name} embed_sentence {i}")


@pytest.mark.fidelity
def test_batch_to_embeddings_has_allennlp_layout(embedder):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    activations, mask = embedder.batch_to_embeddings(sentences)
    assert activations.shape == (12, 3, 60, 16)  # AllenNLP: [batch, layers, words, 2P]
    assert_close_to_reference(activations.transpose(0, 1), expected["bilm_activations"], what="batch_to_embeddings")
    np.testing.assert_array_equal(mask.numpy(), expected["mask"])


def test_embed_sentences_is_lazy_and_keeps_the_input_order(embedder):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    consumed = []

    def source():
        for i, words in enumerate(sentences):
            consumed.append(i)
            yield words

    vectors = embedder.embed_sentences(source(), batch_size=5)
    assert consumed == []  # nothing read before the first result is asked for
    first = next(vectors)
    assert consumed == [0, 1, 2, 3, 4]
    rest = list(vectors)
    assert len(rest) == 11 and consumed == list(range(12))
    for i, got in enumerate([first, *rest]):
        assert_close_to_reference(got, expected[f"sent_{i}_activations"], what=f"embed_sentences {i}")
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        next(embedder.embed_sentences(sentences, batch_size=0))


@pytest.mark.fidelity
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_tf_hub_outputs_match_allennlp(embedder, name):
    sentences, expected, _ = load_fixture(name)
    out = embedder.tf_hub_outputs(sentences)
    batch, longest = expected["mask"].shape
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "word_emb": (batch, longest, 8),  # TF-Hub: [batch, max_length, 512] = P
        "lstm_outputs1": (batch, longest, 16),  # [batch, max_length, 1024] = 2P
        "lstm_outputs2": (batch, longest, 16),
        "elmo": (batch, longest, 16),
        "default": (batch, 16),  # [batch, 1024]
        "sequence_len": (batch,),
    }
    np.testing.assert_array_equal(out["sequence_len"].numpy(), expected["n_tokens"])
    token_embedding = expected["token_embedding_with_bos_eos"]  # AllenNLP's char CNN output, with <S> and </S>
    for i, n in enumerate(expected["n_tokens"]):
        assert_close_to_reference(out["word_emb"][i, :n], token_embedding[i, 1 : n + 1], what=f"word_emb {i}")
    layers = expected["bilm_activations"]
    assert_close_to_reference(out["lstm_outputs1"], layers[1], what="lstm_outputs1")
    assert_close_to_reference(out["lstm_outputs2"], layers[2], what="lstm_outputs2")
    assert_close_to_reference(out["elmo"], expected["elmo_representation"], what="elmo")
    mask = expected["mask"][..., None]
    mean = (expected["elmo_representation"] * mask).sum(1) / np.maximum(mask.sum(1), 1)
    assert_close_to_reference(out["default"], mean, what="default")


def test_tf_hub_signatures_default_and_tokens_agree(embedder):
    """TF-Hub's `default` signature (raw strings) and its `tokens` signature (padded with "" + sequence_len)."""
    raw = embedder.tf_hub_outputs(["the cat is on the mat", "dogs are in the fog"])
    tokens = embedder.tf_hub_outputs(
        [["the", "cat", "is", "on", "the", "mat"], ["dogs", "are", "in", "the", "fog", ""]], sequence_len=[6, 5]
    )
    for key in raw:
        assert_close_to_reference(tokens[key], raw[key], what=key)
    assert tokens["sequence_len"].tolist() == [6, 5] and not tokens["elmo"][1, 5].any()
    with pytest.raises(ValueError, match="one length per word list"):
        embedder.tf_hub_outputs([["a", "b"]], sequence_len=[3])
    with pytest.raises(ValueError, match="sequence_len goes with word lists"):
        embedder.tf_hub_outputs(["a b"], sequence_len=[2])


def test_loaded_model_and_bf16(tiny, tiny_model_dir):
    model, tokenizer = tiny
    sentences, expected, _ = load_fixture("allennlp-tiny")
    given = ElmoEmbedder(model, tokenizer)
    assert_close_to_reference(given.embed_sentence(sentences[0]), expected["sent_0_activations"], what="given model")
    with pytest.raises(TypeError, match="pass the tokenizer"):
        ElmoEmbedder(model)
    bf16 = ElmoEmbedder(tiny_model_dir, device="cpu", dtype=torch.bfloat16)
    assert bf16.model.dtype == torch.bfloat16
    for i, vectors in enumerate(bf16.embed_batch(sentences)):
        want = expected[f"sent_{i}_activations"]
        assert vectors.dtype == np.float32  # bf16 is not the reference's precision: a cosine rule, not the tolerance
        cosine = (vectors * want).sum() / np.linalg.norm(vectors) / np.linalg.norm(want)
        assert cosine > 0.99, (i, cosine)


def test_loading_refuses_what_is_not_an_elmo_model(tmp_path, tiny_model_dir):
    """The one loader's errors (model_source.load_model: ModelError, one line naming the model), as every command
    gives them."""
    from elmo_transformers.errors import ModelError

    with pytest.raises(ModelError, match="missing: no such folder, and not a Hub repo id"):
        ElmoEmbedder(str(tmp_path / "missing"))
    with pytest.raises(ModelError, match="has no config.json"):
        ElmoEmbedder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ModelError, match="model_type 'bert', not 'elmo'"):
        ElmoEmbedder(tmp_path)
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text((Path(tiny_model_dir) / "config.json").read_text())
    (no_weights / "tokenizer_config.json").write_text((Path(tiny_model_dir) / "tokenizer_config.json").read_text())
    with pytest.raises(ModelError, match="no-weights: cannot load it: "):
        ElmoEmbedder(no_weights)
    weights = load_file(Path(tiny_model_dir) / "model.safetensors")
    del weights["bilm.layers.1.state_weight"]
    save_file(weights, no_weights / "model.safetensors")
    with pytest.raises(ValueError, match=r"lacks the biLM weights \['bilm.layers.1.state_weight'\]"):
        ElmoEmbedder(no_weights)


def test_embed_file_takes_an_open_file_as_allennlp(embedder, tmp_path):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    embedder.embed_file(io.StringIO(" ".join(sentences[0]) + "\n"), tmp_path / "out.hdf5", "top", batch_size=2)
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert json.loads(f["sentence_to_index"][0]) == {"Hello world !": "0"}
        assert_close_to_reference(f["0"][...], expected["sent_0_activations"][-1], what="embed_file --top")


def test_embed_file_refuses_allennlps_sentence_options_in_one_line(embedder, tmp_path):
    """`use_sentence_keys` and `forget_sentences` were a plain TypeError (an unexpected keyword); AllenNLP's default,
    False, is the way offered, and runs as written (also positionally)."""
    from elmo_transformers.errors import UserError

    source = io.StringIO("Hello world !\n")
    for argument in ("use_sentence_keys", "forget_sentences"):
        with pytest.raises(UserError, match=rf"^{argument}=True is not offered: .*; leave {argument} out, and "):
            embedder.embed_file(source, tmp_path / "out.hdf5", **{argument: True})
    assert not (tmp_path / "out.hdf5").exists()
    embedder.embed_file(source, tmp_path / "out.hdf5", "top", 2, False, False)
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert json.loads(f["sentence_to_index"][0]) == {"Hello world !": "0"}


@pytest.mark.parametrize("name", ["efml-charword", "efml-word"])
def test_converted_elmoformanylangs_folder_through_the_embedder(tmp_path, name):
    """The elmoformanylangs package's own outputs (tests/fixtures/efml-*), through a converted folder."""
    from elmo_transformers.cli import main

    fixture = FIXTURES / name
    assert main(["convert", "elmoformanylangs", str(fixture / "model"), "--output", str(tmp_path / "converted")]) == 0
    sentences = json.loads((fixture / "sentences.json").read_text(encoding="utf-8"))
    expected = np.load(fixture / "expected.npz")
    embedder = ElmoEmbedder(tmp_path / "converted", device="cpu")
    for i, layers in enumerate(embedder.embed_batch(sentences)):
        assert_close_to_reference(layers, expected[f"layers_{i}"], what=f"{name} sentence {i}")


def test_embedder_inputs_are_refused_by_name(embedder):
    with pytest.raises(TypeError, match="embed_window: sentence 0 is a str"):
        embedder.embed_window("a b")  # would have been read as the characters of one word each
    with pytest.raises(ValueError, match="batch_size must be a positive int, got True"):
        list(embedder.embed_sentences([["a"]], batch_size=True))
    for lengths in ([1.5], [True], np.array([1.7])):
        with pytest.raises(TypeError, match="sequence_len must hold integer word counts"):
            embedder.tf_hub_outputs([["a", "b"]], sequence_len=lengths)
    exact = embedder.tf_hub_outputs([["a", "b"]], sequence_len=[1])["elmo"]
    for lengths in (torch.tensor([1]), np.array([1]), [np.int64(1)]):
        assert torch.equal(embedder.tf_hub_outputs([["a", "b"]], sequence_len=lengths)["elmo"], exact)


@pytest.mark.fidelity
def test_allennlp_0x_call_converts_the_original_files_in_memory(embedder, tmp_path):
    """AllenNLP 0.x's `ElmoEmbedder(options_file, weight_file, cuda_device=-1)`, positional or by keyword, runs as
    written: AllenNLP's vectors, the converted folder's (URLs of AllenNLP's files: tests/conversion/test_presets.py)."""
    folder = FIXTURES / "allennlp-tiny"
    sentences, expected, _ = load_fixture("allennlp-tiny")
    converted = embedder.embed_batch(sentences)
    for original in (
        ElmoEmbedder(str(folder / "options.json"), str(folder / "weights.hdf5"), cuda_device=-1),
        ElmoEmbedder(options_file=folder / "options.json", weight_file=folder / "weights.hdf5"),
    ):
        assert original.model.device.type == "cpu" and original.source == str(folder / "weights.hdf5")
        for i, vectors in enumerate(original.embed_batch(sentences)):
            assert_close_to_reference(vectors, expected[f"sent_{i}_activations"], what=f"sentence {i}")
            assert_close_to_reference(vectors, converted[i], what=f"sentence {i} against the converted folder")
    with pytest.raises(TypeError, match="give device or AllenNLP's cuda_device, not both"):
        ElmoEmbedder(str(folder / "options.json"), str(folder / "weights.hdf5"), device="cpu", cuda_device=-1)
    with pytest.raises(TypeError, match="give both files"):
        ElmoEmbedder(options_file=folder / "options.json")
    (tmp_path / "options.json").write_text("<html></html>")
    with pytest.raises(ValueError, match=r"options.json is not valid JSON"):
        ElmoEmbedder(str(tmp_path / "options.json"), str(folder / "weights.hdf5"), cuda_device=-1)


def test_threads_are_set_for_each_call_and_restored(tiny_model_dir, monkeypatch, tmp_path):
    """`ElmoEmbedder(threads=...)`: torch's threads for its calls, as `embed` sets them for a run; the process's own
    before and after each call, and during it with None (the default)."""
    from elmo_transformers.embedding import embedder as embedder_module
    from elmo_transformers.errors import UserError

    seen = []
    real_forward = ElmoEmbedder.forward

    def forward(self, encoded, **kwargs):
        seen.append(torch.get_num_threads())
        return real_forward(self, encoded, **kwargs)

    monkeypatch.setattr(ElmoEmbedder, "forward", forward)
    before = torch.get_num_threads()
    other = 1 if before > 1 else 2  # a count other than the process's (2 is at most the CPUs of the test machines)
    monkeypatch.setattr(embedder_module, "free_cpus", lambda: other)
    sentences, expected, _ = load_fixture("allennlp-tiny")
    for threads, want in [(None, before), (other, other), ("auto", other)]:
        seen.clear()
        embedder = ElmoEmbedder(tiny_model_dir, device="cpu", threads=threads)
        assert embedder.threads == (None if threads is None else other)
        vectors = embedder.embed_batch(sentences)
        embedder.batch_to_embeddings(sentences)
        embedder.embed_window(sentences[0])
        embedder.tf_hub_outputs([" ".join(sentences[0])])
        assert seen == [want] * 4 and torch.get_num_threads() == before, threads
        assert_close_to_reference(vectors[0], expected["sent_0_activations"], what=f"threads={threads}")
    monkeypatch.setattr("elmo_transformers.runtime.threads.free_cpus", lambda: before)  # embed's own default
    for threads, want in [(None, before), (other, other)]:  # embed_file takes the embedder's threads as its default
        report = ElmoEmbedder(tiny_model_dir, device="cpu", threads=threads).embed_file(
            io.StringIO("a b\n"), tmp_path / f"{threads}.hdf5", "top", progress=False
        )
        assert report.threads == want and torch.get_num_threads() == before
    with pytest.raises(
        UserError,
        match=r"^threads 0: give a number of CPU threads from 1 to \d+ \(this machine's "
        r"CPUs\), \"auto\" for the CPUs free now, or None for the process's own$",
    ):
        ElmoEmbedder(tiny_model_dir, threads=0)
    for wrong in (True, "many", 10**6):
        with pytest.raises(UserError, match=rf"^threads {wrong!r}: give a number of CPU threads"):
            ElmoEmbedder(tiny_model_dir, threads=wrong)
