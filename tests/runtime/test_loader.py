"""The one loader (model_source.load_model) and the ONNX runner (runtime.onnx): an exported folder whose parts
disagree is refused at load in one line, empty and big batches, every kind of folder through one function, and the
start-up rules (the lazy package; an exported folder embedded where torch cannot be imported)."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import SHIPPED, command_env, one_line_error
from tolerance import assert_close_to_reference

from elmo_transformers.cli import main
from elmo_transformers.errors import ModelError
from elmo_transformers.model_source import load_model
from elmo_transformers.runtime import onnx as runner


@pytest.fixture(scope="module")
def exported(tiny_model_dir, tmp_path_factory):
    output = tmp_path_factory.mktemp("onnx") / "tiny-onnx"
    assert main(["export", "onnx", "--model", str(tiny_model_dir), "--output", str(output)]) == 0
    return output


@pytest.fixture(scope="module")
def other_export(tmp_path_factory):
    """An export of another, smaller ELMo (projection_dim 4, 2 x 4 = 8-value vectors where the fixture has 16)."""
    from configuration_elmo import ElmoConfig
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    folder = tmp_path_factory.mktemp("other") / "pytorch"
    config = ElmoConfig(lstm_dim=12, projection_dim=4, n_layers=1, filters=[[1, 4], [2, 4]], n_highway=1)
    ElmoModel(config).save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    output = folder.parent / "onnx"
    assert main(["export", "onnx", "--model", str(folder), "--output", str(output)]) == 0
    return output


@pytest.mark.slow
def test_a_swapped_graph_is_refused_at_load(exported, other_export, tmp_path):
    """model.onnx of another export in the folder (its vectors 8 values, the config says 16): embed and ElmoEmbedder
    refuse it in one line before any work, and write none of the other model's vectors."""
    from elmo_transformers import ElmoEmbedder

    swapped = shutil.copytree(exported, tmp_path / "swapped")
    shutil.copy(other_export / "model.onnx", swapped / "model.onnx")
    (tmp_path / "in.txt").write_text("a b\n")
    message = one_line_error([str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(swapped), "--top"])
    assert message.startswith(
        f"error: --model {swapped}: its model.onnx does not fit its config.json: output "
        "last_hidden_state has shape ['batch', 'words', 8], the config gives ['batch', 'words', "
        "16]; "
    ), message
    assert not (tmp_path / "out.hdf5").exists() and not (tmp_path / "out.hdf5.partial").exists()
    with pytest.raises(ModelError, match="its model.onnx does not fit its config.json: output last_hidden_state"):
        ElmoEmbedder(swapped)


@pytest.mark.slow
def test_a_config_edited_after_export_is_refused_at_load(exported, tmp_path):
    """config.json edited after the export: a size the graph's shapes show (projection_dim), or a value only its
    recorded config shows (cell_clip, num_output_representations); a graph that records no config is refused too.
    A field that does not decide the numbers may change (options_elmo.NUMBERS_FIELDS)."""
    import onnx

    for field, value, shown in [
        ("projection_dim", 4, "output last_hidden_state has shape"),
        ("cell_clip", 1.5, "cell_clip is 1.5 in config.json, the graph was exported with"),
        ("num_output_representations", 2, "num_output_representations is 2 in config.json"),
    ]:
        edited = shutil.copytree(exported, tmp_path / field)
        config = json.loads((edited / "config.json").read_text())
        (edited / "config.json").write_text(json.dumps({**config, field: value}))
        with pytest.raises(ModelError) as refused:
            load_model(edited)
        assert str(refused.value).startswith(f"{edited}: its ") and shown in str(refused.value), str(refused.value)
    unrecorded = shutil.copytree(exported, tmp_path / "unrecorded")
    graph = onnx.load(unrecorded / "model.onnx")
    kept = [p for p in graph.metadata_props if p.key != "elmo_config"]
    del graph.metadata_props[:]
    graph.metadata_props.extend(kept)
    onnx.save(graph, unrecorded / "model.onnx")
    with pytest.raises(ModelError, match="its model.onnx does not record the config it was exported with"):
        load_model(unrecorded)
    for field, value in [("dropout", 0.1), ("float_kernel", "aten"), ("lstm_gates_block_elements", 1024)]:
        changed = shutil.copytree(exported, tmp_path / f"changed-{field}")
        config = json.loads((changed / "config.json").read_text())
        (changed / "config.json").write_text(json.dumps({**config, field: value}))
        load_model(changed)


