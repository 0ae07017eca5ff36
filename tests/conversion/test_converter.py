"""The converter's command line: success, and a clear error with no output folder for every broken input."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
from conftest import FIXTURES, cli_in_process, command_env, run_command

from elmo_transformers.output_paths import hold_lock


TINY = FIXTURES / "allennlp-tiny"


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_converter(options, weights, output, *extra, preexec_fn=None):
    """The converter's command line, run in this process by `cli.main`; in a fresh process where `preexec_fn` (the
    resource limits of the process that runs the command) is given."""
    argv = [
        "convert",
        "allennlp",
        "--options",
        str(options),
        "--weights",
        str(weights),
        "--output",
        str(output),
        *extra,
    ]
    if preexec_fn:
        done = run_command(*argv, capture_output=True, text=True, timeout=300, preexec_fn=preexec_fn)
        return Result(done.returncode, done.stdout, done.stderr)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code, _ = cli_in_process(argv)
    return Result(code, out.getvalue(), err.getvalue())


def assert_fails_cleanly(result, output, *fragments):
    assert result.returncode != 0, result.stdout
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert not output.exists() or output.is_symlink() or output.is_file()
    assert not [p for p in output.parent.iterdir() if ".convert-" in p.name], "staging folder left behind"


def copy_weights(tmp_path, edit):
    path = tmp_path / "weights.hdf5"
    shutil.copy(TINY / "weights.hdf5", path)
    with h5py.File(path, "r+") as f:
        edit(f)
    return path


@pytest.mark.slow
def test_cli_writes_a_complete_folder(tmp_path):
    result = run_converter(TINY / "options.json", TINY / "weights.hdf5", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    names = set(os.listdir(tmp_path / "out"))
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
        "configuration_elmo.py",
        "modeling_elmo.py",
        "tokenization_elmo.py",
    } <= names
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["auto_map"]["AutoModel"] == "modeling_elmo.ElmoModel" and config["model_type"] == "elmo"
    tokenizer_config = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert tokenizer_config["auto_map"]["AutoTokenizer"][0] == "tokenization_elmo.ElmoTokenizer"
    # An existing folder is never silently replaced.
    again = run_converter(TINY / "options.json", TINY / "weights.hdf5", tmp_path / "out")
    assert again.returncode != 0 and "--overwrite" in again.stderr


@pytest.mark.slow
def test_wrong_shape_is_named(tmp_path):
    def edit(f):
        del f["CNN_proj/W_proj"]
        f["CNN_proj/W_proj"] = np.zeros((28, 9), np.float32)

    result = run_converter(TINY / "options.json", copy_weights(tmp_path, edit), tmp_path / "out")
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
    assert_fails_cleanly(
        result,
        tmp_path / "out",
        "W_0 has shape (16, 64), expected (16, 128)",
        "unexpected dataset RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B",
    )


def test_the_ways_weights_differ_from_the_options_are_separated(tmp_path):
    """They ran together on the command's one line ("...expected (4,) from the options dataset CNN/W_cnn_1...")."""
    from elmo_transformers.conversion.allennlp import convert
    from elmo_transformers.errors import ConversionError

    options = json.loads((TINY / "options.json").read_text())
    options["char_cnn"]["filters"][0][1] += 1  # one more filter of the first width: its kernel and bias differ
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(ConversionError) as raised:
        convert(str(path), str(TINY / "weights.hdf5"))
    width, count = options["char_cnn"]["filters"][0]
    dim = options["char_cnn"]["embedding"]["dim"]
    message = str(raised.value)
    assert message.startswith(
        f"{TINY / 'weights.hdf5'} does not match the options: dataset CNN/W_cnn_0 has shape "
        f"(1, {width}, {dim}, {count - 1}), expected (1, {width}, {dim}, {count}) from the "
        f"options; dataset CNN/b_cnn_0 has shape ({count - 1},), expected ({count},) from the "
        "options; "
    )
    assert "\n" not in message


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
    from elmo_transformers.conversion.allennlp import convert

    options = json.loads((TINY / "options.json").read_text())
    options["char_cnn"]["n_characters"] = 261
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    a, _ = convert(path, TINY / "weights.hdf5")
    b, _ = convert(TINY / "options.json", TINY / "weights.hdf5")
    assert a.config.n_characters == 261 and b.config.n_characters == 262
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert np.array_equal(pa.numpy(), pb.numpy()), name


