"""int8 inference (`quantization_config=ElmoInt8Config()`, quantization_elmo.py): close to float32 by the int8 rule
(cosine median >= 0.999, 1st percentile >= 0.99 on the default model) with every int8 kernel this CPU runs
(`ElmoInt8Config.kernel`: torch's quantized linear, oneDNN's; "auto" picks by the documented rule), inference only,
float32 only, never a silent float path, not saved."""

import platform

import pytest
import torch
from conftest import SENTENCES, SHIPPED, load_fixture
from tolerance import assert_close_to_reference

import kernels_elmo
from kernels_elmo import Int8Gemms, OneDnnInt8Gemms, best_int8_kernel, int8_kernel, onednn_int8_error

WORDS = "the cat sat on the mat and the dog sat on the cat".split()


def encode(tokenizer, sentences):
    return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


def hidden_states(model, enc):
    with torch.no_grad():
        return torch.stack(model(**enc, output_hidden_states=True).hidden_states)


def layer_cosines(out, ref, mask):
    """Cosine of each real word's vector per biLM layer: [layers, words]."""
    return torch.nn.functional.cosine_similarity(out[:, mask], ref[:, mask], dim=-1)


def load_int8(folder, kernel="auto", **kwargs):
    from modeling_elmo import ElmoModel
    from quantization_elmo import ElmoInt8Config

    return ElmoModel.from_pretrained(folder, quantization_config=ElmoInt8Config(kernel=kernel), **kwargs).eval()


def runnable_int8_kernels():
    """The int8 kernels this process can run ("auto" aside): what the quality tests check."""
    return ["quantized"] + (["onednn"] if onednn_int8_error() is None else [])


GEMMS = {"quantized": Int8Gemms, "onednn": OneDnnInt8Gemms}


@pytest.mark.fidelity  # .ci/run reruns it under the other CPU kernel sets (where oneDNN's int8 gives way to fbgemm's)
@pytest.mark.parametrize("kernel", runnable_int8_kernels())
def test_int8_stays_close_to_fp32_on_fixture(tiny_model_dir, tiny, kernel):
    model, tokenizer = tiny
    sentences, _, _ = load_fixture("allennlp-tiny")
    enc = encode(tokenizer, sentences)
    int8 = load_int8(tiny_model_dir, kernel)
    assert all(type(layer.gemms) is GEMMS[kernel] for layer in int8.bilm.layers)
    out = hidden_states(int8, enc)
    assert out.dtype == torch.float32
    cos = layer_cosines(out, hidden_states(model, enc), enc["attention_mask"].bool())
    # Random fixture weights: per-layer median >= 0.999, worst word >= 0.98 (the top layer carries the most error).
    assert (cos.median(dim=1).values >= 0.999).all(), cos.median(dim=1).values
    assert cos.min() >= 0.98, cos.min(dim=1).values
    assert not torch.equal(out, hidden_states(model, enc)), "int8 mode did not change the GEMMs"


@pytest.mark.parametrize("kernel", runnable_int8_kernels())
def test_int8_stays_close_to_fp32_on_the_default_model(kernel):
    """The shipped model's ELMo vectors on real sentences (median cosine >= 0.999 in every layer), each kernel."""
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    folder = SHIPPED
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    fp32 = ElmoModel.from_pretrained(folder, dtype=torch.float32).eval()
    int8 = load_int8(folder, kernel)
    sentences = [
        "Sir Walter Elliot , of Kellynch Hall , in Somersetshire , was a man who , for his own amusement , never "
        "took up any book but the Baronetage .".split(),
        "She put the money in the bank and sat down by the river .".split(),
        "It is a truth universally acknowledged .".split(),
    ]
    enc = encode(tokenizer, sentences)
    cos = layer_cosines(hidden_states(int8, enc), hidden_states(fp32, enc), enc["attention_mask"].bool())
    assert (cos.median(dim=1).values >= 0.999).all(), cos.median(dim=1).values
    assert cos.min() >= 0.99, cos.min(dim=1).values


