"""The end of an `embed` run and its OUTPUT.partial/ folder: a run puts OUTPUT in place only when it is whole and
what this run computed; it never follows a symbolic link it did not make; an interruption at any step of the end
leaves what the next command (`--resume`) finishes, and says where things are; the errors met on the way are one
line naming the path and what to do."""

import contextlib
import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import command_env, interrupt_after, one_line_error

from elmo_transformers.cli import Interrupted
from elmo_transformers.cli import main as cli_main
from elmo_transformers.cli.embed import main
from elmo_transformers import output_paths
from elmo_transformers.embedding.partial_run import FINISHED, PartialRun

LINES = [" ".join(["w"] * n) for n in range(1, 13)]  # 12 lines: 6 batches of 2
FORMATS = ["hdf5", "parquet"]


def output_name(file_format):
    return "out" if file_format == "parquet" else "out.hdf5"


def args_of(tmp_path, model_dir, file_format="hdf5", output=None, lines=LINES, name="input.txt"):
    source = tmp_path / name
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    output = output or tmp_path / output_name(file_format)
    return [
        str(source),
        str(output),
        "--model",
        str(model_dir),
        "--top",
        "--batch-size",
        "2",
        "--quiet",
        "--format",
        file_format,
    ]


def vectors(path):
    """{line: vectors} of an output, either format."""
    if os.path.isdir(path):
        table = pq.read_table(path, columns=["line", "vectors"]).to_pydict()
        return {line: np.array(v, np.float32).reshape(-1, 16) for line, v in zip(table["line"], table["vectors"])}
    with h5py.File(path, "r") as f:
        return {int(key): f[key][...] for key in f if key != "sentence_to_index"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_model_dir):
    """{file format: the vectors of an uninterrupted run}."""
    folder = tmp_path_factory.mktemp("reference")
    found = {}
    for file_format in FORMATS:
        assert main(args_of(folder, tiny_model_dir, file_format)) == 0
        found[file_format] = vectors(folder / output_name(file_format))
    assert sorted(found["hdf5"]) == list(range(len(LINES)))
    return found


def assert_finished(output, expected):
    """OUTPUT is the whole output of the run, and nothing of the run is left beside it."""
    got = vectors(output)
    assert sorted(got) == sorted(expected)
    for line, array in expected.items():
        np.testing.assert_array_equal(got[line], array)
    assert not os.path.lexists(f"{output}.partial") and not os.path.lexists(f"{output}.partial.lock")


def at_batch(monkeypatch, number, action):
    """Call `action(run)` (the PartialRun) before the run stores its batch `number` (from 1)."""
    real, calls = PartialRun.add_batch, []

    def add_batch(self, arrays, words):
        calls.append(arrays)
        if len(calls) == number:
            action(self)
        return real(self, arrays, words)

    monkeypatch.setattr(PartialRun, "add_batch", add_batch)


# 1. A run says it finished only when its output is there, whole, and this run's.


def test_an_hdf5_output_removed_while_the_run_works_is_not_reported_written(
    tmp_path, tiny_model_dir, monkeypatch, reference
):
    args = args_of(tmp_path, tiny_model_dir)
    at_batch(monkeypatch, 3, lambda run: os.remove(run.writer.file))
    message = one_line_error(args)
    monkeypatch.undo()
    assert "out.hdf5.partial/output.hdf5 is gone" in message and "delete " in message, message
    assert not (tmp_path / "out.hdf5").exists()
    shutil.rmtree(tmp_path / "out.hdf5.partial")  # what the message says to do
    assert main(args) == 0
    assert_finished(tmp_path / "out.hdf5", reference["hdf5"])


@pytest.mark.parametrize("how", ["moved", "copied"])
def test_an_hdf5_output_replaced_by_another_runs_file_is_not_put_in_place(tmp_path, tiny_model_dir, monkeypatch, how):
    other = tmp_path / "other.hdf5"
    assert main(args_of(tmp_path, tiny_model_dir, output=other, lines=LINES[:3], name="short.txt")) == 0

    def replace(run):
        if how == "moved":
            shutil.copyfile(other, tmp_path / "copy.hdf5")
            os.replace(tmp_path / "copy.hdf5", run.writer.file)
        else:
            shutil.copyfile(other, run.writer.file)

    at_batch(monkeypatch, 3, replace)
    message = one_line_error(args_of(tmp_path, tiny_model_dir))
    assert "out.hdf5 is not written: its " in message and "delete " in message, message
    assert "output.hdf5 was replaced or rewritten by another file" in message, message
    assert not (tmp_path / "out.hdf5").exists()


