"""`elmo-transformers convert` off the happy path: one line, nothing left behind."""

import os
from pathlib import Path

import pytest
from conftest import FIXTURES, convert_lm_fixture, one_line, run

from elmo_transformers import text_input


def test_an_error_of_several_lines_is_printed_as_one(tmp_path, capsys):
    """tarfile lists why each compression failed, one per line; the user reads one line."""
    empty = tmp_path / "module.tar.gz"
    empty.write_bytes(b"")
    code, err = run(["convert", "tensorflow", empty, "--output", tmp_path / "out"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and err.startswith(f"error: cannot unpack {empty}"), err


def test_a_deeply_nested_options_json_is_one_line(tmp_path, capsys):
    options = tmp_path / "options.json"
    options.write_text("[" * 100_000 + "]" * 100_000)
    code, err = run(
        [
            "convert",
            "allennlp",
            "--options",
            options,
            "--weights",
            FIXTURES / "allennlp-tiny" / "weights.hdf5",
            "--output",
            tmp_path / "out",
        ],
        capsys,
    )
    one_line(code, err, "nests lists or objects too deeply")
    assert not (tmp_path / "out").exists()


def test_a_vocabulary_without_line_breaks_is_one_line(tmp_path, capsys, monkeypatch):
    """`convert allennlp --vocab /dev/zero` read one endless line until MemoryError."""
    one_line(
        convert_lm_fixture(tmp_path / "out", vocab="/dev/zero"),
        capsys.readouterr().err,
        "cannot use the vocabulary /dev/zero: /dev/zero, line 1: NUL characters in the text",
    )
    monkeypatch.setattr(text_input, "MAX_LINE_CHARS", 100)  # a vocabulary of 2**28 characters without a line break
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\n" + "w" * 101 + "\n")
    one_line(
        convert_lm_fixture(tmp_path / "out", vocab=vocab),
        capsys.readouterr().err,
        f"{vocab}, line 4: longer than 100 characters without a line break",
    )
    assert not (tmp_path / "out").exists()


def test_ctrl_c_during_convert_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    """Interrupted while the folder is being written: no traceback, no output folder, no staging folder."""
    import modeling_elmo

    def interrupted(self, folder, **kwargs):
        (Path(folder) / "model.safetensors").write_text("half")  # what a cut write leaves
        raise KeyboardInterrupt

    monkeypatch.setattr(modeling_elmo.ElmoModel, "save_pretrained", interrupted)
    tiny = FIXTURES / "allennlp-tiny"
    out = tmp_path / "converted" / "out"
    code, err = run(
        [
            "convert",
            "allennlp",
            "--options",
            tiny / "options.json",
            "--weights",
            tiny / "weights.hdf5",
            "--output",
            out,
        ],
        capsys,
    )
    assert (code, err.strip()) == (
        130,
        "interrupted by Ctrl+C (SIGINT): elmo-transformers convert stopped before it finished",
    ), err
    assert os.listdir(tmp_path / "converted") == []


def test_a_missing_input_file_is_named_as_missing(tmp_path, capsys, caplog):
    """Not "cannot read nope.hdf5 as HDF5 (truncated or corrupt file?)": the flag, the path and "no such file"; a
    Python caller of the converter reads the argument's name."""
    from elmo_transformers.conversion.allennlp import convert
    from elmo_transformers.errors import ConversionError

    tiny, missing = FIXTURES / "allennlp-tiny", tmp_path / "nope.hdf5"
    one_line(
        *run(["convert", "allennlp", "--weights", missing, "--output", tmp_path / "out"], capsys),
        f"--weights {missing}: no such file",
    )
    one_line(
        *run(
            [
                "convert",
                "allennlp",
                "--options",
                tiny,
                "--weights",
                tiny / "weights.hdf5",
                "--output",
                tmp_path / "out",
            ],
            capsys,
        ),
        f"--options {tiny}: is a folder, not a file",
    )
    one_line(
        *run(
            [
                "convert",
                "tensorflow",
                FIXTURES / "tensorflow" / "tfhub-1layer",
                "--vocab",
                tmp_path / "v.txt",
                "--output",
                tmp_path / "out",
            ],
            capsys,
        ),
        f"--vocab {tmp_path / 'v.txt'}: no such file",
    )
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConversionError, match=f"^weights_path {missing}: no such file$"):
        convert(None, missing)
    convert(None, tiny / "weights.hdf5")
    assert "(an options file overrides them)" in caplog.text