@pytest.mark.slow
def test_empty_and_big_batches_on_an_export(exported, tiny, monkeypatch):
    """No sentences, or only empty ones: empty results without running the graph (onnxruntime fails at a Reshape on
    an empty batch). A batch beyond MAX_RUN_WORDS runs in slices with the same numbers."""
    model, tokenizer = load_model(exported)
    out = model(np.zeros((0, 0, 50), np.int64), np.zeros((0, 0), np.int64), output_hidden_states=True)
    assert out.last_hidden_state.shape == (0, 0, 16) and np.stack(out.hidden_states).shape == (3, 0, 0, 16)
    from elmo_transformers import ElmoEmbedder

    embedder = ElmoEmbedder(exported)
    assert [a.shape for a in embedder.embed_batch([[], []])] == [(3, 0, 16), (3, 0, 16)]
    batch = [["w%d" % (i % 7)] * (1 + i % 9) for i in range(40)]
    whole = embedder.embed_batch(batch)
    monkeypatch.setattr(runner, "MAX_RUN_WORDS", 20)  # 2 sentences of 9 words a run
    for sliced, one in zip(embedder.embed_batch(batch), whole, strict=True):
        assert_close_to_reference(sliced, one, "sliced")


@pytest.mark.slow
def test_one_loader_for_every_kind_of_folder(tiny_model_dir, lm_dir, exported):
    from bilm_elmo import ElmoLanguageModelCore, ElmoModelCore
    from modeling_elmo import ElmoForLanguageModeling, ElmoForTokenClassification, ElmoModel
    from tokenization_elmo import ElmoTokenizer

    assert type(load_model(lm_dir)[0]) is ElmoModelCore  # the biLM of a language model, without transformers
    assert type(load_model(lm_dir, language_model=True)[0]) is ElmoLanguageModelCore
    assert load_model(tiny_model_dir, dtype="bfloat16")[0].dtype.__str__() == "torch.bfloat16"
    assert load_model(tiny_model_dir, dtype="int8")[0].is_quantized
    for model_class, folder in [(ElmoModel, tiny_model_dir), (ElmoForLanguageModeling, lm_dir)]:
        model, tokenizer = load_model(folder, model_class)  # transformers' classes, for training and the Hub
        assert type(model) is model_class and type(tokenizer) is ElmoTokenizer
    head, _ = load_model(tiny_model_dir, ElmoForTokenClassification, config={"num_labels": 3})
    assert head.config.num_labels == 3 and not head.training
    model, _ = load_model(exported)
    assert (model.traits.runtime, model.traits.dtype, model.traits.stateful) == ("onnxruntime", "float32", False)
    for kwargs, message in [
        (dict(name=tiny_model_dir, language_model=True), "it has no language-model softmax"),
        (dict(name=exported, runtime="torch"), "is an exported ONNX model (model.onnx, no PyTorch weights)"),
        (dict(name=exported, language_model=True), "its graph holds the biLM, not the language model's softmax"),
    ]:
        with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
            load_model(**kwargs)


NO_TORCH = """
import sys
sys.modules["torch"] = None  # `import torch` fails from here on
import json
import os
import elmo_transformers, elmo_transformers_cli
from transformers import AutoTokenizer  # the Auto modules import where torch cannot be
folder, text, output = sys.argv[1:4]
status = elmo_transformers_cli.main(["embed", text, output, "--model", folder, "--top"])
from elmo_transformers import ElmoEmbedder
vectors = ElmoEmbedder(folder).embed_sentence(["a", "b"])
print(json.dumps({"status": status, "shape": list(vectors.shape), "tf_hub":
                  list(ElmoEmbedder(folder).tf_hub_outputs(["a b"])["word_emb"].shape)}))
"""


