"""`embed INPUT OUTPUT_DIR --format parquet` (elmo_transformers/embedding/parquet_output.py): a folder that
`datasets.load_dataset("parquet", ...)` reads, one row a line, whose vectors equal the HDF5 file's, from one process
and from two; resumable; and inputs read from a column of JSON lines, CSV or Parquet (--text-column)."""

import json
import subprocess
import sys

import datasets
import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import command_env, interrupt_after
from tolerance import assert_close_to_reference

from elmo_transformers.cli.embed import main
from elmo_transformers.errors import OutputError, UserError

LINES = [" ".join(["the", "cat", "sat", "on", "a", "mat"][: 1 + i % 6] + ["w"] * (i % 9)) for i in range(40)] + [
    "",
    "a very long line of words " * 5,
]  # a blank line, and one of 30 words (windows of 12)
FLAGS = ["--batch-size", "4", "--max-sentence-words", "12"]


def rows(folder):
    data = datasets.load_dataset("parquet", data_dir=str(folder), split="train")
    return {row["line"]: row for row in data}


def hdf5_reference(tmp_path, model_dir, mode):
    source = tmp_path / "input.txt"
    source.write_text("\n".join(LINES) + "\n")
    output = tmp_path / f"reference-{mode}.hdf5"
    assert main([str(source), str(output), "--model", str(model_dir), f"--{mode}", *FLAGS, "--quiet"]) == 0
    with h5py.File(output, "r") as f:
        return {int(key): f[key][...] for key in f if key != "sentence_to_index"}


def assert_rows_equal_hdf5(got, want, mode):
    assert sorted(got) == sorted(want) == list(range(len(LINES)))
    for line, row in got.items():
        assert row["words"] == LINES[line].split()
        vectors = np.array(row["vectors"], dtype=np.float32)
        if want[line].size == 0:
            assert vectors.size == 0
            continue
        assert vectors.shape == want[line].shape, (line, vectors.shape, want[line].shape)
        assert_close_to_reference(vectors, want[line], what=f"--{mode} line {line}")


@pytest.mark.parametrize("mode", ["all", "top"])
def test_one_process_writes_the_hdf5_vectors_as_parquet_rows(tmp_path, tiny_model_dir, mode):
    want = hdf5_reference(tmp_path, tiny_model_dir, mode)
    output = tmp_path / "vectors"
    assert (
        main(
            [
                str(tmp_path / "input.txt"),
                str(output),
                "--model",
                str(tiny_model_dir),
                f"--{mode}",
                *FLAGS,
                "--format",
                "parquet",
                "--quiet",
            ]
        )
        == 0
    )
    assert not (tmp_path / "vectors.partial").exists()
    assert_rows_equal_hdf5(rows(output), want, mode)


