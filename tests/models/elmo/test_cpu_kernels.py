"""Right on every CPU kernel set and cache state: processes that share a torch.compile cache folder, run one after the
other under the CPU's best kernels, `ATEN_CPU_CAPABILITY=avx2` and `default` (with oneDNN's `ONEDNN_MAX_CPU_ISA=AVX2`
and `SSE41`; the order .ci/run uses, and what the nodes of a cluster sharing a home folder do), all give the
reference numbers, never NaN; the model compiles nothing, so no cache made on another CPU or kernel set can change
its results."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from conftest import FIXTURES, REPO, SHIPPED
from tolerance import assert_close_to_reference

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
    import torch

    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    sentences = json.loads((FIXTURES / "allennlp-tiny" / "sentences.json").read_text(encoding="utf-8"))
    model, tokenizer = ElmoModel.from_pretrained(SHIPPED).double().eval(), ElmoTokenizer.from_pretrained(SHIPPED)
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return torch.stack(model(**enc, output_hidden_states=True).hidden_states).numpy()


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
            [sys.executable, str(script), str(tiny_model_dir), str(SHIPPED),
             str(FIXTURES / "allennlp-tiny" / "sentences.json"), str(out)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
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
