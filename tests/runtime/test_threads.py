"""OMP_NUM_THREADS as a run takes it (`runtime.threads.requested_threads`): a count above the CPUs this process may
use is capped to them, and a value that is not a count is treated as unset, each with one warning line; 99,999 no
longer crashes the oneDNN packing threads (`kernels_elmo.pack_weights`) of `embed`, `ElmoEmbedder` or an AutoModel
forward, nor asks onnxruntime for that many threads. OpenMP reads the variable as it loads, so the commands are run
as fresh processes."""

import logging
import os
import re
import subprocess
import sys

import pytest
from conftest import SHIPPED, command, command_env

from elmo_transformers.runtime import threads

INVALID = ["0", "-1", "abc", "", "²"]


@pytest.fixture
def warnings_again():
    """Each warning of `requested_threads` shown once a process: shown again in each test."""
    threads.threads_asked.cache_clear()
    yield
    threads.threads_asked.cache_clear()


def test_the_rule(monkeypatch, caplog, warnings_again):
    monkeypatch.setattr(threads, "affinity_cpus", lambda: 4)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.requested_threads() is None
    for value, count in [("1", 1), ("4", 4), (" 3 ", 3), ("2,1", 2)]:
        monkeypatch.setenv("OMP_NUM_THREADS", value)
        assert threads.requested_threads() == count
    assert caplog.records == []
    monkeypatch.setenv("OMP_NUM_THREADS", "99999")
    with caplog.at_level(logging.WARNING):
        assert threads.requested_threads() == threads.requested_threads() == 4
    assert [r.getMessage() for r in caplog.records] == [
        "OMP_NUM_THREADS=99999 asks for more threads than the 4 CPUs this process may use, so 4 are used: set "
        "OMP_NUM_THREADS to 4 or fewer"
    ]
    for value in INVALID:
        caplog.clear()
        monkeypatch.setenv("OMP_NUM_THREADS", value)
        with caplog.at_level(logging.WARNING):
            assert threads.requested_threads() is threads.requested_threads() is None
        assert [r.getMessage() for r in caplog.records] == [
            f"OMP_NUM_THREADS={value!r} is not a number of threads, so it is ignored and the threads are chosen as "
            "where it is unset: set OMP_NUM_THREADS to a whole number from 1 to 4, or unset it"
        ]


@pytest.mark.parametrize(("value", "settled"), [("99999", "4"), ("abc", None), ("3", "3"), ("2,1", "2,1")])
def test_the_commands_settle_the_variable_before_openmp_reads_it(monkeypatch, value, settled, warnings_again):
    monkeypatch.setattr(threads, "affinity_cpus", lambda: 4)
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    threads.settle_threads_variable()
    assert os.environ.get("OMP_NUM_THREADS") == settled


def test_onnxruntime_threads_are_capped(monkeypatch, warnings_again):
    """onnxruntime started 17,513 threads for OMP_NUM_THREADS=99999 (a process without torch)."""
    from elmo_transformers.runtime import onnx as runner

    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(threads, "affinity_cpus", lambda: 4)
    monkeypatch.setattr(threads, "free_cpus", lambda: 3)
    monkeypatch.setenv("OMP_NUM_THREADS", "99999")
    assert runner.intra_op_threads() == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "abc")
    assert runner.intra_op_threads() == 3


def cpus():
    return len(os.sched_getaffinity(0))


def embed(tmp_path, value, *args):
    """`embed --top` of two lines with the tiny model in a fresh process with OMP_NUM_THREADS=`value`."""
    text = tmp_path / "in.txt"
    text.write_text("the cat sat on the mat .\na b c\n")
    output = tmp_path / f"out-{len(os.listdir(tmp_path))}.hdf5"
    done = subprocess.run(
        command("embed", text, output, "--top", *args),
        env=command_env(OMP_NUM_THREADS=value),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, output


@pytest.mark.parametrize("value", ["99999", "20000"])
def test_a_huge_count_runs_on_the_cpus_this_process_may_use(tmp_path, value):
    """It was a segfault (exit 139) in the oneDNN packing threads, also with --threads 1, leaving a partial folder
    (the shipped model: the tiny one's weights are packed without an OpenMP team)."""
    for args in ([], ["--threads", "1"]):
        done, output = embed(tmp_path, value, *args)
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        assert output.exists() and not output.with_name(output.name + ".partial").exists()
        named = [line for line in done.stderr.splitlines() if "OMP_NUM_THREADS" in line]
        assert named == [
            f"OMP_NUM_THREADS={value} asks for more threads than the {cpus()} CPUs this process may "
            f"use, so {cpus()} are used: set OMP_NUM_THREADS to {cpus()} or fewer"
        ], done.stderr
        used = int(re.search(r"(\d+) threads, float32", done.stderr).group(1))
        assert used == (1 if args else cpus()), done.stderr


@pytest.mark.parametrize("value", INVALID[:4])
def test_an_invalid_value_is_treated_as_unset(tiny_model_dir, tmp_path, value):
    """libgomp warned and torch then took every CPU whatever the load; now one line of ours, and the threads of an
    unset variable (the CPUs free to this process now)."""
    done, output = embed(tmp_path, value, "--model", tiny_model_dir)
    assert done.returncode == 0 and output.exists(), done.stderr[-2000:]
    assert "libgomp" not in done.stderr, done.stderr
    named = [line for line in done.stderr.splitlines() if "OMP_NUM_THREADS" in line]
    assert len(named) == 1 and named[0].startswith(f"OMP_NUM_THREADS={value!r} is not a number of threads"), named
    assert 1 <= int(re.search(r"(\d+) threads, float32", done.stderr).group(1)) <= cpus()


PYTHON_API = """
import sys
import torch  # a user's program: torch (and OpenMP) loaded before ELMo
from transformers import AutoModel, AutoTokenizer
from elmo_transformers import ElmoEmbedder

model = AutoModel.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
with torch.no_grad():
    vectors = model(**tokenizer(["the cat sat"], return_tensors="pt")).last_hidden_state
embedded = ElmoEmbedder(sys.argv[1]).embed_sentence(["the", "cat", "sat"])
print(tuple(vectors.shape), embedded.shape)
"""


def test_a_huge_count_in_the_python_api():
    """An AutoModel forward and ElmoEmbedder segfaulted (the packing threads' OpenMP teams)."""
    done = subprocess.run(
        [sys.executable, "-c", PYTHON_API, str(SHIPPED)],
        env=command_env(OMP_NUM_THREADS="99999"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[-2].startswith("(1, 3, ")
