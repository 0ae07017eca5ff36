"""`embed` where the user, another program or the system works against it: a FIFO as INPUT, tables given as text or
read with pyarrow's options, an empty input, a run killed after it finished, an OUTPUT that appears while a run
works, folders that are not an earlier output, numbers past their bounds, hand-forged or damaged run state, the
signal that stopped a run, a parent killed while the HDF5 layout is made."""

import json
import os
import shutil
import signal
import subprocess
import threading
import time

import h5py
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import command_env, interrupt_after, one_line_error, start_command

from elmo_transformers.cli.embed import main
from elmo_transformers.embedding import partial_run

LINES = [" ".join(["w"] * n) for n in range(1, 13)]


def write_input(tmp_path, lines=LINES, name="input.txt"):
    source = tmp_path / name
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return source


def args_of(tmp_path, model_dir, output="out.hdf5", *flags):
    return [
        str(write_input(tmp_path)),
        str(tmp_path / output),
        "--model",
        str(model_dir),
        "--top",
        "--batch-size",
        "2",
        "--quiet",
        *flags,
    ]


@pytest.mark.slow
def test_a_fifo_as_input_is_read_not_closed_under_its_writer(tmp_path, tiny_model_dir, run_cli):
    """A FIFO is opened once, by the read: checking the path does not open and close it under its writer (which would
    die of SIGPIPE while the read waits for ever)."""
    fifo = tmp_path / "lines"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("the cat sat\non the mat\n"), daemon=True)
    writer.start()
    # A read left waiting for a writer that is gone gets an end of file after two minutes, and the test fails.
    watchdog = threading.Timer(120, lambda: open(fifo, "w").close())
    watchdog.daemon = True
    watchdog.start()
    try:
        code, _, err = run_cli("embed", fifo, tmp_path / "o.hdf5", "--model", tiny_model_dir, "--top", "--quiet")
    finally:
        watchdog.cancel()
    assert code == 0, err[-2000:]
    with h5py.File(tmp_path / "o.hdf5") as f:
        assert f["0"].shape == (3, 16) and f["1"].shape == (3, 16)


@pytest.mark.parametrize("file_format", ["hdf5", "parquet"])
def test_what_appears_at_output_during_a_run_is_never_replaced(tmp_path, tiny_model_dir, monkeypatch, file_format):
    """A folder (or file) made at OUTPUT while the run worked is neither deleted at the end without --overwrite
    (Parquet) nor replaced (HDF5, two runs on one OUTPUT): the run stops there, keeps every line for --resume, and
    touches nothing it did not make."""
    output = tmp_path / ("out" if file_format == "parquet" else "out.hdf5")
    args = [*args_of(tmp_path, tiny_model_dir, output.name), "--format", file_format]
    real_add = partial_run.PartialRun.add_batch

    def someone_else_writes(self, arrays, words):
        if not output.exists():
            if file_format == "parquet":
                (output / "sub").mkdir(parents=True)
                (output / "notes.txt").write_text("mine")
            else:
                output.write_text("another run's file")
        return real_add(self, arrays, words)

    monkeypatch.setattr(partial_run.PartialRun, "add_batch", someone_else_writes)
    message = one_line_error(args)
    monkeypatch.undo()
    assert message == (
        f"error: {output} appeared while the run worked: it is not replaced; every line is done and "
        f"kept in {output}.partial: move {output} away and rerun with --resume"
    ), message
    if file_format == "parquet":
        assert (output / "notes.txt").read_text() == "mine" and (output / "sub").is_dir()
        shutil.rmtree(output)
    else:
        assert output.read_text() == "another run's file"
        output.unlink()
    assert main([*args, "--resume"]) == 0 and output.exists()


