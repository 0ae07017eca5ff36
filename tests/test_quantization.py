"""int8 inference (`quantization_config=ElmoInt8Config()`, quantization_elmo.py): its quality against float32, what
it replaces and refuses, and int8 where users embed (`ElmoEmbedder(dtype="int8")`, `embed --dtype int8`)."""

import h5py
import numpy as np
import pytest
import torch

from conftest import SHIPPED, load_fixture

WORDS = "the cat sat on the mat and the dog sat on the cat".split()
# Real sentences for the default model (public-domain English, as it was trained on).
SENTENCES = [
    "Sir Walter Elliot , of Kellynch Hall , in Somersetshire , was a man who , for his own amusement , never "
    "took up any book but the Baronetage .",
    "She put the money in the bank and sat down by the river .",
    "It is a truth universally acknowledged .",
    "The old man went down to the harbour before the sun had risen , and waited there for the boats .",
    "I have not the pleasure of understanding you .",
    "When the letter came at last , nobody in the house could read the hand it was written in .",
]


def encode(tokenizer, sentences):
    return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


def hidden_states(model, enc):
    with torch.no_grad():
        return torch.stack(model(**enc, output_hidden_states=True).hidden_states)


def layer_cosines(out, ref, mask):
    """Cosine of each real word's vector per biLM layer: [layers, words]."""
    return torch.nn.functional.cosine_similarity(out[:, mask], ref[:, mask], dim=-1)


def load_int8(folder, **kwargs):
    from modeling_elmo import ElmoModel
    from quantization_elmo import ElmoInt8Config

    return ElmoModel.from_pretrained(folder, quantization_config=ElmoInt8Config(), **kwargs).eval()


def test_int8_stays_close_to_fp32_on_fixture(tiny_model_dir, tiny):
    model, tokenizer = tiny
    sentences, _, _ = load_fixture("allennlp-tiny")
    enc = encode(tokenizer, sentences)
    int8 = load_int8(tiny_model_dir)
    out = hidden_states(int8, enc)
    assert out.dtype == torch.float32
    cos = layer_cosines(out, hidden_states(model, enc), enc["attention_mask"].bool())
    # Random fixture weights: per-layer median >= 0.999, worst word >= 0.98 (the top layer carries the most error).
    assert (cos.median(dim=1).values >= 0.999).all(), cos.median(dim=1).values
    assert cos.min() >= 0.98, cos.min(dim=1).values
    assert not torch.equal(out, hidden_states(model, enc)), "int8 mode did not change the GEMMs"


def test_int8_stays_close_to_fp32_on_the_default_model():
    """The shipped model's ELMo vectors on real sentences (median cosine >= 0.999 in every layer)."""
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    folder = SHIPPED
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    fp32 = ElmoModel.from_pretrained(folder, dtype=torch.float32).eval()
    int8 = load_int8(folder)
    enc = encode(tokenizer, [sentence.split() for sentence in SENTENCES[:3]])
    cos = layer_cosines(hidden_states(int8, enc), hidden_states(fp32, enc), enc["attention_mask"].bool())
    assert (cos.median(dim=1).values >= 0.999).all(), cos.median(dim=1).values
    assert cos.min() >= 0.99, cos.min(dim=1).values


def test_int8_replaces_the_float_lstm_weights(tiny_model_dir, tiny):
    """The int8 weights replace the float LSTM weights (memory): only the char CNN and scalar mixes keep floats."""
    model, _ = tiny
    int8 = load_int8(tiny_model_dir)
    assert int8.is_quantized and int8.config.quantization_config.quant_method == "elmo_int8"
    float_names = {name for name, _ in model.named_parameters()}
    kept = {name for name, _ in int8.named_parameters()}
    assert kept == {name for name in float_names if ".layers." not in name}
    assert all(layer.quantized for layer in int8.bilm.layers)