@pytest.mark.parametrize("amx_int8", [True, False])
@pytest.mark.parametrize("onednn_cap", [None, "AVX512_CORE_AMX", "AVX512_CORE_VNNI", "AVX2"])
def test_auto_picks_onednn_int8_only_where_it_runs_amx(monkeypatch, amx_int8, onednn_cap):
    """The rule behind kernel="auto": oneDNN's int8 where this torch has it, the CPU has AMX int8 and oneDNN may use
    it (ONEDNN_MAX_CPU_ISA, as the CI's older kernel sets set it); torch's quantized linear everywhere else."""
    monkeypatch.setattr(kernels_elmo, "cpu_has", lambda feature: amx_int8 if feature == "amx_int8" else False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    if onednn_cap is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", onednn_cap)
    onednn_int8_error.cache_clear(), best_int8_kernel.cache_clear()
    try:
        amx = amx_int8 and onednn_cap in (None, "AVX512_CORE_AMX")
        if not amx:
            assert "AMX" in onednn_int8_error()
        assert best_int8_kernel() == int8_kernel("auto") == ("onednn" if onednn_int8_error() is None else "quantized")
        assert int8_kernel("onednn") == int8_kernel("auto")
        if amx and platform.machine().lower() in ("x86_64", "amd64") and hasattr(torch.ops, "onednn"):
            assert best_int8_kernel() == "onednn"
    finally:
        onednn_int8_error.cache_clear(), best_int8_kernel.cache_clear()


def test_onednn_int8_where_it_cannot_run_warns_and_runs_quantized(tiny_model_dir, tiny, monkeypatch, caplog):
    """kernel="onednn" where oneDNN's int8 linear does not run (no AMX int8, an ARM machine, a torch without it):
    torch's quantized linear, with one warning naming why and what to set; an unknown kernel is refused when the
    config is made."""
    from quantization_elmo import ElmoInt8Config

    monkeypatch.setattr(kernels_elmo, "onednn_int8_error", lambda: "no oneDNN int8 (test)")
    with caplog.at_level("WARNING"):
        model = load_int8(tiny_model_dir, "onednn")
    assert all(type(layer.gemms) is Int8Gemms for layer in model.bilm.layers)
    assert any(
        "ElmoInt8Config(kernel='onednn') cannot run here (no oneDNN int8 (test)): torch's dynamic quantized linear "
        "('quantized') runs instead; set kernel='auto'" in record.getMessage()
        for record in caplog.records
    ), [record.getMessage() for record in caplog.records]
    with pytest.raises(ValueError, match=r"kernel must be one of \('auto', 'quantized', 'onednn'\), got 'fbgemm'"):
        ElmoInt8Config(kernel="fbgemm")


@pytest.mark.skipif(onednn_int8_error() is not None, reason="oneDNN's int8 linear does not run on this CPU")
@pytest.mark.parametrize("shape", [(600, 64), (3, 200, 64), (257, 64), (5, 64), (1, 64), (2, 64), (1, 1, 64)])
def test_onednn_int8_linear_is_the_int8_product_at_any_rows(shape):
    """oneDNN's int8 linear, in calls of at most ONEDNN_INT8_ROWS rows (600 rows: three calls; 3 x 200: calls across
    the leading dims; 257: two, neither of a few rows) and at least ONEDNN_INT8_MIN_ROWS (one or two rows: padded),
    against the int8 product done by hand in float64: activations with one symmetric scale, weights with one per
    output row, int32 sums; alone and summed into a tensor in place."""
    from kernels_elmo import onednn_int8_linear, pack_onednn_int8

    generator = torch.Generator().manual_seed(0)
    x, weight = torch.randn(*shape, generator=generator), torch.randn(48, 64, generator=generator)
    bias, before = torch.randn(48, generator=generator), torch.randn(*shape[:-1], 48, generator=generator)
    x_scale, w_scale = x.abs().max().double() / 127, weight.abs().amax(dim=1).double() / 127
    x_int8, w_int8 = torch.round(x.double() / x_scale), torch.round(weight.double() / w_scale[:, None])
    product = (x_int8 @ w_int8.T) * x_scale * w_scale + bias.double()
    packed = pack_onednn_int8(weight, bias)
    torch.testing.assert_close(onednn_int8_linear(x, packed).double(), product, rtol=1e-5, atol=1e-4)
    summed = before.clone()
    assert onednn_int8_linear(x, packed, add_to=summed) is summed
    torch.testing.assert_close(summed.double(), before.double() + product, rtol=1e-5, atol=1e-4)


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")  # torch's own pickling of fbgemm's packed weights
@pytest.mark.parametrize("kernel", runnable_int8_kernels())
def test_int8_model_copies_and_pickles(tiny_model_dir, tiny, kernel):
    """copy.deepcopy and pickle of an int8 model (a worker process, a server's copy): the copy gives the same numbers
    (oneDNN's prepacked weights are made again from the int8 values, not copied)."""
    import copy
    import pickle

    _, tokenizer = tiny
    enc = encode(tokenizer, [WORDS, WORDS[:4]])
    model = load_int8(tiny_model_dir, kernel)
    want = hidden_states(model, enc)
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert torch.equal(hidden_states(copied, enc), want)


def test_int8_replaces_the_float_lstm_weights(tiny_model_dir, tiny):
    """The int8 weights replace the float LSTM weights (memory): only the char CNN and scalar mixes keep floats."""
    model, _ = tiny
    int8 = load_int8(tiny_model_dir)
    assert int8.is_quantized and int8.config.quantization_config.quant_method == "elmo_int8"
    float_names = {name for name, _ in model.named_parameters()}
    kept = {name for name, _ in int8.named_parameters()}
    assert kept == {name for name in float_names if ".layers." not in name}
    assert all(isinstance(layer.gemms, Int8Gemms) for layer in int8.bilm.layers)


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
        with pytest.raises(
            RuntimeError,
            match=r"quantized to int8, .* now torch\.\w+: call model\.to\(torch\.float32\)"
            r" to keep int8, or load it again without quantization_config",
        ):
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


def test_int8_runs_without_no_grad(tiny_model_dir, tiny):
    """As any transformers model, an int8 model answers a plain call in eval mode, no context manager needed (it
    raised "functions with out=... arguments don't support automatic differentiation"), with the numbers of a call
    under no_grad (within float rounding: where a gradient could be wanted, the float32 char CNN runs torch's own
    differentiable GEMMs, not the float kernel inference chose, see kernels_elmo.float_linear)."""
    _, tokenizer = tiny
    enc = encode(tokenizer, [WORDS, WORDS[:4]])
    model = load_int8(tiny_model_dir)
    assert torch.is_grad_enabled()
    out = model(**enc, output_hidden_states=True)
    assert_close_to_reference(torch.stack(out.hidden_states), hidden_states(model, enc), "plain call vs no_grad")


@pytest.mark.slow
def test_embed_int8_stays_within_the_int8_rule(tmp_path, run_cli):
    """`elmo-transformers embed --dtype int8` on the shipped model: every vector of every layer against the float32
    run's, cosine median >= 0.999 and 1st percentile >= 0.99 (the rule in embed --help and docs/speed.md)."""
    import h5py
    import numpy as np

    text = tmp_path / "text.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    arrays = {}
    for dtype in ("float32", "int8"):
        output = tmp_path / f"{dtype}.hdf5"
        code, _, err = run_cli("embed", text, output, "--all", "--dtype", dtype)
        assert code == 0, err
        with h5py.File(output) as f:
            arrays[dtype] = np.concatenate(
                [f[str(i)][()].reshape(-1, f[str(i)].shape[-1]) for i in range(len(SENTENCES))]
            )
    fp32, int8 = (torch.from_numpy(arrays[k]) for k in ("float32", "int8"))
    keep = fp32.norm(dim=-1) > 0
    cos = torch.nn.functional.cosine_similarity(int8[keep], fp32[keep], dim=-1)
    assert cos.median() >= 0.999 and torch.quantile(cos, 0.01) >= 0.99, (cos.median(), torch.quantile(cos, 0.01))
    assert not torch.equal(int8, fp32), "--dtype int8 did not change the GEMMs"


def test_embedder_takes_quantization_config(tiny_model_dir, tiny):
    """ElmoEmbedder(folder, quantization_config=ElmoInt8Config()) runs int8 on the CPU and refuses other devices."""
    from elmo_transformers import ElmoEmbedder, ElmoInt8Config
    from elmo_transformers.errors import UserError

    embedder = ElmoEmbedder(tiny_model_dir, quantization_config=ElmoInt8Config())
    assert embedder.model.is_quantized and all(
        isinstance(layer.gemms, Int8Gemms) for layer in embedder.model.bilm.layers
    )
    assert embedder.embed_sentence(WORDS).shape == (3, len(WORDS), 16)
    with pytest.raises(UserError, match="^device cuda: int8 inference runs on the CPU only: leave the device out"):
        ElmoEmbedder(tiny_model_dir, device="cuda", quantization_config=ElmoInt8Config())