def test_a_parquet_file_removed_while_the_run_works_is_computed_again_on_resume(
    tmp_path, tiny_model_dir, monkeypatch, reference
):
    args = args_of(tmp_path, tiny_model_dir, "parquet")
    at_batch(monkeypatch, 3, lambda run: os.remove(sorted((tmp_path / "out.partial" / "data").iterdir())[0]))
    message = one_line_error(args)
    monkeypatch.undo()
    assert "lacks the vectors of 2 lines" in message, message
    assert message.endswith("rerun with --resume to compute them"), message
    assert not (tmp_path / "out").exists()
    assert main([*args, "--resume"]) == 0
    assert_finished(tmp_path / "out", reference["parquet"])


def test_a_parquet_file_of_another_dtype_is_not_put_in_place(tmp_path, tiny_model_dir, monkeypatch):
    """A file swapped in from a float16 run of the same text: the same lines and words, vectors of another type."""
    other = tmp_path / "half"
    assert main([*args_of(tmp_path, tiny_model_dir, "parquet", output=other), "--output-dtype", "float16"]) == 0
    first = sorted(other.iterdir())[0]
    at_batch(monkeypatch, 3, lambda run: shutil.copyfile(first, os.path.join(run.writer.data, first.name)))
    message = one_line_error(args_of(tmp_path, tiny_model_dir, "parquet"))
    assert f"its {first.name} holds vectors of another type" in message and "float16" in message, message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("file_format", FORMATS)
def test_a_run_json_changed_while_the_run_works_stops_it_before_output(
    tmp_path, tiny_model_dir, monkeypatch, file_format
):
    def edit(run):
        path = os.path.join(run.folder, "run.json")
        saved = json.loads(open(path).read())
        open(path, "w").write(json.dumps({**saved, "mode": "all"}))

    at_batch(monkeypatch, 3, edit)
    message = one_line_error(args_of(tmp_path, tiny_model_dir, file_format))
    assert "its run.json no longer records this run (mode differs)" in message, message
    assert not (tmp_path / output_name(file_format)).exists()


@pytest.mark.parametrize("file_format", FORMATS)
@pytest.mark.parametrize("change", ["edited", "appended"])
def test_an_input_changed_while_the_run_reads_it_stops_it_before_output(
    tmp_path, tiny_model_dir, monkeypatch, file_format, change
):
    """A file is read again as its batches are embedded and to check the output: one changed meanwhile (a word
    edited, a line appended) is another text than the one the batches were planned for and run.json records."""
    args = args_of(tmp_path, tiny_model_dir, file_format)

    def edit(run):
        text = LINES[:-1] + ["v " * 12] if change == "edited" else [*LINES, "w w"]
        (tmp_path / "input.txt").write_text("".join(line + "\n" for line in text))

    at_batch(monkeypatch, 2, edit)
    message = one_line_error(args)
    assert f"error: {tmp_path / 'input.txt'} changed while the run read it" in message, message
    folder = tmp_path / f"{output_name(file_format)}.partial"
    assert message.endswith(f"delete {folder} and run again"), message
    assert not (tmp_path / output_name(file_format)).exists()
    shutil.rmtree(folder, ignore_errors=True)  # what the message says to do
    assert main(args) == 0


# 2. A run never follows a symbolic link it did not make.


@pytest.mark.parametrize("file_format", FORMATS)
@pytest.mark.parametrize("target", ["folder", "dangling"])
def test_a_symlinked_partial_folder_is_refused_and_never_written_through(tmp_path, tiny_model_dir, file_format, target):
    elsewhere = tmp_path / "elsewhere"
    if target == "folder":
        elsewhere.mkdir()
    link = tmp_path / f"{output_name(file_format)}.partial"
    link.symlink_to(elsewhere)
    args = args_of(tmp_path, tiny_model_dir, file_format)
    for flags in ([], ["--resume"], ["--overwrite"]):
        message = one_line_error([*args, *flags])
        assert message == (
            f"error: {link} is a symbolic link, where a run keeps its own folder: remove the link "
            "(not what it points to) and rerun"
        ), message
    assert link.is_symlink() and not (tmp_path / output_name(file_format)).exists()
    assert (list(elsewhere.iterdir()) == []) if target == "folder" else not elsewhere.exists()