# -- the output folder: nothing the converter did not write is ever replaced or deleted (conversion/output.py) --


def snapshot(folder):
    """Every file under `folder` with its bytes, to show that nothing was touched."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_conversion_writes_only_the_files_overwrite_may_replace(tmp_path):
    from elmo_transformers.model_files import is_model_file

    assert run_converter(TINY / "options.json", TINY / "weights.hdf5", tmp_path / "out").returncode == 0
    assert all(is_model_file(name) for name in os.listdir(tmp_path / "out"))


def test_overwrite_replaces_an_earlier_conversion(tmp_path):
    out = tmp_path / "out"
    assert run_converter(TINY / "options.json", TINY / "weights.hdf5", out).returncode == 0
    (out / "model.safetensors").write_bytes(b"stale")
    result = run_converter(TINY / "options.json", TINY / "weights.hdf5", out, "--overwrite")
    assert result.returncode == 0, result.stderr
    assert (out / "model.safetensors").read_bytes() != b"stale"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_overwrite_refuses_the_folder_holding_the_original_weights(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(TINY / "options.json", source)
    shutil.copy(TINY / "weights.hdf5", source)
    before = snapshot(source)
    result = run_converter(source / "options.json", source / "weights.hdf5", source, "--overwrite")
    assert result.returncode != 0 and "contains the input" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source"]


@pytest.mark.parametrize("extra", ["notes.txt", "sub/file.txt"])
def test_overwrite_refuses_a_conversion_folder_holding_other_files(tmp_path, extra):
    out = tmp_path / "out"
    assert run_converter(TINY / "options.json", TINY / "weights.hdf5", out).returncode == 0
    (out / extra).parent.mkdir(exist_ok=True)
    (out / extra).write_text("mine")
    before = snapshot(out)
    result = run_converter(TINY / "options.json", TINY / "weights.hdf5", out, "--overwrite")
    assert result.returncode != 0 and "does not hold an earlier conversion" in result.stderr, result.stderr
    assert snapshot(out) == before


def test_overwrite_refuses_a_folder_whose_config_is_not_elmo(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"model_type": "bert"}))
    before = snapshot(out)
    result = run_converter(TINY / "options.json", TINY / "weights.hdf5", out, "--overwrite")
    assert result.returncode != 0 and "does not hold an earlier conversion" in result.stderr
    assert snapshot(out) == before


def test_hdf5_with_zeroed_metadata_is_reported(tmp_path):
    data = bytearray((TINY / "weights.hdf5").read_bytes())
    data[64:128] = bytes(64)  # object headers: h5py opens the file, then fails to walk it
    weights = tmp_path / "weights.hdf5"
    weights.write_bytes(bytes(data))
    result = run_converter(TINY / "options.json", weights, tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "weights.hdf5", "corrupt")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda o: o["char_cnn"].update(filters=5), "filters"),
        (lambda o: o["char_cnn"].update(filters=[[1, "4"]]), "filters"),
        (lambda o: o["lstm"].update(use_skip_connections="false"), "use_skip_connections"),
        (lambda o: o["lstm"].update(cell_clip=float("nan")), "cell_clip"),
        (lambda o: o["lstm"].update(proj_clip=float("inf")), "proj_clip"),
        (lambda o: o["lstm"].update(dim="16"), "lstm_dim"),
        (lambda o: o.update(lstm=[]), "layout"),
    ],
)
def test_options_of_the_wrong_type_are_refused(tmp_path, change, fragment):
    options = json.loads((TINY / "options.json").read_text())
    change(options)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))  # NaN and Infinity as Python's json writes them
    result = run_converter(path, TINY / "weights.hdf5", tmp_path / "out")
    assert_fails_cleanly(result, tmp_path / "out", "invalid options", fragment)
    assert len(result.stderr.strip().splitlines()) == 1


def make_output_problem(tmp_path, kind):
    """An --output path that cannot be a new folder; returns (path, what must stay untouched)."""
    if kind == "file":
        path = tmp_path / "out"
        path.write_text("mine")
        return path, path
    if kind in ("symlink to a folder", "symlink to a conversion"):
        target = tmp_path / "target"
        if kind == "symlink to a conversion":
            assert run_converter(TINY / "options.json", TINY / "weights.hdf5", target).returncode == 0
        else:
            target.mkdir()
            (target / "keep.txt").write_text("mine")
        path = tmp_path / "out"
        path.symlink_to(target, target_is_directory=True)
        return path, target
    if kind == "under a file":
        (tmp_path / "afile").write_text("mine")
        return tmp_path / "afile" / "out", tmp_path / "afile"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["file", "symlink to a folder", "symlink to a conversion", "under a file"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_output_paths_that_cannot_be_written_are_named(tmp_path, kind, overwrite):
    path, keep = make_output_problem(tmp_path, kind)
    before = snapshot(keep) if keep.is_dir() else keep.read_bytes()
    result = run_converter(TINY / "options.json", TINY / "weights.hdf5", path, *(["--overwrite"] if overwrite else []))
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert str(path) in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert (snapshot(keep) if keep.is_dir() else keep.read_bytes()) == before
    assert path.is_symlink() == kind.startswith("symlink")
    assert not [p for p in tmp_path.iterdir() if ".convert-" in p.name]


def test_unwritable_parent_is_named(tmp_path, monkeypatch):
    parent = tmp_path / "readonly"
    parent.mkdir()
    parent.chmod(0o555)
    real_mkdir = os.mkdir

    def refuse(path, *args, **kwargs):  # root ignores the mode bits: refuse as the kernel would for a user
        if str(path).startswith(str(parent)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", refuse)
    try:
        result = run_converter(TINY / "options.json", TINY / "weights.hdf5", parent / "out")
    finally:
        parent.chmod(0o755)
    assert_fails_cleanly(result, parent / "out", "cannot write", "Permission denied")
    assert list(parent.iterdir()) == []


def limit_file_size():
    """In the child: files may not grow past 20 kB (a write fails as on a full disk; the tiny model's weights are
    larger)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write instead of death by signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


