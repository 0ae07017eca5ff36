"""kernels_elmo: how the biLM's LSTM layers run fast on a CPU, and that every way gives the same numbers.

- The float GEMM kernels (`config.float_kernel`, kernels_elmo.float_kernel): each one this CPU runs gives AllenNLP's
  numbers (tolerance rule of tests/tolerance.py) in inference and trains like torch's own matmuls; "auto" picks by
  the documented rule; a kernel that cannot run here gives way to torch's own, with a warning.
- The fast path: which GEMMs an inference call runs (one input GEMM per layer and block of steps, state GEMMs at the
  shrinking batch size), and the in-place LSTM cell (`inplace_lstm_cell`) against the cell training runs.
- Right on every CPU kernel set and cache state: processes that share a torch.compile cache folder, run one after the
  other under the CPU's best kernels, `ATEN_CPU_CAPABILITY=avx2` and `default` (with oneDNN's `ONEDNN_MAX_CPU_ISA=AVX2`
  and `SSE41`; the order .ci/run uses, and what the nodes of a cluster sharing a home folder do), all give the
  reference numbers, never NaN; the model compiles nothing, so no cache made on another CPU or kernel set can change
  its results.

int8 (Int8Gemms, made by quantization_elmo's quantizer) is tested in test_quantization_elmo.py.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from conftest import FIXTURE_NAMES, FIXTURES, REPO, SHIPPED, char_cnn_rows_counted, load_fixture
from huggingface_hub.errors import StrictDataclassError
from tolerance import assert_close_to_reference

import bilm_elmo
import kernels_elmo
from configuration_elmo import ElmoConfig
from kernels_elmo import FloatGemms, OneDnnGemms, best_float_kernel, float_kernel, onednn_error
from modeling_elmo import ElmoLstmLayer, ElmoModel
from tokenization_elmo import ElmoTokenizer


def runnable_float_kernels():
    """The float kernels this process can run ("auto" aside): what the tests compare."""
    return ["aten"] + (["onednn"] if onednn_error() is None else [])


def encode(tokenizer, sentences):
    return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


@pytest.fixture(scope="module", params=runnable_float_kernels())
def forced(request, tiny_model_dir):
    model = ElmoModel.from_pretrained(tiny_model_dir, float_kernel=request.param).eval()
    return request.param, model, ElmoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.fidelity  # one float kernel per case: .ci/run reruns each under the other CPU kernel sets
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_each_kernel_gives_allennlps_numbers(forced, name):
    kernel, model, tokenizer = forced
    assert all(
        isinstance(layer.gemms, OneDnnGemms if kernel == "onednn" else FloatGemms) for layer in model.bilm.layers
    )
    sentences, expected, _ = load_fixture(name)
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    assert_close_to_reference(torch.stack(out.hidden_states), expected["bilm_activations"], f"{kernel} biLM layers")
    assert_close_to_reference(out.last_hidden_state, expected["elmo_representation"], f"{kernel} ELMo vectors")


def test_each_kernel_in_bf16_stays_near_float32(forced):
    """bf16 runs the same kernels on bf16 weights (rounded, so a cosine rule, not the float32 tolerance)."""
    kernel, model, tokenizer = forced
    sentences, _, _ = load_fixture("allennlp-tiny")
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    bf16 = ElmoModel.from_pretrained(model.name_or_path, float_kernel=kernel, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        reference, out = model(**enc).last_hidden_state, bf16(**enc).last_hidden_state.float()
    mask = enc["attention_mask"].bool()
    cosine = torch.nn.functional.cosine_similarity(out[mask], reference[mask], dim=-1)
    assert cosine.min() > 0.99, (kernel, cosine.min())


def test_prepacked_weights_follow_the_parameters():
    """oneDNN's prepacked weights are remade when a weight changes in place (loading, an optimizer step, also one
    that leaves the version counter as it was), so the layer never runs stale weights; and a gradient still flows
    (training runs torch's differentiable matmuls)."""
    if onednn_error() is not None:
        pytest.skip(onednn_error())
    torch.manual_seed(0)
    config = ElmoConfig(lstm_dim=12, projection_dim=5, float_kernel="onednn")
    layer = ElmoLstmLayer(config, 5)
    plain = ElmoLstmLayer(ElmoConfig(lstm_dim=12, projection_dim=5, float_kernel="aten"), 5)
    inputs = torch.randn(2, 3, 4, 5)
    for step in range(2):
        for weight in layer.parameters():
            torch.nn.init.uniform_(weight, -0.6, 0.6)  # in place: the packed copies made at step 0 are stale now
        plain.load_state_dict(layer.state_dict())
        with torch.no_grad():
            fast, reference = layer(inputs, [3, 3, 2, 1])[0], plain(inputs, [3, 3, 2, 1])[0]
        assert_close_to_reference(fast, reference, f"after update {step}")
    output, _ = layer(inputs, [3, 3, 2, 1])
    output.square().sum().backward()
    output_plain, _ = plain(inputs, [3, 3, 2, 1])
    output_plain.square().sum().backward()
    for (name, weight), reference in zip(layer.named_parameters(), plain.parameters()):
        assert_close_to_reference(weight.grad, reference.grad, f"gradient of {name}")
    # A fused AdamW step changes the weights in place without bumping their version: never run stale packed ones.
    versions = [w._version for w in layer.parameters()]
    torch.optim.AdamW(layer.parameters(), lr=0.1, fused=True).step()
    assert [w._version for w in layer.parameters()] == versions  # what makes the version alone not enough
    for weight in layer.parameters():
        weight.grad = None
    plain.load_state_dict(layer.state_dict())
    with torch.no_grad():
        assert_close_to_reference(layer(inputs, [3, 3, 2, 1])[0], plain(inputs, [3, 3, 2, 1])[0], "after a step")


def test_threads_sharing_a_model_get_allennlps_numbers(forced):
    """Threads sharing one model (a web server's requests) each get AllenNLP's numbers, also while the prepacked
    weights are being remade: the weights are bumped in place before every call, so every call repacks them.
    A thread once ran a half-made set of prepacked weights (ValueError) when another remade them."""
    import threading

    kernel, model, tokenizer = forced
    sentences, expected, _ = load_fixture("allennlp-tiny")
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    results, errors = [], []

    def requests():
        for _ in range(30):
            try:
                with torch.no_grad():
                    for weight in model.bilm.layers.parameters():
                        weight.mul_(1)  # a new version, the same values
                    results.append(model(**enc).last_hidden_state)
            except Exception as e:  # reported below, with the thread's error
                errors.append(repr(e))

    threads = [threading.Thread(target=requests) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 90, errors[:3]
    for result in results:
        assert_close_to_reference(result, expected["elmo_representation"], f"{kernel} in a thread")


def test_auto_follows_the_rule_and_a_folder_saved_with_a_kernel_that_cannot_run_here_loads(
    monkeypatch, tiny_model_dir, tmp_path, caplog
):
    """float_kernel is a performance setting saved in config.json: a folder saved with "onednn" on an x86 machine
    loads where oneDNN cannot run (an ARM Mac, a build without it) on torch's own matmuls, the same numbers but for
    float rounding, with one warning naming why (no RuntimeError)."""
    assert float_kernel("auto") == best_float_kernel() == runnable_float_kernels()[-1]
    assert float_kernel("aten") == "aten"
    ElmoModel.from_pretrained(tiny_model_dir, float_kernel="onednn").save_pretrained(tmp_path)
    monkeypatch.setattr(kernels_elmo, "onednn_error", lambda: "this PyTorch build has no oneDNN (test)")
    with caplog.at_level("WARNING"):
        model = ElmoModel.from_pretrained(tmp_path).eval()
    assert model.config.float_kernel == "onednn"
    assert all(isinstance(layer.gemms, FloatGemms) for layer in model.bilm.layers)
    warned = [r.getMessage() for r in caplog.records if "float_kernel='onednn' cannot run here" in r.getMessage()]
    assert warned == [
        "float_kernel='onednn' cannot run here (this PyTorch build has no oneDNN (test)): torch's own "
        "matmuls ('aten') run instead, the same numbers but for float rounding; set float_kernel='auto' "
        "to choose the fastest kernel that runs"
    ], caplog.text
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    reference = ElmoModel.from_pretrained(tiny_model_dir, float_kernel="aten").eval()
    batch = tokenizer(["a b c", "d"], padding=True, return_tensors="pt")
    with torch.no_grad():
        assert_close_to_reference(model(**batch).last_hidden_state, reference(**batch).last_hidden_state, "fallback")
    with pytest.raises(StrictDataclassError, match=r"'float_kernel' expected one of \('auto', 'aten', 'onednn'\)"):
        ElmoConfig(float_kernel="mkl")


def test_a_copied_or_pickled_model_repacks_its_weights(forced):
    """`copy.deepcopy` and pickling (torch.save of a whole model) work after a call has prepacked the weights: the
    copy leaves them out and makes its own at first use, with the same numbers."""
    import copy
    import pickle

    kernel, model, tokenizer = forced
    enc = tokenizer([["The", "cat", "sat"], ["ELMo"]], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**enc).last_hidden_state
        for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
            assert_close_to_reference(copied(**enc).last_hidden_state, expected, f"{kernel} copy")


# -- the fast path: the GEMMs an inference call runs, the in-place cell -----------------------------------------------


@pytest.mark.fidelity
@pytest.mark.parametrize("kernel", runnable_float_kernels())
def test_fixture_runs_through_the_fast_path(tiny_model_dir, monkeypatch, kernel):
    """The fidelity fixture goes through one input GEMM per layer and block, state GEMMs at the shrinking batch size
    (padded steps never computed), the in-place LSTM cell, and one char CNN call over distinct words only; with each
    float kernel this CPU runs (config.float_kernel)."""
    sentences, expected, _ = load_fixture("allennlp-tiny")
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    gates = 4 * ElmoConfig.from_pretrained(tiny_model_dir).lstm_dim
    # Gate blocks of 4 steps, set through from_pretrained (a config field).
    model = ElmoModel.from_pretrained(
        tiny_model_dir, lstm_gates_block_elements=2 * len(sentences) * gates * 4, float_kernel=kernel
    ).eval()
    enc = encode(tokenizer, sentences)
    lengths = sorted((len(s) + 2 for s in sentences), reverse=True)
    steps = lengths[0]
    gemm_rows, cell_calls = [], []
    gemms = type(model.bilm.layers[0].gemms.for_call(True))  # the class whose GEMMs an inference call runs
    real_input_gates, real_gates, real_cell = gemms.input_gates, gemms.gates, bilm_elmo.inplace_lstm_cell

    def input_gates(self, x):  # records the rows of each gates GEMM (input and state)
        gemm_rows.append(x.shape[1] * x.shape[2])
        return real_input_gates(self, x)

    def state_gates(self, input_gates, step, h):
        gemm_rows.append(h.shape[1])
        return real_gates(self, input_gates, step, h)

    monkeypatch.setattr(gemms, "input_gates", input_gates)
    monkeypatch.setattr(gemms, "gates", state_gates)
    monkeypatch.setattr(bilm_elmo, "inplace_lstm_cell", lambda *a: cell_calls.append(1) or real_cell(*a))
    with torch.no_grad(), char_cnn_rows_counted(model) as char_cnn_rows:
        out = model(**enc, output_hidden_states=True)
    assert_close_to_reference(torch.stack(out.hidden_states), expected["bilm_activations"], what="fast path")

    running = [sum(n > t for n in lengths) for t in range(steps)]
    per_layer = []
    for start in range(0, steps, 4):  # an input GEMM over each block of 4 steps, then that block's state GEMMs
        per_layer += [running[start] * len(running[start : start + 4])] + running[start : start + 4]
    assert gemm_rows == per_layer * model.config.n_layers
    assert len(cell_calls) == steps * model.config.n_layers
    distinct = {tuple(row) for s, n in zip(enc["input_ids"].tolist(), map(len, sentences)) for row in s[:n]}
    assert char_cnn_rows == [len(distinct) + 2]  # + BOS and EOS


@pytest.mark.fidelity
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cell_clip", [None, 0.5])
def test_inplace_cell_gives_the_papers_numbers(dtype, cell_clip):
    """Inference's in-place cell against the cell training runs (bilm_elmo.lstm_cell), on random gates over a
    range that saturates the activations and crosses the clip value; bf16 gates with a float32 cell state."""
    from kernels_elmo import inplace_lstm_cell
    from bilm_elmo import lstm_cell

    generator = torch.Generator().manual_seed(0)
    gates = (torch.randn(2, 5, 4 * 16, generator=generator) * 4).to(dtype)
    c = torch.randn(2, 5, 16, generator=generator)[:, :3]  # a view of a larger batch, as when sentences end
    expected_c, expected_out = lstm_cell(gates[:, :3], c, cell_clip)
    got_c, got_out = inplace_lstm_cell(gates[:, :3].clone(), c, cell_clip)
    assert got_c.dtype == torch.float32 and got_out.dtype == dtype
    assert_close_to_reference(got_c, expected_c, what="cell state")
    if dtype == torch.float32:
        assert_close_to_reference(got_out, expected_out, what="cell output")
    else:  # one bf16 rounding of the same float32 value
        torch.testing.assert_close(got_out, expected_out, atol=0, rtol=2**-8)
    # oneDNN int8's form: each direction's gates apart (a list), the cell output a list too
    got_c, got_out = inplace_lstm_cell([gates[d, :3].clone() for d in range(2)], c, cell_clip)
    assert isinstance(got_out, list) and len(got_out) == 2
    assert_close_to_reference(got_c, expected_c, what="cell state, directions apart")
    if dtype == torch.float32:
        assert_close_to_reference(torch.stack(got_out), expected_out, what="cell output, directions apart")


# -- every CPU kernel set, one shared compile cache -------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    tiny, shipped, sentences_path, out_path = sys.argv[1:5]
    sentences = json.load(open(sentences_path, encoding="utf-8"))
    layers = {}
    for name, folder in (("tiny", tiny), ("shipped", shipped)):
        model, tokenizer = ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder)
        enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        with torch.no_grad():
            layers[name] = torch.stack(model(**enc, output_hidden_states=True).hidden_states).numpy()
    np.savez(out_path, capability=torch.backends.cpu.get_cpu_capability(), **layers)
    """
)


def shipped_in_float64():
    """The shipped model has no AllenNLP reference; its layers in float64 are one (the port in float64 computes the
    NumPy reference's numbers, test_fidelity.py), whatever kernels sum them."""
    sentences = json.loads((FIXTURES / "allennlp-tiny" / "sentences.json").read_text(encoding="utf-8"))
    model, tokenizer = ElmoModel.from_pretrained(SHIPPED).double().eval(), ElmoTokenizer.from_pretrained(SHIPPED)
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return torch.stack(model(**enc, output_hidden_states=True).hidden_states).numpy()


@pytest.mark.slow
def test_every_kernel_set_with_one_shared_compile_cache(tiny_model_dir, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    cache = tmp_path / "inductor-cache"
    runs = []
    for index, capability in enumerate([None, "avx2", "default"]):
        env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")}
        env.update(TORCHINDUCTOR_CACHE_DIR=str(cache), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
        if capability:  # and oneDNN's kernels (float_kernel "onednn", "auto" on x86) by its own variable
            onednn_isa = {"avx2": "AVX2", "default": "SSE41"}[capability]
            env.update(ATEN_CPU_CAPABILITY=capability, ONEDNN_MAX_CPU_ISA=onednn_isa)
        out = tmp_path / f"run{index}.npz"
        result = subprocess.run(
            [
                sys.executable,
                str(script),
                str(tiny_model_dir),
                str(SHIPPED),
                str(FIXTURES / "allennlp-tiny" / "sentences.json"),
                str(out),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        runs.append(np.load(out))
    capabilities = [str(run["capability"]) for run in runs]
    assert capabilities[1:] == ["AVX2", "DEFAULT"], capabilities
    expected = np.load(FIXTURES / "allennlp-tiny" / "expected.npz")["bilm_activations"]
    shipped = shipped_in_float64()
    for run, capability in zip(runs, capabilities):
        assert np.isfinite(run["shipped"]).all(), f"NaN or inf from the shipped model under {capability}"
        assert_close_to_reference(run["tiny"], expected, what=f"fixture under {capability}")
        assert_close_to_reference(run["shipped"], shipped, what=f"shipped model under {capability}")
    # Nothing was compiled, so nothing was cached that a later process on another kernel set could pick up.
    assert not cache.exists() or not any(cache.rglob("*")), sorted(map(str, cache.rglob("*")))[:10]