def test_a_symlinked_journal_is_refused_and_never_appended_to(tmp_path, tiny_model_dir, monkeypatch, reference):
    args = args_of(tmp_path, tiny_model_dir)
    interrupt_after(monkeypatch, "add_batch", 2)
    assert main(args) == 130
    monkeypatch.undo()
    journal, mine = tmp_path / "out.hdf5.partial" / "done-0.txt", tmp_path / "mine.txt"
    mine.write_text(journal.read_text())
    journal.unlink()
    journal.symlink_to(mine)
    message = one_line_error([*args, "--resume"])
    assert f"{journal} is a symbolic link, which a run never makes nor follows" in message, message
    assert mine.read_text().count("\n") == 2
    journal.unlink()
    shutil.copyfile(mine, journal)
    assert main([*args, "--resume"]) == 0
    assert_finished(tmp_path / "out.hdf5", reference["hdf5"])


# 3. An interruption at any step of the end: the next command (--resume) finishes OUTPUT, and the message says where
# things are. Each step: (format, os function, the end of the path it acts on, before or after the call, overwrite).

END_STEPS = [
    ("hdf5", "link", "output.hdf5", "after", False),
    ("hdf5", "unlink", "output.hdf5", "before", False),
    ("hdf5", "unlink", "run.json", "before", False),
    ("hdf5", "unlink", FINISHED, "before", False),
    ("hdf5", "unlink", FINISHED, "after", False),
    ("hdf5", "rmdir", ".partial", "before", False),
    ("hdf5", "rmdir", ".partial", "after", False),
    ("hdf5", "replace", "output.hdf5", "after", True),
    ("parquet", "rename", "data", "before", True),  # (the earlier output removed, data/ not yet in its place)
    ("parquet", "rename", "data", "after", False),
    ("parquet", "unlink", "run.json", "before", False),
    ("parquet", "unlink", FINISHED, "after", False),
    ("parquet", "rmdir", ".partial", "after", False),
]


def step_ids(step):
    return "-".join(str(part) for part in step[:4]) + ("-overwrite" if step[4] else "")


def end_args(tmp_path, tiny_model_dir, file_format, overwrite):
    args = args_of(tmp_path, tiny_model_dir, file_format)
    if overwrite:  # an earlier output at OUTPUT, which the run replaces
        assert main(args_of(tmp_path, tiny_model_dir, file_format, lines=LINES[:3], name="earlier.txt")) == 0
        args.append("--overwrite")
    return args


def stop_at(monkeypatch, name, suffix, when, stop):
    """Make os.<name> call `stop()` once, before or after (`when`) it acts on an existing path ending in `suffix`."""
    real, stopped = getattr(os, name), []

    def step(*args, **kwargs):
        if stopped or not (os.fspath(args[0]).endswith(suffix) and os.path.lexists(args[0])):
            return real(*args, **kwargs)
        stopped.append(args)
        result = real(*args, **kwargs) if when == "after" else None
        stop()
        return result if when == "after" else real(*args, **kwargs)

    monkeypatch.setattr(os, name, step)


@pytest.mark.parametrize("step", END_STEPS, ids=step_ids)
def test_an_interruption_at_each_step_of_the_end_is_finished_by_resume(
    tmp_path, tiny_model_dir, monkeypatch, reference, step, capsys
):
    file_format, name, suffix, when, overwrite = step
    args = end_args(tmp_path, tiny_model_dir, file_format, overwrite)
    capsys.readouterr()

    def interrupt():
        raise Interrupted(signal.SIGTERM)

    stop_at(monkeypatch, name, suffix, when, interrupt)
    assert main(args) == 143
    monkeypatch.undo()
    said = capsys.readouterr().err.strip().splitlines()[-1]
    output = tmp_path / output_name(file_format)
    if os.path.isdir(f"{output}.partial"):
        assert said.startswith("interrupted by SIGTERM after every line was finished: ") and said.endswith(
            "rerun with --resume to complete the run (it removes " + f"{output}.partial)"
        ), said
        assert (f"{output} is in place" in said) == (not PartialRun(str(output), file_format).writer.pending())
        assert main([*args, "--resume"]) == 0
    else:
        assert said == f"interrupted by SIGTERM after the run finished: {output} is complete", said
    assert_finished(output, reference[file_format])


