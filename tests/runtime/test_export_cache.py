"""The export cache (runtime.cache: `runtime="onnxruntime"` on a PyTorch folder): keyed by every file the model's
numbers depend on, each entry checked against its key before use, a damaged entry exported again, a read-only cache
that holds the export used without a lock, a bounded and announced wait for another process's export, and one line
naming the cache when it cannot be written."""

import json
import logging
import shutil

import filelock
import numpy as np
import pytest
import torch
from tolerance import assert_close_to_reference

from elmo_transformers.errors import UserError
from elmo_transformers.model_folder import open_model
from elmo_transformers.model_source import load_model
from elmo_transformers.runtime import cache

pytestmark = pytest.mark.slow  # every test exports a model to ONNX (a minute each on 2 cores)

SENTENCES = [["The", "cat", "sat", "."], ["ELMo"]]


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf"))
    return tmp_path / "hf"


@pytest.fixture
def model_copy(tiny_model_dir, tmp_path):
    return shutil.copytree(tiny_model_dir, tmp_path / "model", symlinks=True)


def vectors(model, tokenizer):
    batch = tokenizer.encode(SENTENCES)
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    return np.asarray(out.last_hidden_state)


def torch_vectors(folder):
    model, tokenizer = load_model(folder)
    batch = {name: torch.from_numpy(array) for name, array in tokenizer.encode(SENTENCES).items()}
    with torch.no_grad():
        return model(**batch).last_hidden_state.numpy()


def test_the_key_covers_the_tokenizer_and_every_weight_file(model_copy):
    """A changed tokenizer setting (tokenizer_config.json: its segmenter, its conversion, its casing) or vocabulary,
    or other PyTorch pickled weights (pytorch_model.bin, which the loader reads where there is no safetensors file),
    is another model: another entry. A pickle beside model.safetensors is not read, so it changes nothing."""
    key = cache.export_folder(open_model(model_copy), "float32")[1]
    config = (model_copy / "tokenizer_config.json").read_text(encoding="utf-8")
    (model_copy / "tokenizer_config.json").write_text(
        json.dumps({**json.loads(config), "do_lower_case": True}), encoding="utf-8"
    )
    assert cache.export_folder(open_model(model_copy), "float32")[1] != key
    (model_copy / "tokenizer_config.json").write_text(config, encoding="utf-8")
    assert cache.export_folder(open_model(model_copy), "float32")[1] == key
    (model_copy / "pytorch_model.bin").write_bytes(b"weights")
    assert cache.export_folder(open_model(model_copy), "float32")[1] == key
    (model_copy / "model.safetensors").unlink()
    with_bin = cache.export_folder(open_model(model_copy), "float32")[1]
    (model_copy / "pytorch_model.bin").write_bytes(b"other weights")
    assert len({key, with_bin, cache.export_folder(open_model(model_copy), "float32")[1]}) == 3
    assert cache.export_folder(open_model(model_copy), "int8")[1].endswith("-int8")


