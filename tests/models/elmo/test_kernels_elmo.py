"""The float GEMM kernels (`config.float_kernel`, kernels_elmo.float_kernel): each one this CPU runs gives AllenNLP's
numbers (tolerance rule of tests/tolerance.py) in inference and trains like torch's own matmuls; "auto" picks by the
documented rule; a kernel that cannot run here gives way to torch's own, with a warning."""

import pytest
import torch
from conftest import FIXTURE_NAMES, load_fixture
from huggingface_hub.errors import StrictDataclassError
from tolerance import assert_close_to_reference

import kernels_elmo
from configuration_elmo import ElmoConfig
from kernels_elmo import (
    FloatGemms, OneDnnGemms, best_float_kernel, float_kernel, onednn_error, runnable_float_kernels,
)
from modeling_elmo import ElmoLstmLayer, ElmoModel
from tokenization_elmo import ElmoTokenizer


@pytest.fixture(scope="module", params=runnable_float_kernels())
def forced(request, tiny_model_dir):
    model = ElmoModel.from_pretrained(tiny_model_dir, float_kernel=request.param).eval()
    return request.param, model, ElmoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.fidelity  # one float kernel per case: .ci/run reruns each under the other CPU kernel sets
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_each_kernel_gives_allennlps_numbers(forced, name):
    kernel, model, tokenizer = forced
    assert all(isinstance(layer.gemms, OneDnnGemms if kernel == "onednn" else FloatGemms)
               for layer in model.bilm.layers)
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
        monkeypatch, tiny_model_dir, tmp_path, caplog):
    """float_kernel is a performance setting saved in config.json: a folder saved with "onednn" on an x86 machine
    loads where oneDNN cannot run (an ARM Mac, a build without it) on torch's own matmuls, the same numbers but for
    float rounding, with one warning naming why; it used to be refused by a RuntimeError."""
    assert float_kernel("auto") == best_float_kernel() == runnable_float_kernels()[-1]
    assert float_kernel("aten") == "aten"
    ElmoModel.from_pretrained(tiny_model_dir, float_kernel="onednn").save_pretrained(tmp_path)
    monkeypatch.setattr(kernels_elmo, "onednn_error", lambda: "this PyTorch build has no oneDNN (test)")
    with caplog.at_level("WARNING"):
        model = ElmoModel.from_pretrained(tmp_path).eval()
    assert model.config.float_kernel == "onednn"
    assert all(isinstance(layer.gemms, FloatGemms) for layer in model.bilm.layers)
    warned = [r.getMessage() for r in caplog.records if "float_kernel='onednn' cannot run here" in r.getMessage()]
    assert warned == ["float_kernel='onednn' cannot run here (this PyTorch build has no oneDNN (test)): torch's own "
                      "matmuls ('aten') run instead, the same numbers but for float rounding; set float_kernel='auto' "
                      "to choose the fastest kernel that runs"], caplog.text
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
