"""Work in progress is announced by filelock's locks (elmo_transformers/output_paths.py, rule 3): a process that holds
one refuses a second run, a killed one (kill -9) blocks nothing, and what a killed run left is judged and removed only
while holding its lock."""

import contextlib
import io
import shutil
import subprocess
import sys

import filelock
import pytest

from elmo_transformers.cli import main as cli_main
from elmo_transformers.output_paths import remove_stale_staging
from elmo_transformers.output_paths import hold_lock

HOLDER = """
import sys, time, filelock
lock = filelock.FileLock(sys.argv[1], timeout=0, thread_local=False)
lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


@contextlib.contextmanager
def holder(lock_file):
    """Another process holding the lock file `lock_file` while the block runs, then killed with SIGKILL (no clean-up
    code of its own runs)."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_file)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"
        yield process
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


def run(argv):
    """(exit code, stderr) of a command line run in-process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli_main([str(a) for a in argv])
    return code, err.getvalue()


def test_embed_is_refused_while_another_process_holds_its_output_and_runs_once_that_one_is_killed(
    tmp_path, tiny_model_dir
):
    source = tmp_path / "in.txt"
    source.write_text("the cat sat .\na dog barks .\n", encoding="utf-8")
    output = tmp_path / "out.hdf5"
    argv = ["embed", source, output, "--model", tiny_model_dir, "--top"]
    with holder(tmp_path / "out.hdf5.partial.lock"):
        for extra in ([], ["--resume"], ["--overwrite"]):
            code, err = run([*argv, *extra])
            assert code == 1 and "out.hdf5 is being written by another run" in err, err
            assert len(err.strip().splitlines()) == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.hdf5.partial.lock"]
    code, err = run(argv)  # the holder was killed: the operating system freed its lock
    assert code == 0, err
    # The run took the killed one's lock over and removed it when done.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.hdf5"]


def test_a_killed_conversion_is_cleaned_up_while_its_lock_is_held_and_a_running_one_is_left_alone(
    tmp_path, monkeypatch
):
    killed, running = tmp_path / ".out.convert-1-aaaa", tmp_path / ".out.convert-2-bbbb"
    for staging in (killed, running):
        staging.mkdir()
        (staging / "config.json").write_text("{}")
    with holder(f"{killed}.lock"):
        pass
    removed = []

    def rmtree(path, *args, **kwargs):
        with pytest.raises(filelock.Timeout):  # nobody can take the killed run's lock, or judge it, meanwhile
            hold_lock(f"{killed}.lock")
        removed.append(str(path))
        return remove(path, *args, **kwargs)

    remove = shutil.rmtree
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with holder(f"{running}.lock"):
        remove_stale_staging(str(tmp_path), "out")
        assert removed == [str(killed)]
        assert sorted(p.name for p in tmp_path.iterdir()) == [running.name, f"{running.name}.lock"]
