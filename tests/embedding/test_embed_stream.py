"""`elmo-transformers embed -` from a stream (a pipe, a FIFO): read up to inputs.MAX_STREAM_CHARS characters,
then refused in one line, so a stream that never ends cannot fill the memory; a file redirected to stdin has no such
bound."""

import subprocess
import sys

import h5py
import pytest
from conftest import command_env

LIMIT = 20_000  # the bound, lowered for the test: the real one (2**28 characters) takes a minute to reach
CHILD = f"""
import runpy, sys
from elmo_transformers.embedding import inputs
inputs.MAX_STREAM_CHARS = {LIMIT}
sys.argv = sys.argv[1:]
runpy.run_module("elmo_transformers", run_name="__main__")
"""
ENDLESS = "import sys\nwhile True:\n    sys.stdout.write('the cat sat on the mat .\\n' * 1000)\n"
LINE = "the cat sat on the mat .\n"


def embed_stdin(tmp_path, tiny_model_dir, stdin, name):
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    output = tmp_path / name
    argv = [
        sys.executable,
        str(child),
        "elmo-transformers",
        "embed",
        "-",
        str(output),
        "--model",
        str(tiny_model_dir),
        "--top",
    ]
    done = subprocess.run(
        argv, stdin=stdin, capture_output=True, text=True, timeout=30, env=command_env(OMP_NUM_THREADS="1")
    )
    return done, output


@pytest.mark.slow
def test_an_endless_stream_is_refused_in_one_line_once_past_the_bound(tmp_path, tiny_model_dir):
    generator = subprocess.Popen([sys.executable, "-c", ENDLESS], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        done, output = embed_stdin(tmp_path, tiny_model_dir, generator.stdout, "out.hdf5")
    finally:
        generator.kill()
        generator.wait()
        generator.stdout.close()
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: stdin: more than {LIMIT:,} characters before its end, the most embed reads from a stream (it holds "
        "the whole input in memory until the end): save the text to a file and embed the file"
    )
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["child.py"]  # no output, no OUTPUT.partial/


@pytest.mark.slow
def test_a_file_redirected_to_stdin_has_no_bound(tmp_path, tiny_model_dir):
    source = tmp_path / "in.txt"
    lines = 2 * LIMIT // len(LINE)
    source.write_text(LINE * lines, encoding="utf-8")
    with open(source, "rb") as stdin:
        done, output = embed_stdin(tmp_path, tiny_model_dir, stdin, "out.hdf5")
    assert done.returncode == 0, done.stderr[-2000:]
    with h5py.File(output, "r") as f:
        assert len(f) == lines + 1  # a dataset a line, and sentence_to_index