@pytest.mark.slow
def test_an_export_embeds_where_torch_cannot_be_imported(exported, tmp_path):
    """An exported folder embeds where torch cannot be imported, and writes nothing into the user's home (onnxruntime's
    telemetry database, ~/.cache/Microsoft/, stays off)."""
    (tmp_path / "in.txt").write_text("a b\nc\n")
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in command_env(HOME=str(tmp_path / "home")).items() if k != "ORT_DISABLE_TELEMETRY"}
    done = subprocess.run(
        [sys.executable, "-c", NO_TORCH, str(exported), str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"status": 0, "shape": [3, 2, 16], "tf_hub": [1, 2, 8]}
    assert (tmp_path / "out.hdf5").exists()
    assert list((tmp_path / "home").rglob("*")) == []


@pytest.mark.slow
def test_an_export_embeds_without_importing_torch_where_torch_is_installed(
    exported, tiny_model_dir, tmp_path, monkeypatch
):
    """The torch-free path is taken, not only survived: nothing imports torch, and `--runtime onnxruntime` on a
    PyTorch folder whose export is cached does not either."""
    (tmp_path / "in.txt").write_text("a b\nc\n")
    code = (
        "import json, sys, elmo_transformers_cli\n"
        "folder, text, output = sys.argv[1:]\n"
        "status = elmo_transformers_cli.main(['embed', text, output, '--model', folder, '--top'])\n"
        "from elmo_transformers import ElmoEmbedder\n"
        "shape = list(ElmoEmbedder(folder).embed_sentence(['a', 'b']).shape)\n"
        "print(json.dumps([status, shape, 'torch' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(exported), str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5")],
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [0, [3, 2, 16], False], done.stderr[-3000:]
    # The export cache holding this model's export (made by the cache itself, in this process)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf"))
    load_model(tiny_model_dir, runtime="onnxruntime")
    cached = (
        "import json, sys, elmo_transformers_cli\n"
        "status = elmo_transformers_cli.main(['embed', *sys.argv[1:], '--top', '--runtime', 'onnxruntime'])\n"
        "print(json.dumps([status, 'torch' in sys.modules]))"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            cached,
            str(tmp_path / "in.txt"),
            str(tmp_path / "cached.hdf5"),
            "--model",
            str(tiny_model_dir),
        ],
        env=command_env(HF_HOME=str(tmp_path / "hf")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [0, False], done.stderr[-3000:]


@pytest.mark.slow
def test_importing_the_package_loads_neither_torch_nor_transformers(tmp_path):
    """The import is cheap and registers nothing; `register()` is explicit and works in either import order: before
    transformers' Auto modules are imported, or after (also when they were first imported inside another import)."""
    orders = {
        "register first": (
            "elmo_transformers.register()\nfrom transformers import AutoConfig, AutoModel, AutoTokenizer\n"
        ),
        "transformers first": (
            "import elmo_transformers.training.perplexity\n"  # the Auto modules inside an import
            "from transformers import AutoConfig, AutoModel, AutoTokenizer\n"
            "elmo_transformers.register()\nelmo_transformers.register()\n"
        ),
    }
    for order, body in orders.items():
        code = (
            "import json, sys, elmo_transformers\n"
            "loaded = sorted({'torch', 'transformers'} & set(sys.modules))\n"
            + body
            + "folder = elmo_transformers.DEFAULT_MODEL\n"
            "found = [AutoConfig.from_pretrained(folder), AutoTokenizer.from_pretrained(folder), "
            "AutoModel.from_pretrained(folder)]\n"
            "print(json.dumps([loaded, [type(x).__module__ + '.' + type(x).__name__ for x in found]]))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], env=command_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        classes = ["configuration_elmo.ElmoConfig", "tokenization_elmo.ElmoTokenizer", "modeling_elmo.ElmoModel"]
        assert json.loads(done.stdout.splitlines()[-1]) == [[], classes], (order, done.stderr[-3000:])


SPAWNED = """
import elmo_transformers

elmo_transformers.register()  # where the Auto classes are used: in the process the work is spawned into too


def load(folder):
    from transformers import AutoModel

    return type(AutoModel.from_pretrained(folder)).__module__
"""


@pytest.mark.slow
def test_a_spawned_process_and_a_pickled_model_load_the_installed_classes(tmp_path):
    """A process started with `spawn` (a DataLoader worker, a multiprocessing pool) imports the module of the work
    it runs, whose `register()` runs there; a pickled model unpickles in a fresh process that imports nothing of
    ELMo's first."""
    (tmp_path / "work.py").write_text(SPAWNED)
    code = (
        "import multiprocessing, pickle, subprocess, sys\n"
        "import work\n"
        "from transformers import AutoModel\n"
        "with multiprocessing.get_context('spawn').Pool(1) as pool:\n"
        "    spawned = pool.apply(work.load, (sys.argv[1],))\n"
        "blob = pickle.dumps(AutoModel.from_pretrained(sys.argv[1]))\n"
        "fresh = subprocess.run([sys.executable, '-c', 'import pickle, sys; "
        "print(type(pickle.loads(sys.stdin.buffer.read())).__name__)'], input=blob, capture_output=True)\n"
        "print(spawned, fresh.stdout.decode().strip())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(SHIPPED)],
        env=command_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.stdout.split() == ["modeling_elmo", "ElmoModel"], done.stderr[-3000:]


@pytest.mark.slow
def test_runtime_onnxruntime_exports_once_into_the_cache(tiny_model_dir, tmp_path, monkeypatch):
    """ElmoEmbedder(PYTORCH_FOLDER, runtime="onnxruntime"): exported on first use under HF_HOME, keyed by the
    weights' hash, reused the second time; changed weights get another export. The numbers are PyTorch's."""
    from huggingface_hub import constants

    from elmo_transformers import ElmoEmbedder

    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf"))
    first = ElmoEmbedder(tiny_model_dir, runtime="onnxruntime")
    (cached,) = (tmp_path / "hf" / "elmo-transformers" / "onnx").glob("*-float32")
    assert first.model.folder.path == str(cached) and first.traits.runtime == "onnxruntime"
    stamp = (cached / "model.onnx").stat().st_mtime_ns
    assert ElmoEmbedder(tiny_model_dir, runtime="onnxruntime").model.folder.path == str(cached)
    assert (cached / "model.onnx").stat().st_mtime_ns == stamp  # reused, not exported again
    assert_close_to_reference(
        first.embed_sentence(["a", "b"]), ElmoEmbedder(tiny_model_dir).embed_sentence(["a", "b"]), "cached export"
    )
    changed = shutil.copytree(tiny_model_dir, tmp_path / "changed")
    config = json.loads((changed / "config.json").read_text())
    (changed / "config.json").write_text(json.dumps({**config, "cell_clip": 1.0}))
    ElmoEmbedder(changed, runtime="onnxruntime")
    assert len(list((tmp_path / "hf" / "elmo-transformers" / "onnx").glob("*-float32"))) == 2


def test_a_failed_export_restores_the_logger_and_the_warning_filters(tiny, tmp_path, monkeypatch):
    """What the export silences (torch's exporter registration logger, its warnings) is restored also when the
    export fails, and the card's Inputs/Outputs come from the same contract as the graph's names."""
    import logging
    import warnings

    import torch

    from elmo_transformers.runtime import onnx_export as export
    from elmo_transformers.runtime.onnx_config import ElmoOnnxConfig

    model, tokenizer = tiny
    logger = logging.getLogger("torch.onnx._internal.exporter._registration")
    logger.setLevel(logging.INFO)
    filters = list(warnings.filters)

    def fail(*args, **kwargs):
        raise RuntimeError("the exporter failed")

    monkeypatch.setattr(torch.onnx, "export", fail)
    contract = ElmoOnnxConfig(model.config)
    with pytest.raises(RuntimeError, match="the exporter failed"):
        export.export_graph(model, tokenizer, str(tmp_path / "model.onnx"), contract)
    assert logger.level == logging.INFO and warnings.filters == filters
    card = contract.describe()
    assert "- `input_ids`: int64 `[batch, words, 50]`" in card
    assert "- `hidden_states`: float32 `[3, batch, words, 16]`" in card


@pytest.mark.slow
def test_registering_explicitly_first_then_the_auto_classes(tmp_path):
    """What a command does (cli.import_package: register() before transformers' Auto modules are imported): the Auto
    classes load ELMo."""
    code = (
        "import elmo_transformers\nelmo_transformers.register()\n"
        "from transformers import AutoModelForPreTraining, AutoTokenizer\n"
        "print(type(AutoModelForPreTraining.from_pretrained(elmo_transformers.DEFAULT_MODEL)).__name__,"
        " type(AutoTokenizer.from_pretrained(elmo_transformers.DEFAULT_MODEL)).__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=command_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.split() == ["ElmoForLanguageModeling", "ElmoTokenizer"], done.stderr[-3000:]


@pytest.mark.slow
def test_the_loader_routes_device_auto(tiny_model_dir, exported, monkeypatch):
    """device="auto" (what ElmoEmbedder asks for when given no device): the device accelerate picks for this process
    for a float PyTorch model; the CPU for int8 and for an export. The process's device is faked as "meta" (a torch
    device every machine has) so that the routing shows on a machine without an accelerator."""
    import types

    import elmo_transformers.model_source as model_source
    from elmo_transformers import ElmoEmbedder

    monkeypatch.setattr(model_source, "process_state", lambda: types.SimpleNamespace(device="meta"))
    assert load_model(tiny_model_dir, device="auto")[0].device.type == "meta"
    assert ElmoEmbedder(tiny_model_dir).model.device.type == "meta"
    assert load_model(tiny_model_dir, device="auto", dtype="int8")[0].device.type == "cpu"
    assert ElmoEmbedder(tiny_model_dir, dtype="int8").model.device.type == "cpu"
    assert load_model(exported, device="auto")[0].device == "cpu"
    assert ElmoEmbedder(tiny_model_dir, device="cpu").model.device.type == "cpu"


@pytest.mark.slow
def test_one_load_reads_the_config_json_once(exported, tiny_model_dir, monkeypatch):
    """Loading a folder reads its config.json once (`open_model`'s check) and hands it on: the ONNX runner checks the
    graph against that same reading, and a PyTorch folder's config (ElmoOptions for the inference core, ElmoConfig
    for transformers' classes) is made from it (transformers does not read the file again)."""
    import builtins

    real_open, opened = builtins.open, []

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.basename(os.fspath(file)) == "config.json":
            opened.append(os.fspath(file))
        return real_open(file, *args, **kwargs)

    from modeling_elmo import ElmoModel

    monkeypatch.setattr(builtins, "open", counting_open)
    model, _ = load_model(exported)
    core, _ = load_model(tiny_model_dir)
    torch_model, _ = load_model(tiny_model_dir, ElmoModel)
    monkeypatch.undo()
    assert opened == [str(exported / "config.json"), *[os.path.join(tiny_model_dir, "config.json")] * 2]
    assert model.config.projection_dim == json.loads((exported / "config.json").read_text())["projection_dim"]
    with open(os.path.join(tiny_model_dir, "config.json"), encoding="utf-8") as f:
        saved = json.load(f)
    options = dataclasses.asdict(core.config)
    assert options == {name: saved[name] for name in options}
    loaded = torch_model.config.to_dict()
    assert {name: loaded[name] for name in saved if name != "transformers_version"} == {
        name: value for name, value in saved.items() if name != "transformers_version"
    }


@pytest.mark.fidelity
def test_the_inference_core_gives_allennlps_and_transformers_numbers(tiny_model_dir, lm_dir):
    """What inference loads (`bilm_elmo`'s cores, no transformers) and transformers' classes, from the same folder:
    AllenNLP's numbers both, and the language model's scores of the one as of the other."""
    import torch

    from conftest import load_fixture
    from modeling_elmo import ElmoForLanguageModeling, ElmoModel

    sentences, expected, _ = load_fixture("allennlp-tiny")
    for model_class in (None, ElmoModel):
        model, tokenizer = load_model(tiny_model_dir, model_class)
        encoded = (
            tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
            if model_class
            else {name: torch.from_numpy(array) for name, array in tokenizer.encode(sentences).items()}
        )
        with torch.no_grad():
            out = model(**encoded, output_hidden_states=True)
        name = model_class.__name__ if model_class else "the core"
        assert_close_to_reference(torch.stack(out.hidden_states), expected["bilm_activations"], what=name)
        assert_close_to_reference(out.last_hidden_state, expected["elmo_representation"], what=name)
    scores = []
    for model_class in (None, ElmoForLanguageModeling):
        lm, tokenizer = load_model(lm_dir, model_class, language_model=model_class is None)
        encoded = (
            tokenizer(["the cat sat".split()], is_split_into_words=True, return_tensors="pt")
            if model_class
            else {name: torch.from_numpy(array) for name, array in tokenizer.encode([["the", "cat", "sat"]]).items()}
        )
        with torch.no_grad():
            scores.append(lm.masked_word_scores(encoded["input_ids"], encoded["attention_mask"], 1))
    assert_close_to_reference(scores[0], scores[1], what="fill-mask scores")


@pytest.mark.slow
def test_the_inference_path_imports_no_transformers(tiny_model_dir, tmp_path):
    """`ElmoEmbedder`, `embed` and the page's model load and run the biLM without transformers (whose model-loading
    imports take seconds): not one of its modules is imported."""
    text = tmp_path / "one.txt"
    text.write_text("the cat sat on the mat .\n")
    code = (
        "import json, sys\nfrom elmo_transformers import ElmoEmbedder\n"
        "from elmo_transformers.cli import main\nfrom elmo_transformers.demo import model\n"
        "ElmoEmbedder(sys.argv[1]).embed_sentence(['a', 'b'])\n"
        "assert main(['embed', sys.argv[2], sys.argv[3], '--model', sys.argv[1], '--top', '--quiet']) == 0\n"
        "loaded = model.load('default')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'transformers')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tiny_model_dir), str(text), str(tmp_path / "o.hdf5")],
        capture_output=True,
        text=True,
        timeout=300,
        env=command_env(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
