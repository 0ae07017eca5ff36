"""`elmo-transformers export onnx`: the LSTM's scan form equals the eager loop, and the exported graph run by
onnxruntime gives AllenNLP's and PyTorch's numbers (tolerance rule of tests/tolerance.py)."""

import copy
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import FIXTURE_NAMES, LM_FIXTURE, load_fixture
from serving_memory import site_packages_without_torch
from tolerance import assert_close_to_reference
from elmo_transformers.cli import main
from elmo_transformers.embedding.embedder import ElmoEmbedder

from configuration_elmo import ElmoConfig
from modeling_elmo import ElmoLstmLayer


@pytest.mark.parametrize("lengths, clip", [([7, 7], None), ([11, 4, 1], 0.5), ([1], 0.5)])
def test_scan_lstm_equals_the_eager_loop(lengths, clip):
    """The layer run as one scan over the whole batch (what export traces) gives the eager loop's outputs and final
    states, for a shrinking batch, a full one and a single step, with and without clipping."""
    torch.manual_seed(0)
    config = ElmoConfig(lstm_dim=12, projection_dim=5, cell_clip=clip, proj_clip=clip)
    layer = ElmoLstmLayer(config, 5)
    for weight in layer.parameters():
        torch.nn.init.uniform_(weight, -0.6, 0.6)
    steps = max(lengths)
    inputs = torch.randn(2, len(lengths), steps, 5)
    positions = torch.arange(steps)
    running = (torch.tensor(lengths).unsqueeze(0) > positions.unsqueeze(1)).sum(1)
    inputs = inputs * (positions < torch.tensor(lengths).unsqueeze(1)).unsqueeze(-1)  # zeros at padding, as the biLM
    with torch.no_grad():
        eager, (eager_h, eager_c) = layer(inputs, running.tolist())
        scanned, (scan_h, scan_c) = layer(inputs, running)
    assert_close_to_reference(scanned, eager, "outputs")
    assert not scanned[:, 1:][(positions >= torch.tensor(lengths[1:]).unsqueeze(1)).expand(2, -1, -1)].any()
    assert_close_to_reference(scan_h, eager_h, "final h")
    assert_close_to_reference(scan_c, eager_c, "final c")


# ----- The exported graph, served where torch is not installed -----------------------------------------------------

# Run by `serve_without_torch` in a Python whose site-packages lack torch and this package: the exported folder's
# tokenizer (remote code) and onnxruntime embed the batches of the JSON file argv[2], writing argv[3].
SERVE = """
import json, sys
import numpy as np
for name in ("torch", "elmo_transformers", "tokenization_elmo", "modeling_elmo"):
    try:
        __import__(name)
    except ModuleNotFoundError:
        continue
    raise SystemExit(f"{name} is importable: the test would not show serving without it")
import onnxruntime
from transformers import AutoTokenizer

folder, batches, output = sys.argv[1:4]
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
session = onnxruntime.InferenceSession(folder + "/model.onnx")
results = {}
for name, sentences in json.load(open(batches, encoding="utf-8")).items():
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="np")
    inputs = {key: batch[key].astype(np.int64) for key in ("input_ids", "attention_mask")}
    results[name + "/vectors"], results[name + "/layers"] = session.run(None, inputs)
    results[name + "/input_ids"] = inputs["input_ids"]
np.savez(output, **results)
"""


