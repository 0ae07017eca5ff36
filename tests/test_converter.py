"""The converter's command line: success, and a clear error with no output folder for every broken input."""

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
from conftest import FIXTURES, REPO

from configuration_elmo import ElmoConfig

TINY = FIXTURES / "allennlp-tiny"
SCRIPT = REPO / "scripts" / "convert_allennlp_elmo.py"


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_converter(options, weights, output, *extra, in_process=True):
    """The converter's command line; in-process by default (the same main()), as a real subprocess on request."""
    argv = ["--options", str(options), "--weights", str(weights), "--output", str(output), *extra]
    if in_process:
        import contextlib
        import io

        from convert_allennlp_elmo import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        return Result(code, out.getvalue(), err.getvalue())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "scripts")]), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, env=env, timeout=300)
    return Result(done.returncode, done.stdout, done.stderr)


def assert_fails_cleanly(result, output, *fragments):
    assert result.returncode != 0, result.stdout
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert not output.exists()
    assert not [p for p in output.parent.iterdir() if p.name.startswith(".convert-")], "staging folder left behind"


def copy_weights(tmp_path, edit):
    path = tmp_path / "weights.hdf5"
    shutil.copy(TINY / "weights.hdf5", path)
    with h5py.File(path, "r+") as f:
        edit(f)
    return path


def test_cli_writes_a_complete_folder(tmp_path):
    result = run_converter(TINY / "options.json", TINY / "weights.hdf5", tmp_path / "out", in_process=False)
    assert result.returncode == 0, result.stderr
    names = set(os.listdir(tmp_path / "out"))
    assert {"config.json", "model.safetensors", "tokenizer_config.json", "configuration_elmo.py", "modeling_elmo.py",
            "tokenization_elmo.py"} <= names
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["auto_map"]["AutoModel"] == "modeling_elmo.ElmoModel" and config["model_type"] == "elmo"
    tokenizer_config = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert tokenizer_config["auto_map"]["AutoTokenizer"][0] == "tokenization_elmo.ElmoTokenizer"
    # An existing folder is never silently replaced.
    again = run_converter(TINY / "options.json", TINY / "weights.hdf5", tmp_path / "out")
    assert again.returncode != 0 and "--overwrite" in again.stderr


def test_wrong_shape_is_named(tmp_path):
    def edit(f):
        del f["CNN_proj/W_proj"]
        f["CNN_proj/W_proj"] = np.zeros((28, 9), np.float32)

    result = run_converter(TINY / "options.json", copy_weights(tmp_path, edit), tmp_path / "out", in_process=False)
    assert_fails_cleanly(result, tmp_path / "out", "CNN_proj/W_proj", "(28, 9)", "(28, 8)")


def test_missing_dataset_is_named(tmp_path):
    weights = copy_weights(tmp_path, lambda f: f.__delitem__("RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"))
    result = run_converter(TINY / "options.json", weights, tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "missing dataset RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0")


def test_unexpected_dataset_is_named(tmp_path):
    weights = copy_weights(tmp_path, lambda f: f.create_dataset("softmax/W", data=np.zeros((3, 8), np.float32)))
    result = run_converter(TINY / "options.json", weights, tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "unexpected dataset softmax/W")


@pytest.mark.parametrize("keep_fraction", [0.5, 0.02])
def test_truncated_file_is_reported(tmp_path, keep_fraction):
    data = (TINY / "weights.hdf5").read_bytes()
    weights = tmp_path / "weights.hdf5"
    weights.write_bytes(data[: int(len(data) * keep_fraction)])
    result = run_converter(TINY / "options.json", weights, tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "weights.hdf5")
    assert "corrupt" in result.stderr or "truncated" in result.stderr


def test_corrupt_values_are_reported(tmp_path):
    def edit(f):
        f["CNN/b_cnn_1"][3] = np.nan

    result = run_converter(TINY / "options.json", copy_weights(tmp_path, edit), tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "CNN/b_cnn_1", "NaN")


def test_options_that_do_not_match_weights(tmp_path):
    options = json.loads((TINY / "options.json").read_text())
    options["lstm"]["n_layers"] = 1
    options["lstm"]["dim"] = 32
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    result = run_converter(path, TINY / "weights.hdf5", tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "W_0 has shape (16, 64), expected (16, 128)",
                         "unexpected dataset RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B")


@pytest.mark.parametrize(
    "change, fragment",
    [(lambda o: o["lstm"].pop("dim"), "'dim'"), (lambda o: o["char_cnn"].update(activation="gelu"), "activation")],
)
def test_invalid_options_are_named(tmp_path, change, fragment):
    options = json.loads((TINY / "options.json").read_text())
    change(options)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    result = run_converter(path, TINY / "weights.hdf5", tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "invalid options", fragment)


def test_missing_files_are_named(tmp_path):
    result = run_converter(tmp_path / "nope.json", TINY / "weights.hdf5", tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "nope.json")
    result = run_converter(TINY / "options.json", tmp_path / "nope.hdf5", tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "nope.hdf5")


def test_n_characters_261_and_262_give_the_same_model(tmp_path):
    from convert_allennlp_elmo import convert

    options = json.loads((TINY / "options.json").read_text())
    options["char_cnn"]["n_characters"] = 261
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    a, _ = convert(path, TINY / "weights.hdf5")
    b, _ = convert(TINY / "options.json", TINY / "weights.hdf5")
    assert a.config.n_characters == 261 and b.config.n_characters == 262
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert np.array_equal(pa.numpy(), pb.numpy()), name


def test_round_trip_through_options(tmp_path):
    config = ElmoConfig.from_allennlp_options(TINY / "options.json")
    assert ElmoConfig.from_allennlp_options(config.to_allennlp_options()).to_dict() == config.to_dict()