def test_overwrite_never_deletes_a_folder_of_folders_named_parquet(tmp_path, tiny_model_dir):
    """Spark's and Dask's layout (`part.parquet/` folders) is not an earlier output, though its top-level names look
    like one's: --overwrite refuses it, and a symbolic link to it, deleting nothing."""
    output = tmp_path / "tables"
    (output / "part-0.parquet").mkdir(parents=True)
    (output / "part-0.parquet" / "data.bin").write_text("x")
    message = one_line_error([*args_of(tmp_path, tiny_model_dir, "tables"), "--format", "parquet", "--overwrite"])
    assert "holds 'part-0.parquet', which embed did not write" in message
    assert (output / "part-0.parquet" / "data.bin").read_text() == "x"
    link = tmp_path / "link"
    link.symlink_to(output)
    message = one_line_error([*args_of(tmp_path, tiny_model_dir, "link"), "--format", "parquet", "--overwrite"])
    assert "is a symbolic link: give the real folder" in message


@pytest.mark.parametrize(
    "flag, value, fragment",
    [
        ("--threads", "100000", "--threads 100,000: at most"),
        ("--threads", str(10**12), "at most"),
        ("--batch-words", str(10**9), "--batch-words 1,000,000,000: at most 1,048,576"),
        ("--batch-size", str(10**9), "--batch-size 1,000,000,000: at most 1,048,576"),
        ("--max-sentence-words", "0", "error: --max-sentence-words 0: must be a positive int"),  # (the flag named once)
    ],
)
def test_numbers_beyond_their_bound_are_one_line(tmp_path, tiny_model_dir, flag, value, fragment):
    """A number past its bound is refused in one line before any work: unbounded, --threads 100000 is a MemoryError or
    SIGSEGV in the interpreter, --batch-words 10**9 a 37 GiB MemoryError."""
    message = one_line_error([*args_of(tmp_path, tiny_model_dir)[:-3], flag, value, "--quiet"])
    assert fragment in message, message


def interrupted(monkeypatch, args):
    interrupt_after(monkeypatch, "add_batch", 2)
    assert main(args) == 130
    monkeypatch.undo()