def test_a_damaged_or_replaced_entry_is_exported_again(model_copy, hf_home, caplog):
    """An entry whose graph was cut, or which holds another model's export, is not served: it is exported again
    (with a warning), and the vectors are the PyTorch model's."""
    reference = torch_vectors(model_copy)
    with caplog.at_level(logging.WARNING, logger=cache.__name__):
        first = load_model(model_copy, runtime="onnxruntime")
    assert_close_to_reference(vectors(*first), reference)
    assert any("exporting" in r.message and "once" in r.message for r in caplog.records)
    assert any(r.message.startswith("exported ") and r.message.endswith(" s") for r in caplog.records)
    folder, key = cache.export_folder(open_model(model_copy), "float32")
    graph = open_model(folder).path + "/model.onnx"
    with open(graph, "rb") as f:
        data = f.read()
    for damage in ("cut", "replaced"):
        if damage == "cut":
            with open(graph, "wb") as f:
                f.write(data[: len(data) // 2])
        else:  # the entry of another model (its key file says so), with this model's graph
            (hf_home / "elmo-transformers" / "onnx" / key / cache.KEY_FILE).write_text(
                '{"key": "another-model-float32", "fingerprint": "x"}', encoding="utf-8"
            )
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=cache.__name__):
            model, tokenizer = load_model(model_copy, runtime="onnxruntime")
        assert any("damaged" in r.message for r in caplog.records), damage
        assert_close_to_reference(vectors(model, tokenizer), reference)


def test_a_valid_entry_is_used_without_a_lock(model_copy, hf_home, monkeypatch):
    """A cache that already holds the export is read without taking the lock (a read-only HF_HOME works)."""
    load_model(model_copy, runtime="onnxruntime")

    def no_lock(*args, **kwargs):
        raise PermissionError(13, "Permission denied (read-only cache)")

    monkeypatch.setattr(filelock, "FileLock", no_lock)
    model, tokenizer = load_model(model_copy, runtime="onnxruntime")
    assert_close_to_reference(vectors(model, tokenizer), torch_vectors(model_copy))


def test_a_wait_for_another_export_is_announced_and_bounded(model_copy, hf_home, monkeypatch, caplog):
    monkeypatch.setattr(cache, "LOCK_WAIT_SECONDS", 0.2)
    folder, _ = cache.export_folder(open_model(model_copy), "float32")
    (hf_home / "elmo-transformers" / "onnx").mkdir(parents=True)
    other = filelock.FileLock(folder + ".lock")  # another process exporting the same model
    other.acquire()
    try:
        with caplog.at_level(logging.WARNING, logger=cache.__name__), pytest.raises(UserError) as error:
            load_model(model_copy, runtime="onnxruntime")
    finally:
        other.release()
    assert any("another process is exporting" in r.message for r in caplog.records)
    assert "another process has been exporting it" in str(error.value) and "\n" not in str(error.value)


def test_a_cache_that_cannot_be_written_is_one_line_naming_it(model_copy, tmp_path, monkeypatch):
    from huggingface_hub import constants

    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "file" / "hf"))
    with pytest.raises(UserError, match=r"the ONNX export cache .* cannot be written: .*HF_HOME") as error:
        load_model(model_copy, runtime="onnxruntime")
    assert "\n" not in str(error.value)


def test_killed_exports_of_other_models_are_removed(model_copy, hf_home):
    """A staging folder of a killed export (no process holds its lock) goes at the next export, whatever model it
    was for; one whose lock is held stays."""
    root = hf_home / "elmo-transformers" / "onnx"
    killed, running = root / ".oldmodel-float32.convert-1-aa", root / ".other-float32.convert-2-bb"
    for staging in (killed, running):
        staging.mkdir(parents=True)
        (staging / "model.onnx").write_bytes(b"partial")
        (root / f"{staging.name}.lock").write_text("")  # its lock file, as a killed run leaves it, held by none
    held = filelock.FileLock(f"{running}.lock")
    held.acquire()
    try:
        load_model(model_copy, runtime="onnxruntime")
    finally:
        held.release()
    assert not killed.exists() and running.exists()


def test_a_file_where_an_entry_belongs_is_named_and_kept(model_copy, hf_home):
    """It said "choose another output folder", where there is no folder to choose: the path is the cache's."""
    folder, _ = cache.export_folder(open_model(model_copy), "float32")
    (hf_home / "elmo-transformers" / "onnx").mkdir(parents=True)
    with open(folder, "w") as f:
        f.write("not the cache's")
    with pytest.raises(UserError) as error:
        load_model(model_copy, runtime="onnxruntime")
    assert str(error.value) == (
        f"{folder}: a file stands where the export cache keeps this model's export (a "
        "folder), and the cache never removes what it did not make: remove it, then run again"
    )
    with open(folder) as f:
        assert f.read() == "not the cache's"


def test_an_int8_graph_in_a_float32_entry_is_exported_again(model_copy, hf_home, caplog):
    """An int8 graph put in the float32 entry, its key file recomputed to match, ran as int8 without a word: the
    entry is checked against its graph's own dtype (its metadata)."""
    load_model(model_copy, runtime="onnxruntime", dtype="int8")
    load_model(model_copy, runtime="onnxruntime")
    source = open_model(model_copy)
    (int8_folder, _), (folder, key) = cache.export_folder(source, "int8"), cache.export_folder(source, "float32")
    shutil.copyfile(f"{int8_folder}/model.onnx", f"{folder}/model.onnx")
    record = {"key": key, "fingerprint": open_model(folder).fingerprint("float32")}
    with open(f"{folder}/{cache.KEY_FILE}", "w") as f:
        json.dump(record, f)
    assert cache.checked_entry(folder, key, "float32") == "its graph's dtype is int8, the entry's float32"
    with caplog.at_level(logging.WARNING, logger=cache.__name__):
        model, tokenizer = load_model(model_copy, runtime="onnxruntime")
    assert model.traits.dtype == "float32"
    assert any(f"{folder} is damaged (its graph's dtype is int8" in r.message for r in caplog.records)
    assert_close_to_reference(vectors(model, tokenizer), torch_vectors(model_copy))