def test_an_interruption_after_output_is_in_place_says_it_is_complete(
    tmp_path, tiny_model_dir, monkeypatch, reference, capsys
):
    """Stopped while it prints its closing line: nothing is left to do, and the message says so."""
    from elmo_transformers.cli import embed as embed_command

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(embed_command, "speed_line", interrupted)
    args = [arg for arg in args_of(tmp_path, tiny_model_dir) if arg != "--quiet"]
    assert main(args) == 130
    output = tmp_path / "out.hdf5"
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"interrupted by Ctrl+C (SIGINT) after the run finished: {output} is complete"
    )
    assert_finished(output, reference["hdf5"])


CHILD = """
import json, os, signal, sys
from elmo_transformers.cli import main
name, suffix, when, argv = json.loads(sys.argv[1])
real = getattr(os, name)
def step(*args, **kwargs):
    if os.fspath(args[0]).endswith(suffix) and os.path.lexists(args[0]):
        if when == "after":
            real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
setattr(os, name, step)
sys.exit(main(["embed", *argv]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("step", END_STEPS, ids=step_ids)
def test_a_kill_at_each_step_of_the_end_is_finished_by_resume(tmp_path, tiny_model_dir, reference, step):
    """kill -9 at each step: no handler runs, so what is on the disk must be enough for --resume."""
    file_format, name, suffix, when, overwrite = step
    args = end_args(tmp_path, tiny_model_dir, file_format, overwrite)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([name, suffix, when, args])],
        env=command_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    output = tmp_path / output_name(file_format)
    folder = tmp_path / f"{output.name}.partial"
    if not folder.exists() or not list(folder.iterdir()):  # killed after its last file went: OUTPUT is in place
        message = one_line_error([*args, "--resume"])
        assert message == (
            f"error: {output} exists and there is no run to resume in {folder} (a run stopped as it "
            "ended leaves its finished output so): to replace it, rerun with --overwrite"
        ), message
    else:
        assert main([*args, "--resume"]) == 0
    assert_finished(output, reference[file_format])


def test_an_empty_partial_folder_a_kill_left_is_removed_by_the_next_run(tmp_path, tiny_model_dir, reference):
    args = args_of(tmp_path, tiny_model_dir)
    (tmp_path / "out.hdf5.partial").mkdir()
    assert main(args) == 0
    assert_finished(tmp_path / "out.hdf5", reference["hdf5"])


# 4. A SIGTERM-ed command exits 128 + 15.


def test_a_sigterm_exits_143_and_ctrl_c_130(tmp_path, tiny_model_dir, monkeypatch):
    args = args_of(tmp_path, tiny_model_dir)
    for stop, code in [(Interrupted(signal.SIGTERM), 143), (KeyboardInterrupt(), 130)]:

        def stopped(self, arrays, words, stop=stop):
            raise stop

        monkeypatch.setattr(PartialRun, "add_batch", stopped)
        with contextlib.redirect_stderr(io.StringIO()):
            assert cli_main(["embed", *args]) == code


# 5. One line each, naming the path and what to do.


def test_a_trailing_slash_names_a_folder_not_an_hdf5_file(tmp_path, tiny_model_dir):
    args = args_of(tmp_path, tiny_model_dir, output=f"{tmp_path / 'newdir.hdf5'}/")
    message = one_line_error(args)
    assert "a path that ends in / names a folder, and HDF5 is one file" in message, message
    assert not os.path.lexists(tmp_path / "newdir.hdf5")


@pytest.mark.parametrize("kind", ["symlink", "folder"])
def test_a_lock_path_that_is_not_a_plain_file_is_one_line(tmp_path, tiny_model_dir, kind):
    lock = tmp_path / "out.hdf5.partial.lock"
    if kind == "symlink":
        lock.symlink_to(tmp_path / "elsewhere")
    else:
        lock.mkdir()
    message = one_line_error(args_of(tmp_path, tiny_model_dir))
    assert message.startswith(f"error: {lock} is ") and "rerun" in message, message
    assert "Errno" not in message and not (tmp_path / "elsewhere").exists()


def test_a_partial_that_is_a_file_is_one_line(tmp_path, tiny_model_dir):
    (tmp_path / "out.hdf5.partial").write_text("mine")
    message = one_line_error(args_of(tmp_path, tiny_model_dir))
    assert message == f"error: {tmp_path}/out.hdf5.partial is a file, not the folder of a run: move it away and rerun"
    assert (tmp_path / "out.hdf5.partial").read_text() == "mine"


def test_a_read_only_folder_for_parquet_is_one_line_before_any_work(tmp_path, tiny_model_dir, monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(output_paths.tempfile, "TemporaryFile", read_only)
    message = one_line_error(args_of(tmp_path, tiny_model_dir, "parquet"))
    assert message == (
        f"error: {tmp_path}/out: cannot write into {tmp_path}: Read-only file system (a read-only file system)"
    ), message


@pytest.mark.parametrize("file_format, removed", [("hdf5", ""), ("parquet", ""), ("parquet", "data")])
def test_a_partial_folder_removed_while_the_run_works_is_one_line(
    tmp_path, tiny_model_dir, monkeypatch, file_format, removed
):
    at_batch(monkeypatch, 3, lambda run: shutil.rmtree(os.path.join(run.folder, removed)))
    message = one_line_error(args_of(tmp_path, tiny_model_dir, file_format))
    gone = os.path.join(f"{tmp_path / output_name(file_format)}.partial", removed)
    assert message.startswith(f"error: {gone.rstrip('/')} was removed while the run worked"), message
    assert "Errno" not in message and not (tmp_path / output_name(file_format)).exists()


def test_a_lock_removed_while_the_run_works_stops_it_before_output(tmp_path, tiny_model_dir, monkeypatch, reference):
    """Another --resume could have taken the folder beside this run: the run does not put OUTPUT in place."""
    args = args_of(tmp_path, tiny_model_dir)
    at_batch(monkeypatch, 3, lambda run: os.remove(run.lock_file))
    message = one_line_error(args)
    monkeypatch.undo()
    assert "out.hdf5.partial.lock was removed or replaced while the run worked" in message, message
    assert not (tmp_path / "out.hdf5").exists()
    assert main([*args, "--resume"]) == 0
    assert_finished(tmp_path / "out.hdf5", reference["hdf5"])


def test_a_folder_of_another_appearing_at_output_under_overwrite_says_the_lines_are_kept(
    tmp_path, tiny_model_dir, monkeypatch, reference
):
    output = tmp_path / "out"
    args = [*args_of(tmp_path, tiny_model_dir, "parquet"), "--overwrite"]

    def someone_else_writes(run):
        output.mkdir()
        (output / "notes.txt").write_text("mine")

    at_batch(monkeypatch, 3, someone_else_writes)
    message = one_line_error(args)
    monkeypatch.undo()
    assert (
        "appeared while the run worked and holds what embed did not write: it is not replaced; every line is "
        f"done and kept in {output}.partial" in message
    ), message
    assert (output / "notes.txt").read_text() == "mine"
    shutil.rmtree(output)
    assert main([*args[:-1], "--resume"]) == 0
    assert_finished(output, reference["parquet"])


def test_a_file_size_limit_is_named_not_a_full_disk(tmp_path, tiny_model_dir, monkeypatch):
    def too_large(run):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    at_batch(monkeypatch, 3, too_large)
    message = one_line_error(args_of(tmp_path, tiny_model_dir, "parquet"))
    assert "File too large; the 4 finished lines are kept in " in message, message
    assert "raise the file-size limit (ulimit -f) and rerun with --resume" in message and "free space" not in message


@pytest.mark.parametrize("file_format", FORMATS)
def test_output_files_have_the_mode_of_the_umask(tmp_path, tiny_model_dir, file_format):
    previous = os.umask(0o027)
    try:
        assert main(args_of(tmp_path, tiny_model_dir, file_format)) == 0
    finally:
        os.umask(previous)
    output = tmp_path / output_name(file_format)
    files = list(output.iterdir()) if file_format == "parquet" else [output]
    assert files and {oct(path.stat().st_mode & 0o777) for path in files} == {"0o640"}