@pytest.mark.slow
def test_two_processes_write_their_own_parquet_files_and_resume_any_run(tmp_path, tiny_model_dir, monkeypatch):
    """torchrun with 2 CPU processes (gloo) finishes a Parquet run that one process started and was interrupted in;
    each process writes its own files into the one folder, no assembly step."""
    want = hdf5_reference(tmp_path, tiny_model_dir, "all")
    output = tmp_path / "vectors"
    args = [
        str(tmp_path / "input.txt"),
        str(output),
        "--model",
        str(tiny_model_dir),
        "--all",
        *FLAGS,
        "--format",
        "parquet",
    ]
    interrupt_after(monkeypatch, "add_batch", 2)
    assert main(args) == 130
    monkeypatch.undo()
    assert len(list((tmp_path / "vectors.partial" / "data").glob("*.parquet"))) == 2 and not output.exists()
    with pytest.raises(UserError, match="started with --format parquet, now --format hdf5"):
        main([*args[:-2], "--resume"])
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "elmo_transformers",
        "embed",
        *args,
        "--resume",
    ]
    done = subprocess.run(torchrun, env=command_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "shared by 2 processes" in done.stderr
    assert_rows_equal_hdf5(rows(output), want, "all")


def test_a_column_of_json_lines_csv_or_parquet_is_the_input(tmp_path, tiny_model_dir):
    texts = ["Hello world !", "the cat sat", None, "a b c d"]
    files = {
        "in.jsonl": lambda p: p.write_text(
            "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts))
        ),
        "in.csv": lambda p: p.write_text("id,text\n" + "".join(f"{i},{t or ''}\n" for i, t in enumerate(texts))),
        "in.parquet": lambda p: pq.write_table(pa.table({"id": list(range(4)), "text": texts}), p),
    }
    source = tmp_path / "in.txt"
    source.write_text("\n".join(t or "" for t in texts) + "\n")
    reference = tmp_path / "reference.hdf5"
    assert main([str(source), str(reference), "--model", str(tiny_model_dir), "--top", "--quiet"]) == 0
    with h5py.File(reference, "r") as f:
        want = {int(k): f[k][...] for k in f if k != "sentence_to_index"}
    for name, write in files.items():
        write(tmp_path / name)
        output = tmp_path / f"{name}-vectors"
        assert (
            main(
                [
                    str(tmp_path / name),
                    str(output),
                    "--model",
                    str(tiny_model_dir),
                    "--top",
                    "--text-column",
                    "text",
                    "--format",
                    "parquet",
                    "--quiet",
                ]
            )
            == 0
        )
        got = rows(output)
        assert [got[i]["words"] for i in range(4)] == [(t or "").split() for t in texts], name
        for i in (0, 1, 3):
            assert_close_to_reference(np.array(got[i]["vectors"], np.float32), want[i], what=f"{name} line {i}")
    with pytest.raises(UserError, match=r"no such column in .*in.jsonl \(it has id, text\)"):
        main(
            [
                str(tmp_path / "in.jsonl"),
                str(tmp_path / "x"),
                "--model",
                str(tiny_model_dir),
                "--top",
                "--text-column",
                "sentence",
                "--format",
                "parquet",
            ]
        )
    with pytest.raises(UserError, match="reads a column of a JSON lines"):
        main([str(source), str(tmp_path / "x.hdf5"), "--model", str(tiny_model_dir), "--top", "--text-column", "text"])


def test_an_existing_folder_is_replaced_only_when_it_is_an_earlier_output(tmp_path, tiny_model_dir):
    source = tmp_path / "input.txt"
    source.write_text("a b\nc\n")
    output = tmp_path / "vectors"
    args = [str(source), str(output), "--model", str(tiny_model_dir), "--top", "--format", "parquet", "--quiet"]
    assert main(args) == 0
    with pytest.raises(UserError, match="exists"):
        main(args)
    assert main([*args, "--overwrite"]) == 0
    (output / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="holds 'notes.txt', which embed did not write"):
        main([*args, "--overwrite"])
    assert (output / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("mode", ["all", "top"])
def test_the_vectors_come_back_as_arrays_of_their_declared_shape(tmp_path, tiny_model_dir, mode):
    """The vectors' shape is declared as `datasets` declares arrays (Array2D of [words, 2P], a list of them for
    --all, a layer each), so that `with_format("numpy")` gives each line's array back without a list of floats in
    between; a blank line of --top is [0, 2P]. --output-dtype float16 is stored and declared as float16."""
    source = tmp_path / "input.txt"
    source.write_text("\n".join(LINES) + "\n")
    output = tmp_path / "vectors"
    assert (
        main(
            [
                str(source),
                str(output),
                "--model",
                str(tiny_model_dir),
                f"--{mode}",
                *FLAGS,
                "--format",
                "parquet",
                "--output-dtype",
                "float16",
                "--quiet",
            ]
        )
        == 0
    )
    data = datasets.load_dataset("parquet", data_dir=str(output), split="train")
    matrix = datasets.Array2D((None, 16), "float16")
    assert data.features["vectors"] == (matrix if mode == "top" else datasets.List(matrix))
    arrays = data.with_format("numpy")
    for row in range(len(data)):
        line, vectors = arrays[row]["line"], arrays[row]["vectors"]
        words = len(LINES[line].split())
        if mode == "top" or words:
            shape = (words, 16) if mode == "top" else (3, words, 16)
            assert isinstance(vectors, np.ndarray) and vectors.shape == shape, (line, vectors.shape)
    table = pq.read_table(next(output.glob("*.parquet")))
    leaf = table.schema.field("vectors").type
    while hasattr(leaf, "value_type") or hasattr(leaf, "storage_type"):
        leaf = getattr(leaf, "storage_type", None) or leaf.value_type
    assert leaf == pa.float16()


def test_the_command_says_how_to_read_the_rows_in_line_order(tmp_path, tiny_model_dir, capsys):
    """Rows come in batch order (lines of one length together): the command says so, naming the one call that gives
    line order, and that call does."""
    source = tmp_path / "input.txt"
    source.write_text("\n".join(LINES) + "\n")
    output = tmp_path / "vectors"
    assert main([str(source), str(output), "--model", str(tiny_model_dir), "--top", *FLAGS, "--format", "parquet"]) == 0
    said = capsys.readouterr().err
    call = f"datasets.load_dataset('parquet', data_dir={str(output)!r}, split='train').sort('line')"
    assert f"its rows come in batch order: {call} gives them in line order" in said, said
    data = eval(call, {"datasets": datasets})
    assert data["line"] == list(range(len(LINES))) and data[3]["words"] == LINES[3].split()
    assert datasets.load_dataset("parquet", data_dir=str(output), split="train")["line"] != list(range(len(LINES)))


def test_a_folder_of_the_users_own_parquet_files_is_never_replaced(tmp_path, tiny_model_dir):
    """`--overwrite` deleted train.parquet and test.parquet of a user's data set ("nothing but Parquet files"): only
    the files embed writes (named lines-NNNNNNNNN.parquet, with its columns) make an earlier output."""
    source = tmp_path / "input.txt"
    source.write_text("a b\nc\n")
    mine = tmp_path / "mydata"
    mine.mkdir()
    pq.write_table(pa.table({"text": ["a b"], "label": [1]}), mine / "train.parquet")
    pq.write_table(pa.table({"text": ["c"], "label": [0]}), mine / "lines-000000000.parquet")  # a name like ours
    args = [str(source), str(mine), "--model", str(tiny_model_dir), "--top", "--format", "parquet", "--overwrite"]
    with pytest.raises(OutputError, match="holds 'lines-000000000.parquet', which embed did not write"):
        main(args)
    (mine / "lines-000000000.parquet").unlink()
    with pytest.raises(OutputError, match="holds 'train.parquet', which embed did not write"):
        main(args)
    assert sorted(p.name for p in mine.iterdir()) == ["train.parquet"]


def test_what_a_killed_write_left_is_removed_on_resume_and_never_put_in_place(tmp_path, tiny_model_dir, monkeypatch):
    """A process killed inside a shard's write leaves its temporary file (`.lines-...parquet.RANDOM.tmp`) in
    OUTPUT.partial/data/: resume removes it, neither reading it as a shard ("cannot be read as Parquet") nor, for one
    killed between its fsync and its rename, moving it into OUTPUT."""
    source = tmp_path / "input.txt"
    source.write_text("\n".join(LINES) + "\n")
    output = tmp_path / "vectors"
    args = [str(source), str(output), "--model", str(tiny_model_dir), "--top", *FLAGS, "--format", "parquet", "--quiet"]
    interrupt_after(monkeypatch, "add_batch", 3)
    assert main(args) == 130
    monkeypatch.undo()
    data = tmp_path / "vectors.partial" / "data"
    shards = sorted(data.iterdir())
    (data / f".{shards[0].name}.cut0001.tmp").write_bytes(shards[0].read_bytes()[:100])  # killed mid-write
    (data / f".{shards[0].name}.full0001.tmp").write_bytes(shards[0].read_bytes())  # killed before its rename
    assert main([*args, "--resume"]) == 0
    assert sorted(p.name for p in output.iterdir() if not p.name.startswith("lines-")) == []
    assert sorted(rows(output)) == list(range(len(LINES)))