@pytest.mark.parametrize("file_format", ["hdf5", "parquet"])
def test_hand_forged_run_state_is_refused(tmp_path, tiny_model_dir, monkeypatch, file_format):
    """Refused in one line, each: a journal naming lines never computed (they would be finished as all-zero
    vectors), a run.json whose input hash was edited (two texts' vectors in one output), damaged journals, window
    files and run.json (a deeply nested one, which json reads as a RecursionError)."""
    output = "out" if file_format == "parquet" else "out.hdf5"
    args = [*args_of(tmp_path, tiny_model_dir, output), "--format", file_format]
    folder = tmp_path / f"{output}.partial"
    interrupted(monkeypatch, args)
    journal = folder / "done-0.txt"
    saved = journal.read_text()
    journal.write_text(saved + "5 11\n")  # not a batch of this run
    assert "its journals name lines [5, 11] as one batch" in one_line_error([*args, "--resume"])
    journal.write_text(saved + "5 x\n")
    assert "its journal done-0.txt holds" in one_line_error([*args, "--resume"])
    journal.write_text(saved)
    settings = json.loads((folder / "run.json").read_text())
    other = write_input(tmp_path, [line + " more" for line in LINES], "other.txt")
    settings["input_sha256"] = (
        __import__("hashlib").sha256("".join(line + " more\n" for line in LINES).encode()).hexdigest()
    )
    (folder / "run.json").write_text(json.dumps(settings))
    forged = [str(other), *args[1:], "--resume"]
    assert "of another text than the input" in one_line_error(forged)
    (folder / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    assert "its " in one_line_error([*args, "--resume"])


def test_a_damaged_window_file_is_one_line(tmp_path, tiny_model_dir, monkeypatch):
    source = write_input(tmp_path, ["w " * 30])
    args = [
        str(source),
        str(tmp_path / "o.hdf5"),
        "--model",
        str(tiny_model_dir),
        "--top",
        "--max-sentence-words",
        "8",
        "--quiet",
    ]
    interrupt_after(monkeypatch, "add_window", 2)
    assert main(args) == 130
    monkeypatch.undo()
    (window,) = sorted((tmp_path / "o.hdf5.partial").glob("window-*.npz"))[-1:]
    window.write_bytes(b"not an npz")
    assert "cannot be read" in one_line_error([*args, "--resume"])


def test_journals_are_files_of_the_umask_not_executable(tmp_path, tiny_model_dir, monkeypatch):
    previous = os.umask(0o022)
    try:
        interrupted(monkeypatch, args_of(tmp_path, tiny_model_dir))
    finally:
        os.umask(previous)
    assert oct((tmp_path / "out.hdf5.partial" / "done-0.txt").stat().st_mode & 0o777) == "0o644"


@pytest.mark.slow
def test_the_signal_that_stopped_a_run_is_named(tmp_path, tiny_model_dir):
    """A run stopped by SIGTERM, not Ctrl-C, says so: "interrupted by SIGTERM", exit code 130."""
    source = write_input(tmp_path, LINES * 400)
    process = start_command(
        "embed",
        source,
        tmp_path / "o.hdf5",
        "--model",
        tiny_model_dir,
        "--top",
        "--batch-size",
        "1",
        env=command_env(OMP_NUM_THREADS="1"),
        stderr=subprocess.PIPE,
        text=True,
    )
    journal, deadline = tmp_path / "o.hdf5.partial" / "done-0.txt", time.monotonic() + 300
    while not (journal.exists() and journal.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 143, stderr[-2000:]
    assert stderr.strip().splitlines()[-1].startswith("interrupted by SIGTERM: the "), stderr[-500:]


def test_a_table_given_as_text_is_refused_naming_its_columns(tmp_path, tiny_model_dir):
    """A JSON lines file without --text-column is refused, naming its columns, not embedded as raw JSON (line 0 as
    the words `{"id":`, `0,`, `"text":`)."""
    table = tmp_path / "reviews.jsonl"
    table.write_text('{"id": 0, "text": "a fine film"}\n{"id": 1, "text": "dull"}\n')
    message = one_line_error([str(table), str(tmp_path / "o.hdf5"), "--model", str(tiny_model_dir), "--top"])
    assert message == (
        f"error: --text-column not given: {table} is a json file (its columns: id, text): name the "
        "one to embed, one row a line"
    )


@pytest.mark.slow
def test_tables_pyarrow_reads_only_with_options(tmp_path, tiny_model_dir):
    """A JSON line over pyarrow's 1 MB block, a CSV value with a line break, a categorical (dictionary-encoded)
    Parquet column: read; a CSV that is not UTF-8: one line naming the cause."""
    note = "x" * 1_250_000  # a line of about 1.25 MB (its length, not its text's, is what pyarrow's block must hold)
    (tmp_path / "long.jsonl").write_text(
        json.dumps({"text": "a b", "note": note}) + "\n" + json.dumps({"text": "b"}) + "\n"
    )
    (tmp_path / "quoted.csv").write_text('text,label\n"a line\nthat goes on",1\nb,0\n')
    pq.write_table(pa.table({"text": pa.array(["a b", "c", "a b"]).dictionary_encode()}), tmp_path / "cat.parquet")
    for name, lines in [("long.jsonl", 2), ("quoted.csv", 2), ("cat.parquet", 3)]:
        assert (
            main(
                [
                    str(tmp_path / name),
                    str(tmp_path / f"{name}.hdf5"),
                    "--model",
                    str(tiny_model_dir),
                    "--top",
                    "--text-column",
                    "text",
                    "--quiet",
                ]
            )
            == 0
        ), name
        with h5py.File(tmp_path / f"{name}.hdf5") as f:
            assert len(f) - 1 == lines
    (tmp_path / "latin1.csv").write_bytes("text\ncaf\xe9\n".encode("latin-1"))
    message = one_line_error(
        [
            str(tmp_path / "latin1.csv"),
            str(tmp_path / "l.hdf5"),
            "--model",
            str(tiny_model_dir),
            "--top",
            "--text-column",
            "text",
        ]
    )
    assert "is not UTF-8 text: convert" in message, message


def test_an_empty_input_is_refused_for_parquet(tmp_path, tiny_model_dir):
    """A 0-line input is refused for Parquet: `datasets` cannot read a Parquet folder of no rows, so there is none
    to write (HDF5 takes it: a file of `sentence_to_index` alone)."""
    source = tmp_path / "empty.txt"
    source.write_text("")
    message = one_line_error(
        [str(source), str(tmp_path / "out"), "--model", str(tiny_model_dir), "--top", "--format", "parquet"]
    )
    assert message == (
        f"error: {source} has no lines: nothing to embed (`datasets` cannot read a Parquet folder of no rows)"
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
    assert main([str(source), str(tmp_path / "out.hdf5"), "--model", str(tiny_model_dir), "--top", "--quiet"]) == 0


def test_the_layout_writer_dies_with_its_parent():
    """The child that makes the HDF5 layout asks the kernel to kill it with its parent (PR_SET_PDEATHSIG), so that a
    parent killed with kill -9 leaves no child writing."""
    import ctypes
    import multiprocessing

    from elmo_transformers.embedding.hdf5_output import die_with_parent

    def child(send):
        die_with_parent()
        value = ctypes.c_int()
        ctypes.CDLL(None).prctl(2, ctypes.byref(value))  # PR_GET_PDEATHSIG
        send.send(value.value)

    receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=child, args=(send,))
    process.start()
    assert receive.recv() == signal.SIGKILL
    process.join()


def test_a_signal_turns_into_an_interruption_only_in_the_main_thread():
    from elmo_transformers.cli import Interrupted, interruption, signals_as_interrupts

    assert interruption(Interrupted(signal.SIGTERM)) == "SIGTERM"
    assert interruption(KeyboardInterrupt()) == "Ctrl+C (SIGINT)"
    handlers = []

    def in_a_thread():
        with signals_as_interrupts():
            handlers.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert handlers == [before]  # (only the main thread may set signal handlers)


def test_csv_text_that_reads_like_a_missing_value_is_text(tmp_path, tiny_model_dir):
    """pyarrow reads a column of only "NA", "nan", "null" as missing values, which would be blank lines. A CSV's text
    column is text: each such cell is its word; an empty cell is a blank line."""
    table = tmp_path / "na.csv"
    table.write_text('text,id\nNA,1\nnan,2\nnull,3\n,4\n"123",5\n')
    assert (
        main(
            [
                str(table),
                str(tmp_path / "o.hdf5"),
                "--model",
                str(tiny_model_dir),
                "--top",
                "--text-column",
                "text",
                "--quiet",
            ]
        )
        == 0
    )
    with h5py.File(tmp_path / "o.hdf5") as f:
        assert json.loads(f["sentence_to_index"][0]) == {"NA": "0", "nan": "1", "null": "2", "": "3", "123": "4"}
        assert [f[str(i)].shape[0] for i in range(5)] == [1, 1, 1, 0, 1]


def test_a_json_array_and_a_fifo_table_are_one_line(tmp_path, tiny_model_dir):
    """A .json file holding one array is refused in one line, with or without --text-column (not embedded as its
    markup, no words of pyarrow's); a FIFO named *.jsonl is refused naming why (not "lseek failed")."""
    array = tmp_path / "arr.json"
    array.write_text('[{"text": "a b"}]\n')
    for extra in ([], ["--text-column", "text"]):
        message = one_line_error(
            [str(array), str(tmp_path / "o.hdf5"), "--model", str(tiny_model_dir), "--top", *extra]
        )
        assert message == (
            f"error: {array} is one JSON array: give JSON lines (.jsonl: one object a line, as `jq -c "
            "'.[]'` writes them)"
        ), message
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    message = one_line_error(
        [str(fifo), str(tmp_path / "o.hdf5"), "--model", str(tiny_model_dir), "--top", "--text-column", "text"]
    )
    assert message == (
        f"error: {fifo}: a json table is read from a regular file, not a pipe or FIFO: save it to a file first"
    ), message
    assert not (tmp_path / "o.hdf5").exists()