def test_int8_is_inference_only_and_float32_only(tiny_model_dir, tiny):
    _, tokenizer = tiny
    enc = encode(tokenizer, [WORDS])
    model = load_int8(tiny_model_dir).train()
    with pytest.raises(RuntimeError, match="inference only"):
        model(**enc)
    with pytest.raises(ValueError, match="quantizes float32 weights.*dtype=torch.bfloat16"):
        load_int8(tiny_model_dir, dtype=torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_int8_then_another_dtype_says_int8_and_what_to_do(tiny_model_dir, tiny, dtype):
    """An int8 model cast to another dtype after loading (`.to(dtype)`): the first call names int8 and the two ways
    out (it was the quantized engine's "expected scalar type Float but found BFloat16"); going back to float32 works."""
    _, tokenizer = tiny
    enc = encode(tokenizer, [WORDS])
    model = load_int8(tiny_model_dir)
    with torch.no_grad():
        want = model(**enc).last_hidden_state
        model.to(dtype)
        with pytest.raises(RuntimeError, match=r"quantized to int8, .* now torch\.\w+: call model\.to\(torch\.float32\)"
                                               r" to keep int8, or load it again without quantization_config"):
            model(**enc)
        # int8 again (the char CNN's weights went through `dtype` and back: close to the first run, not bit-equal)
        again = model.to(torch.float32)(**enc).last_hidden_state
        assert torch.nn.functional.cosine_similarity(again, want, dim=-1).min() > 0.99


def test_int8_needs_a_quantized_engine(tiny_model_dir, monkeypatch):
    """Never a silent float path: without torch's quantized engine or operators, loading with int8 fails by name."""
    import types

    monkeypatch.setattr(type(torch.backends.quantized), "supported_engines", property(lambda self: ["none"]))
    with pytest.raises(RuntimeError, match="no quantized engine"):
        load_int8(tiny_model_dir)
    monkeypatch.undo()
    monkeypatch.setattr(torch.ops, "quantized", types.SimpleNamespace())  # a torch without torch.ops.quantized
    with pytest.raises(RuntimeError, match="no quantized dynamic linear"):
        load_int8(tiny_model_dir)


def test_int8_model_refuses_to_save(tiny_model_dir, tmp_path):
    """The float LSTM weights are gone, so saving would lose them: refused; nothing written."""
    int8 = load_int8(tiny_model_dir)
    with pytest.raises(ValueError, match="elmo_int8 and is not serializable"):
        int8.save_pretrained(tmp_path / "out")
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_int8_model_needs_no_no_grad(tiny_model_dir, tiny):
    """Inference needs no context manager: a plain call (autograd on) gives the numbers of a call under no_grad (it
    raised "functions with out=... arguments don't support automatic differentiation")."""
    _, tokenizer = tiny
    enc = encode(tokenizer, [WORDS, WORDS[:5]])
    int8 = load_int8(tiny_model_dir)
    assert torch.is_grad_enabled()
    plain = torch.stack(int8(**enc, output_hidden_states=True).hidden_states)
    assert torch.equal(plain.detach(), hidden_states(int8, enc))


def int8_rule(int8_vectors, fp32_vectors):
    """The int8 rule (`embedder.INT8_QUALITY`) on word vectors [words, dim] of every layer: (median, 1st percentile)
    of their cosines to float32's."""
    cos = torch.nn.functional.cosine_similarity(torch.as_tensor(int8_vectors), torch.as_tensor(fp32_vectors), dim=-1)
    return cos.median().item(), torch.quantile(cos, 0.01).item()


@pytest.mark.slow
def test_embed_int8_keeps_the_int8_rule_on_the_default_model(tmp_path):
    """`elmo-transformers embed --dtype int8` against `--dtype float32` on the default model: every line's
    vectors (all layers) within the rule stated in --help: cosine median >= 0.999, 1st percentile >= 0.99."""
    from elmo_transformers.cli.embed import main

    source = tmp_path / "input.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    vectors = {}
    for dtype in ("float32", "int8"):
        output = tmp_path / f"{dtype}.hdf5"
        assert main([str(source), str(output), "--all", "--dtype", dtype]) == 0
        with h5py.File(output, "r") as f:
            vectors[dtype] = [f[str(i)][...] for i in range(len(SENTENCES))]
    assert [v.shape for v in vectors["int8"]] == [v.shape for v in vectors["float32"]]
    assert not all(np.array_equal(a, b) for a, b in zip(vectors["int8"], vectors["float32"])), "int8 not used"
    dim = vectors["float32"][0].shape[-1]
    median, first_percentile = int8_rule(np.concatenate(vectors["int8"], axis=1).reshape(-1, dim),
                                         np.concatenate(vectors["float32"], axis=1).reshape(-1, dim))
    assert median >= 0.999 and first_percentile >= 0.99, (median, first_percentile)


def test_embedder_int8(tiny_model_dir, tiny):
    """`ElmoEmbedder(dtype="int8")` and `quantization_config=` load the same int8 model; a loaded model or a GPU
    with int8 is refused by name."""
    from elmo_transformers.embedding.embedder import ElmoEmbedder
    from quantization_elmo import ElmoInt8Config

    model, tokenizer = tiny
    shorthand = ElmoEmbedder(tiny_model_dir, dtype="int8")
    explicit = ElmoEmbedder(tiny_model_dir, quantization_config=ElmoInt8Config())
    assert shorthand.model.is_quantized and explicit.model.is_quantized
    got = shorthand.embed_sentence(WORDS)
    np.testing.assert_array_equal(got, explicit.embed_sentence(WORDS))
    fp32 = ElmoEmbedder(model, tokenizer).embed_sentence(WORDS)
    median, first_percentile = int8_rule(got.reshape(-1, got.shape[-1]), fp32.reshape(-1, got.shape[-1]))
    assert median >= 0.999 and first_percentile >= 0.98, (median, first_percentile)  # random fixture weights
    with pytest.raises(ValueError, match="int8 is chosen when a model is loaded"):
        ElmoEmbedder(model, tokenizer, dtype="int8")
    with pytest.raises(ValueError, match="int8 runs on the CPU"):
        ElmoEmbedder(tiny_model_dir, dtype="int8", device="cuda")
