"""What a model folder names is read only inside it, and only as weights: an index entry outside the folder (`..`,
an absolute path, a link out of it) or a file that is not a regular one (a device, a pipe) is refused in one line
naming the entry, before anything is read or hashed; weights saved in a non-float dtype, NaN weights, a pickle that
holds more than tensors and weights of other shapes than the config's are each one line naming what is wrong. The
converter refuses an AllenNLP weight file whose datasets are not floats."""

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch
from conftest import FIXTURES, command_env, one_line, run
from modeling_elmo import ElmoModel
from safetensors.torch import load_file, save_file

from elmo_transformers.errors import ConversionError, ModelError
from elmo_transformers.model_folder import open_model
from elmo_transformers.model_source import load_model

WEIGHT = "bilm.layers.0.input_weight"  # a weight of the tiny converted model


def copy_model(tiny_model_dir, folder):
    """A copy of the tiny converted model at `folder` (its code modules as the links they are)."""
    return shutil.copytree(tiny_model_dir, folder, symlinks=True)


def indexed_model(tiny_model_dir, tmp_path, entry):
    """A copy of the tiny model whose model.safetensors.index.json names `entry` for every weight, and its weights
    (whole, valid) at tmp_path / "outside.safetensors", outside the folder."""
    folder = copy_model(tiny_model_dir, tmp_path / "model")
    weights = folder / "model.safetensors"
    shutil.move(weights, tmp_path / "outside.safetensors")
    index = {"metadata": {}, "weight_map": {name: entry for name in load_file(tmp_path / "outside.safetensors")}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


@pytest.mark.parametrize("entry", ["../outside.safetensors", "/etc/passwd", "shards/../../outside.safetensors"])
def test_an_index_entry_outside_the_folder_is_refused_before_it_is_read(tiny_model_dir, tmp_path, entry, capsys):
    folder = indexed_model(tiny_model_dir, tmp_path, entry)
    for step in (
        lambda: load_model(folder),  # the inference core
        lambda: load_model(folder, ElmoModel),  # transformers' from_pretrained
        lambda: open_model(folder).fingerprint("float32"),
    ):  # the export cache's and --resume's key
        with pytest.raises(ModelError) as refused:
            step()
        assert f"names the weight file {entry!r}, which is not a file of the folder" in str(refused.value)
        assert "\n" not in str(refused.value)
    text = tmp_path / "in.txt"
    text.write_text("the cat sat .\n")
    code, err = run(["embed", text, tmp_path / "out.hdf5", "--top", "--model", folder], capsys)
    one_line(code, err, "model.safetensors.index.json", entry, "move the file into the folder")
    assert not (tmp_path / "out.hdf5").exists()


def test_an_index_entry_naming_a_device_fails_at_once_instead_of_reading_for_ever(tiny_model_dir, tmp_path):
    """/dev/zero never ends: reading (or hashing) it hung `embed`. A fresh process, so that a hang is a timeout."""
    folder = indexed_model(tiny_model_dir, tmp_path, "/dev/zero")
    (tmp_path / "in.txt").write_text("the cat sat .\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "elmo_transformers",
            "embed",
            str(tmp_path / "in.txt"),
            str(tmp_path / "out.hdf5"),
            "--top",
            "--model",
            str(folder),
        ],
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and "'/dev/zero'" in done.stderr


def test_links_and_special_files_in_the_folder(tiny_model_dir, tmp_path):
    """A weight file that is a link out of the folder, or a pipe (whose reading waits for ever), is refused; a link
    inside the folder, and a Hub cache snapshot's links into its repo's blobs/, are the folder's files."""
    reference = load_model(tiny_model_dir)[0].state_dict()[WEIGHT]

    linked_out = copy_model(tiny_model_dir, tmp_path / "linked-out")
    shutil.move(linked_out / "model.safetensors", tmp_path / "elsewhere.safetensors")
    os.symlink(tmp_path / "elsewhere.safetensors", linked_out / "model.safetensors")
    with pytest.raises(
        ModelError,
        match="its weight file model.safetensors, a link to .*elsewhere.safetensors, "
        "outside the folder: replace the link by a copy of the file",
    ):
        open_model(linked_out).weight_files()

    pipe = copy_model(tiny_model_dir, tmp_path / "pipe")
    os.remove(pipe / "model.safetensors")
    os.mkfifo(pipe / "model.safetensors")
    with pytest.raises(ModelError, match="its weight file model.safetensors, which is not a regular file"):
        load_model(pipe)

    linked_in = copy_model(tiny_model_dir, tmp_path / "linked-in")
    (linked_in / "weights").mkdir()
    shutil.move(linked_in / "model.safetensors", linked_in / "weights" / "real.safetensors")
    os.symlink("weights/real.safetensors", linked_in / "model.safetensors")
    torch.testing.assert_close(load_model(linked_in)[0].state_dict()[WEIGHT], reference, rtol=0, atol=0)

    repo = tmp_path / "hub" / "models--me--elmo"  # huggingface_hub's cache layout
    snapshot, blobs = repo / "snapshots" / "0123abc", repo / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for name in os.listdir(tiny_model_dir):
        if not os.path.islink(os.path.join(tiny_model_dir, name)):
            shutil.copy(os.path.join(tiny_model_dir, name), blobs / f"blob-{name}")
            os.symlink(f"../../blobs/blob-{name}", snapshot / name)
    torch.testing.assert_close(load_model(snapshot)[0].state_dict()[WEIGHT], reference, rtol=0, atol=0)


def saved_weights(tiny_model_dir, folder, edit):
    """A copy of the tiny model at `folder` whose model.safetensors holds `edit(weights)`."""
    folder = copy_model(tiny_model_dir, folder)
    save_file(edit(load_file(folder / "model.safetensors")), folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_weights_of_a_non_float_dtype_are_refused_by_name(tiny_model_dir, tmp_path):
    """int32 weights were cast to floats silently, and the vectors were off by up to 5.6: as safetensors or as
    PyTorch's pickle, through the inference core or transformers' from_pretrained."""
    folder = saved_weights(
        tiny_model_dir, tmp_path / "int32", lambda w: {**w, WEIGHT: (w[WEIGHT] * 100).to(torch.int32)}
    )
    pickled = copy_model(tiny_model_dir, tmp_path / "int32-pickle")
    torch.save(load_file(folder / "model.safetensors"), pickled / "pytorch_model.bin")
    os.remove(pickled / "model.safetensors")
    for model_class in (None, ElmoModel):
        for path, file in ((folder, "model.safetensors"), (pickled, "pytorch_model.bin")):
            with pytest.raises(ModelError, match=f"its weight {WEIGHT} in {file} is saved as int32, not a float dtype"):
                load_model(path, model_class)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nan_weights_are_refused_by_name(tiny_model_dir, tmp_path, value):
    """NaN (or infinite) weights gave all-NaN vectors and no word (docs/troubleshooting.md)."""

    def edit(weights):
        weights[WEIGHT][0, 1, 2] = value
        return weights

    folder = saved_weights(tiny_model_dir, tmp_path / "nan", edit)
    for model_class in (None, ElmoModel):
        with pytest.raises(
            ModelError, match=f"its weight {WEIGHT}.* holds NaN or infinite values: the model would give NaN vectors"
        ):
            load_model(folder, model_class)


def test_a_pickle_only_folder(tiny_model_dir, tmp_path, capsys):
    """A folder whose weights are PyTorch's pickle (pytorch_model.bin, no safetensors) loads where the pickle holds
    tensors only, to the same numbers; one that holds anything else is one line (it was a 42-line traceback), and
    nothing in it runs."""
    reference = load_model(tiny_model_dir)[0].state_dict()[WEIGHT]
    plain = copy_model(tiny_model_dir, tmp_path / "plain")
    torch.save(load_file(plain / "model.safetensors"), plain / "pytorch_model.bin")
    os.remove(plain / "model.safetensors")
    torch.testing.assert_close(load_model(plain)[0].state_dict()[WEIGHT], reference, rtol=0, atol=0)

    hostile = copy_model(tiny_model_dir, tmp_path / "hostile")
    marker = tmp_path / "ran"
    torch.save({WEIGHT: Runs(str(marker))}, hostile / "pytorch_model.bin")
    os.remove(hostile / "model.safetensors")
    for model_class in (None, ElmoModel):
        with pytest.raises(
            ModelError, match="its weights are only in a PyTorch pickle .* convert the weights to model.safetensors"
        ):
            load_model(hostile, model_class)
    text = tmp_path / "in.txt"
    text.write_text("the cat sat .\n")
    code, err = run(["embed", text, tmp_path / "out.hdf5", "--top", "--model", hostile], capsys)
    one_line(code, err, "PyTorch pickle", "model.safetensors")
    assert not marker.exists()


class Runs:
    """A pickle that creates the file `path` when it is loaded without `weights_only`."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_weights_of_other_shapes_than_the_config_are_listed(tiny_model_dir, tmp_path):
    """The message said "the tensor shapes differ, as listed above" with nothing listed (the inference core)."""
    folder = copy_model(tiny_model_dir, tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    config["char_embedding_dim"] += 1
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError) as refused:
        load_model(folder)
    message = str(refused.value)
    saved = load_file(folder / "model.safetensors")["bilm.char_cnn.char_embedding.weight"].shape
    assert (
        f"bilm.char_cnn.char_embedding.weight is {list(saved)} in the weights, {[saved[0], saved[1] + 1]} by the config"
    ) in message, message
    assert "as listed above" not in message and "\n" not in message


def test_the_converter_refuses_datasets_not_stored_as_floats(tmp_path, capsys):
    """An int64 dataset was read as float32 silently."""
    tiny = FIXTURES / "allennlp-tiny"
    weights = tmp_path / "weights.hdf5"
    shutil.copy(tiny / "weights.hdf5", weights)
    with h5py.File(weights, "r+") as f:
        values = f["CNN_proj/W_proj"][...]
        del f["CNN_proj/W_proj"]
        f["CNN_proj/W_proj"] = np.round(values * 100).astype(np.int64)
    from elmo_transformers.conversion.allennlp import convert

    with pytest.raises(ConversionError, match=r"the datasets CNN_proj/W_proj \(int64\) are not stored as floats"):
        convert(tiny / "options.json", weights)
    code, err = run(
        ["convert", "allennlp", "--options", tiny / "options.json", "--weights", weights, "--output", tmp_path / "out"],
        capsys,
    )
    one_line(code, err, "CNN_proj/W_proj (int64)")
    assert not (tmp_path / "out").exists()