@pytest.mark.slow
def test_failed_write_is_named_and_leaves_nothing(tmp_path):
    result = run_converter(TINY / "options.json", TINY / "weights.hdf5", tmp_path / "out", preexec_fn=limit_file_size)
    assert_fails_cleanly(result, tmp_path / "out", "cannot write", "file-size limit")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.slow
def test_failed_write_keeps_the_earlier_conversion(tmp_path):
    out = tmp_path / "out"
    assert run_converter(TINY / "options.json", TINY / "weights.hdf5", out).returncode == 0
    before = snapshot(out)
    result = run_converter(TINY / "options.json", TINY / "weights.hdf5", out, "--overwrite", preexec_fn=limit_file_size)
    assert result.returncode != 0 and "file-size limit" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


KILLED_CHILD = """
import runpy, sys, time
import modeling_elmo
save = modeling_elmo.ElmoModel.save_pretrained

def save_then_hang(self, folder, **kwargs):
    save(self, folder, **kwargs)
    print("staged", flush=True)
    time.sleep(600)

modeling_elmo.ElmoModel.save_pretrained = save_then_hang
sys.argv = sys.argv[1:]
runpy.run_module("elmo_transformers", run_name="__main__")
"""


@pytest.mark.slow
def test_staging_of_a_killed_run_is_removed_by_the_next_run(tmp_path):
    out = tmp_path / "out"
    child = tmp_path / "child.py"
    child.write_text(KILLED_CHILD)
    argv = [
        "elmo-transformers",
        "convert",
        "allennlp",
        "--options",
        str(TINY / "options.json"),
        "--weights",
        str(TINY / "weights.hdf5"),
        "--output",
        str(out),
    ]
    process = subprocess.Popen(
        [sys.executable, str(child), *argv], stdout=subprocess.PIPE, text=True, env=command_env()
    )
    try:
        assert process.stdout.readline().strip() == "staged"
    finally:
        process.kill()  # SIGKILL: no clean-up code runs
        process.wait()
    left = [p for p in tmp_path.iterdir() if ".convert-" in p.name]
    assert left, "the killed run had a staging folder"
    # Someone else's look-alike folder and the staging of a run still in progress (this test's pid) stay.
    (tmp_path / ".out.convert-user").mkdir()
    (tmp_path / ".out.convert-user" / "keep.txt").write_text("mine")
    live = tmp_path / ".out.convert-live"
    live.mkdir()
    lock = hold_lock(f"{live}.lock")  # held by this process, which runs on
    try:
        result = run_converter(TINY / "options.json", TINY / "weights.hdf5", out)
    finally:
        lock.release()
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".out.convert-live", ".out.convert-live.lock", ".out.convert-user", "child.py", "out"]
    )
    assert (tmp_path / ".out.convert-user" / "keep.txt").read_text() == "mine"