def serve_without_torch(folder, batches, tmp_path):
    """The outputs of SERVE for `batches` ({name: sentences}) in a Python where torch and this package are not
    installed (`python -S` on a copy of site-packages without them)."""
    shadow = site_packages_without_torch(tmp_path / "site-packages-without-torch")
    (tmp_path / "batches.json").write_text(json.dumps(batches), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    result = subprocess.run(
        [sys.executable, "-S", "-c", SERVE, str(folder), str(tmp_path / "batches.json"), str(tmp_path / "out.npz")],
        env=dict(env, PYTHONPATH=str(shadow), HF_HUB_OFFLINE="1"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(np.load(tmp_path / "out.npz"))


@pytest.fixture(scope="module")
def exported_tiny(tiny_model_dir, tmp_path_factory):
    """The AllenNLP fixture's model exported by the command."""
    output = tmp_path_factory.mktemp("onnx") / "tiny-onnx"
    assert main(["export", "onnx", "--model", str(tiny_model_dir), "--output", str(output)]) == 0
    return output


LONG = [f"w{i % 17}" if i % 5 else "The" for i in range(120)]


def float64_reference(tiny):
    """The PyTorch model in float64, the reference for the exported graph's float32 numbers: the rule bounds the
    rounding of one float32 computation, and over 120 LSTM steps two of them (PyTorch's kernels and onnxruntime's,
    whose tanh and sigmoid are less exact: up to 2.7e-7 against 3e-8) can differ by both roundings."""
    model, tokenizer = tiny
    return copy.deepcopy(model).double(), tokenizer


@pytest.mark.slow
def test_served_without_torch_equals_allennlp_and_pytorch(exported_tiny, tiny, tmp_path):
    """AllenNLP's numbers on its fixtures, and PyTorch's (in float64) on one word (batch 1) and a 120-word sentence
    beside a 3-word one, from the exported folder's tokenizer and onnxruntime in a process without torch."""
    fixtures = {name: load_fixture(name) for name in FIXTURE_NAMES}
    batches = {name: sentences for name, (sentences, _, _) in fixtures.items()}
    batches.update({"one-word": [["ELMo"]], "long-and-short": [LONG, ["a", "short", "one"]]})
    served = serve_without_torch(exported_tiny, batches, tmp_path)
    for name, (_, expected, _) in fixtures.items():
        np.testing.assert_array_equal(served[f"{name}/input_ids"], expected["char_ids"])
        assert_close_to_reference(served[f"{name}/layers"], expected["bilm_activations"], f"{name} layers")
        assert_close_to_reference(served[f"{name}/vectors"], expected["elmo_representation"], f"{name} vectors")
    model, tokenizer = float64_reference(tiny)
    for name in ("one-word", "long-and-short"):
        batch = tokenizer(batches[name], is_split_into_words=True, padding=True, return_tensors="pt")
        with torch.no_grad():
            out = model(**batch, output_hidden_states=True)
        assert_close_to_reference(served[f"{name}/layers"], torch.stack(out.hidden_states), f"{name} layers")
        assert_close_to_reference(served[f"{name}/vectors"], out.last_hidden_state, f"{name} vectors")
    assert not served["long-and-short/layers"][:, 1, 3:].any(), "padding must be zeros"


@pytest.mark.slow
def test_export_folder_card_and_graph(exported_tiny):
    """The folder's files, a card naming inputs, outputs and opset, and a graph whose LSTM is a loop (Scan), not
    unrolled, whose char CNN encodes each distinct word once (Unique), with dynamic batch and words."""
    import onnx

    names = sorted(p.name for p in exported_tiny.iterdir())
    assert names == [
        "README.md",
        "added_tokens.json",
        "basic_tokenization_elmo.py",
        "config.json",
        "model.onnx",
        "tokenization_elmo.py",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    graph = onnx.load(exported_tiny / "model.onnx")
    ops = [node.op_type for node in graph.graph.node]
    assert ops.count("Scan") == 2  # one loop per biLM layer
    assert ops.count("Unique") == 1  # the words of the batch, before the char CNN
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.graph.input}
    assert dims == {"input_ids": ["batch", "words", 50], "attention_mask": ["batch", "words"]}
    assert [o.name for o in graph.graph.output] == ["last_hidden_state", "hidden_states"]
    metadata = {p.key: p.value for p in graph.metadata_props}  # what embed reads and checks
    assert sorted(metadata) == ["dtype", "elmo_config"] and metadata["dtype"] == "float32"
    config = json.loads((exported_tiny / "config.json").read_text())
    recorded = json.loads(metadata["elmo_config"])
    from options_elmo import NUMBERS_FIELDS

    assert sorted(recorded) == sorted(NUMBERS_FIELDS)  # the fields that decide the numbers, and no other
    assert recorded["projection_dim"] == config["projection_dim"] == 8
    assert recorded == {name: config.get(name) for name in recorded}
    card = (exported_tiny / "README.md").read_text()
    opset = next(o.version for o in graph.opset_import if o.domain == "")
    assert f"opset {opset}" in card and "`input_ids`: int64" in card and "`hidden_states`: float32 `[3," in card
    assert "softmax" not in card  # not a language model
    assert "auto_map" not in json.loads((exported_tiny / "config.json").read_text())
    from elmo_transformers.output_paths import is_earlier_conversion

    assert is_earlier_conversion(exported_tiny)  # so that --overwrite may replace it


def test_bad_input_is_one_line(tmp_path, capsys, monkeypatch):
    """Not ELMo, an existing output, a --dtype not offered, onnx not installed: one line each, nothing written."""
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert"}))
    cases = [
        (["--model", str(bert), "--output", str(tmp_path / "a")], "is not an ELMo model"),
        (["--output", str(bert)], "exists and is not empty (pass --overwrite"),
    ]
    for args, message in cases:
        assert main(["export", "onnx", *args]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    with pytest.raises(SystemExit) as exit_code:
        main(["export", "onnx", "--output", str(tmp_path / "b"), "--dtype", "bfloat16"])
    assert exit_code.value.code == 2 and "invalid choice: 'bfloat16'" in capsys.readouterr().err
    from elmo_transformers.errors import UserError
    from elmo_transformers.runtime.onnx_export import export_onnx

    with pytest.raises(UserError, match="^dtype .float16.: the ONNX export offers float32, int8"):
        export_onnx(None, None, tmp_path / "c", dtype="float16")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real_find_spec(name, *a)
    )
    assert main(["export", "onnx", "--output", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert (
        err == 'error: exporting to ONNX needs onnxruntime, not installed here: pip install "elmo-transformers[onnx]"\n'
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert"] and len(list(bert.iterdir())) == 1


@pytest.mark.slow
def test_language_model_exports_its_bilm(lm_dir, tmp_path):
    """An LM folder exports its biLM; the card says the softmax is not exported; the graph equals PyTorch."""
    import onnxruntime

    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    assert main(["export", "onnx", "--model", str(lm_dir), "--output", str(tmp_path / "lm")]) == 0
    assert "the word softmax is not exported" in (tmp_path / "lm" / "README.md").read_text()
    tokenizer = ElmoTokenizer.from_pretrained(lm_dir)
    batch = tokenizer([["the", "cat"], ["a"]], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = ElmoModel.from_pretrained(lm_dir).eval()(**batch, output_hidden_states=True)
    session = onnxruntime.InferenceSession(str(tmp_path / "lm" / "model.onnx"))
    vectors, layers = session.run(None, {k: batch[k].numpy() for k in ("input_ids", "attention_mask")})
    assert_close_to_reference(layers, torch.stack(out.hidden_states), "layers")
    assert_close_to_reference(vectors, out.last_hidden_state, "vectors")


@pytest.fixture(scope="module")
def exported_default_int8(tmp_path_factory):
    """The default model exported by `export onnx --dtype int8`."""
    output = tmp_path_factory.mktemp("onnx") / "int8"
    assert main(["export", "onnx", "--output", str(output), "--dtype", "int8"]) == 0
    return output


def int8_rule(int8, fp32):
    """Assert the int8 rule on two [layers, vectors, 2P] arrays: cosine median >= 0.999, 1st percentile >= 0.99."""
    cos = torch.nn.functional.cosine_similarity(torch.as_tensor(int8), torch.as_tensor(fp32), dim=-1).flatten()
    assert cos.median() >= 0.999 and torch.quantile(cos, 0.01) >= 0.99, (cos.median(), torch.quantile(cos, 0.01))


@pytest.mark.slow
def test_int8_export_stays_within_the_int8_rule(exported_default_int8):
    """`export onnx --dtype int8` of the default model: the LSTM's GEMMs are int8 (also inside the loops), and every
    vector of every layer against PyTorch float32 has cosine median >= 0.999 and 1st percentile >= 0.99."""
    import onnx
    import onnxruntime
    from conftest import SENTENCES

    from elmo_transformers.models import DEFAULT_MODEL
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    graph = onnx.load(exported_default_int8 / "model.onnx")
    assert not [i.name for i in graph.graph.initializer if i.name.endswith(("state_weight", "projection_weight"))]
    loops = [node.attribute[0].g for node in graph.graph.node if node.op_type == "Scan"]
    assert loops and all(sum(n.op_type == "MatMulInteger" for n in body.node) == 4 for body in loops)  # 2 per GEMM
    assert "--dtype int8" in (exported_default_int8 / "README.md").read_text()
    assert {p.key: p.value for p in graph.metadata_props}["dtype"] == "int8"
    tokenizer = ElmoTokenizer.from_pretrained(DEFAULT_MODEL)
    batch = tokenizer([s.split() for s in SENTENCES], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        fp32 = torch.stack(
            ElmoModel.from_pretrained(DEFAULT_MODEL).eval()(**batch, output_hidden_states=True).hidden_states
        )
    session = onnxruntime.InferenceSession(str(exported_default_int8 / "model.onnx"))
    _, int8 = session.run(None, {k: batch[k].numpy() for k in ("input_ids", "attention_mask")})
    mask = batch["attention_mask"].bool()
    int8_rule(torch.from_numpy(int8)[:, mask], fp32[:, mask])
    assert not np.allclose(int8[1:], fp32[1:].numpy(), atol=1e-5), "the GEMMs are not int8"


# ----- `embed` and ElmoEmbedder on an exported folder ---------------------------------------------------------------


def embed_lines(model, lines, tmp_path, *flags, name="out.hdf5"):
    """`elmo-transformers embed --all` of `lines` with `model`; returns (datasets, sentence_to_index, dtypes)."""
    from conftest import read_hdf5

    source = tmp_path / "input.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main(["embed", str(source), str(tmp_path / name), "--model", str(model), "--all", *flags]) == 0
    return read_hdf5(tmp_path / name)


@pytest.mark.slow
def test_embed_with_an_exported_folder_equals_pytorch(exported_tiny, tiny_model_dir, tiny, tmp_path):
    """`embed --model EXPORTED` writes the file `embed --model TORCH_FOLDER` writes: the same datasets, shapes, dtype
    and index, and, like it, the PyTorch model's numbers (float64) under the tolerance rule, for AllenNLP's sentences,
    a blank line and a 120-word line; also AllenNLP's own numbers. A line longer than --max-sentence-words (which
    PyTorch embeds in stateful windows) is refused in one line before any work; raised above it, that line is
    embedded whole, as PyTorch does."""
    sentences, expected, _ = load_fixture("allennlp-tiny")
    lines = [" ".join(words) for words in sentences] + ["", " ".join(LONG)]
    (ours, index, dtypes), (torch_arrays, torch_index, torch_dtypes) = (
        embed_lines(model, lines, tmp_path, "--batch-size", "4", name=name)
        for model, name in [(exported_tiny, "onnx.hdf5"), (tiny_model_dir, "torch.hdf5")]
    )
    assert index == torch_index and dtypes == torch_dtypes == {np.dtype("float32")}
    assert sorted(ours) == sorted(torch_arrays) == sorted(str(i) for i in range(len(lines)))
    reference = ElmoEmbedder(*float64_reference(tiny)).embed_batch([line.split() for line in lines])
    for key, array in torch_arrays.items():
        assert ours[key].shape == array.shape
        assert_close_to_reference(ours[key], reference[int(key)], f"line {key}")
        assert_close_to_reference(array, reference[int(key)], f"line {key}, PyTorch")
    for i in range(len(sentences)):
        assert_close_to_reference(ours[str(i)], expected[f"sent_{i}_activations"], f"line {i} vs AllenNLP")
    assert ours[str(len(sentences))].shape == (3, 0, 16) and ours[str(len(lines) - 1)].shape == (3, 120, 16)

    from conftest import one_line_error

    source = tmp_path / "input.txt"
    message = one_line_error(
        [
            str(source),
            str(tmp_path / "refused.hdf5"),
            "--model",
            str(exported_tiny),
            "--all",
            "--max-sentence-words",
            "100",
        ]
    )
    assert message == (
        f"error: --max-sentence-words 100: shorter than line {len(lines)} of {source} (120 words), and an exported "
        "ONNX model cannot embed a line in windows (its graph is stateless: no LSTM state carries from one window to "
        "the next): give 120 or more to embed every line whole (memory then grows with the line), or use the "
        "PyTorch model for stateful windows"
    )
    assert not list(tmp_path.glob("refused.hdf5*"))
    whole, _, _ = embed_lines(
        exported_tiny, [" ".join(LONG)], tmp_path, "--max-sentence-words", "120", name="whole.hdf5"
    )
    assert_close_to_reference(whole["0"], reference[-1], "the long line whole")


@pytest.mark.slow
def test_resuming_with_another_model_at_the_same_path_is_refused(exported_tiny, tiny_model_dir, tmp_path, monkeypatch):
    """run.json of an exported model records onnxruntime, its dtype and the hash of its graph file; resuming after
    the folder at the same path became the PyTorch model (or the reverse) is refused, naming what differs."""
    import hashlib
    import shutil

    from conftest import interrupt_after, one_line_error

    model = tmp_path / "model"
    shutil.copytree(exported_tiny, model)
    source = tmp_path / "input.txt"
    source.write_text("".join(" ".join(["w"] * n) + "\n" for n in range(1, 7)), encoding="utf-8")
    args = [str(source), str(tmp_path / "out.hdf5"), "--model", str(model), "--top", "--batch-size", "2"]
    for first, then, differs in [
        (exported_tiny, tiny_model_dir, "a model of weights_sha256 '"),
        (tiny_model_dir, exported_tiny, "a model without runtime, now a model of runtime 'onnxruntime'"),
    ]:
        shutil.rmtree(model)
        shutil.copytree(first, model)
        interrupt_after(monkeypatch, "add_batch", 1)
        assert main(["embed", *args]) == 130
        monkeypatch.undo()
        run = json.loads((tmp_path / "out.hdf5.partial" / "run.json").read_text())
        if first == exported_tiny:
            graph = (model / "model.onnx").read_bytes()
            assert run["runtime"] == "onnxruntime" and run["dtype"] == "float32"
            assert run["weights_sha256"] == hashlib.sha256(f"model.onnx {len(graph)}\n".encode() + graph).hexdigest()
        shutil.rmtree(model)
        shutil.copytree(then, model)
        assert f"it was started with {differs}" in one_line_error([*args, "--resume"])
        shutil.rmtree(model)
        shutil.copytree(first, model)
        assert main(["embed", *args, "--resume"]) == 0
        (tmp_path / "out.hdf5").unlink()


@pytest.mark.slow
def test_elmo_embedder_on_an_exported_folder(exported_tiny, tiny):
    """ElmoEmbedder(EXPORTED) gives the PyTorch embedder's arrays (embed_sentence, embed_batch, tf_hub_outputs; the
    model in float64) under the tolerance rule; what the graph cannot do (stateful windows, another dtype, a GPU) is
    one line each."""
    from elmo_transformers.errors import UserError

    onnx_embedder, torch_embedder = ElmoEmbedder(exported_tiny), ElmoEmbedder(*float64_reference(tiny))
    batch = [["ELMo"], LONG, [], ["a", "short", "one"]]
    for ours, theirs in zip(onnx_embedder.embed_batch(batch), torch_embedder.embed_batch(batch), strict=True):
        assert ours.shape == theirs.shape and ours.dtype == np.float32
        assert_close_to_reference(ours, theirs, "embed_batch")
    assert_close_to_reference(onnx_embedder.embed_sentence(LONG), torch_embedder.embed_sentence(LONG), "embed_sentence")
    hub = onnx_embedder.tf_hub_outputs(["The cat sat .", "ELMo"])
    for name, value in torch_embedder.tf_hub_outputs(["The cat sat .", "ELMo"]).items():
        assert_close_to_reference(hub[name], value, name)
    with pytest.raises(UserError) as refused:
        onnx_embedder.embed_window(["a", "b"])
    assert str(refused.value) == (
        f"{exported_tiny} is an exported ONNX model, whose graph is stateless (every call starts from a zero LSTM "
        "state): it cannot carry the LSTM state from one window of a text to the next; use the PyTorch model for "
        "stateful windows"
    )
    from quantization_elmo import ElmoInt8Config

    for kwargs, message in [
        (
            dict(dtype=torch.bfloat16),
            f"bfloat16: {exported_tiny} is an ONNX model exported in float32, the one "
            "dtype it runs in: leave the dtype out, or use the PyTorch model",
        ),
        (
            dict(quantization_config=ElmoInt8Config()),
            f"int8: {exported_tiny} is an ONNX model exported in float32, "
            "the one dtype it runs in: leave the dtype out, or export the model again in int8",
        ),
        (
            dict(device="meta"),
            f"meta: {exported_tiny} is an exported ONNX model, which runs on the CPU here "
            "(onnxruntime's CPU provider): leave the device out, or use the PyTorch model",
        ),
    ]:
        with pytest.raises(UserError) as refused:
            ElmoEmbedder(exported_tiny, **kwargs)
        assert str(refused.value) == message
    assert ElmoEmbedder(exported_tiny, dtype=torch.float32).model.dtype == "float32"


@pytest.mark.slow
def test_embed_with_an_int8_export_stays_within_the_int8_rule(exported_default_int8, tmp_path):
    """`embed --model INT8_EXPORT` runs in int8 (its own dtype, recorded as such; --dtype float32 is refused) and
    its vectors stay within the int8 rule against `embed` of the PyTorch model in float32."""
    from conftest import one_line_error
    from conftest import SENTENCES

    from elmo_transformers.models import DEFAULT_MODEL

    int8, _, _ = embed_lines(exported_default_int8, SENTENCES, tmp_path, name="int8.hdf5")
    fp32, _, _ = embed_lines(DEFAULT_MODEL, SENTENCES, tmp_path, name="fp32.hdf5")
    int8_rule(
        np.concatenate([int8[str(i)] for i in range(len(SENTENCES))], axis=1),
        np.concatenate([fp32[str(i)] for i in range(len(SENTENCES))], axis=1),
    )
    assert one_line_error(
        [
            str(tmp_path / "input.txt"),
            str(tmp_path / "x.hdf5"),
            "--model",
            str(exported_default_int8),
            "--top",
            "--dtype",
            "float32",
        ]
    ) == (
        f"error: --dtype float32: {exported_default_int8} is an ONNX model exported in int8, the one dtype it runs "
        "in: leave the dtype out, or export the model again in float32"
    )


def test_embed_without_onnxruntime_or_with_a_damaged_graph_is_one_line(tiny_model_dir, tmp_path, monkeypatch):
    """An exported folder where onnxruntime is not installed: one line naming the install command, before the graph
    is read (so a folder with the export's files but an empty model.onnx shows it); with onnxruntime, that empty
    graph file is one line naming it. Nothing written."""
    import shutil

    from conftest import one_line_error

    exported = shutil.copytree(tiny_model_dir, tmp_path / "onnx", ignore=shutil.ignore_patterns("*.safetensors"))
    (exported / "model.onnx").write_bytes(b"")

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real_find_spec(name, *a)
    )
    source = tmp_path / "input.txt"
    source.write_text("a b\n")
    assert one_line_error([str(source), str(tmp_path / "out.hdf5"), "--model", str(exported), "--top"]) == (
        f"error: --model {exported} is an exported ONNX model: running it needs onnxruntime, not "
        'installed here: pip install "elmo-transformers[onnx]"'
    )
    monkeypatch.undo()
    message = one_line_error([str(source), str(tmp_path / "out.hdf5"), "--model", str(exported), "--top"])
    assert message.startswith(f"error: --model {exported}: onnxruntime cannot load its model.onnx ([ONNXRuntimeError]")
    assert message.endswith("): restore it, or export the model again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.txt", "onnx"]


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [True, False])
def test_transformers_exporter_on_a_freshly_loaded_model(tiny_model_dir, dynamic):
    """transformers' own ONNX exporter (`transformers.exporters`) on ElmoModel as from_pretrained gives it, weights
    requiring gradients (it failed there: ONNX could not take the LSTM's scan apart); the graph, run by onnxruntime,
    gives AllenNLP's numbers. A dynamic graph is exported on two short sentences and run on the fixture's batch."""
    from transformers.exporters import OnnxConfig, OnnxExporter

    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    model = ElmoModel.from_pretrained(tiny_model_dir).eval()
    assert all(p.requires_grad for p in model.parameters())
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    sentences, expected, _ = load_fixture("allennlp-tiny")
    batch = dict(tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt"))
    sample = dict(tokenizer(["a b c", "d"], padding=True, return_tensors="pt")) if dynamic else batch
    exported = OnnxExporter().export(model, sample, config=OnnxConfig(dynamic=dynamic))
    assert_close_to_reference(exported(**batch)["last_hidden_state"], expected["elmo_representation"], "ELMo vectors")


@pytest.mark.slow
def test_transformers_exporter_on_the_language_model(lm_dir):
    """The language model through transformers' exporter: its logits give AllenNLP's log-probabilities."""
    from transformers.exporters import OnnxConfig, OnnxExporter

    from modeling_elmo import ElmoForLanguageModeling
    from tokenization_elmo import ElmoTokenizer

    model = ElmoForLanguageModeling.from_pretrained(lm_dir).eval()
    tokenizer = ElmoTokenizer.from_pretrained(lm_dir)
    sentences = json.loads((LM_FIXTURE / "sentences.json").read_text(encoding="utf-8"))
    expected = np.load(LM_FIXTURE / "expected.npz")
    batch = dict(tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt"))
    out = OnnxExporter().export(model, batch, config=OnnxConfig())(**batch)
    for direction in ("forward", "backward"):
        log_probs = torch.log_softmax(torch.as_tensor(out[f"{direction}_logits"]), -1)
        for i, n in enumerate(expected["n_tokens"]):
            assert_close_to_reference(
                log_probs[i, : n + 1], expected[f"{direction}_log_probs"][i, : n + 1], f"{direction} {i}"
            )
