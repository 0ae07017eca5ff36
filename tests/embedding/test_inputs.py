"""The tables `embed` reads (embedding/inputs.py): a CSV row longer than pyarrow's default block, a header that names a
column twice, a TSV read as a CSV is (a header, `text_column`), a Parquet column of bytes: each read, or refused in
one line that says what to do."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import one_line_error

from elmo_transformers.errors import DataError
from elmo_transformers.embedding.inputs import read_lines


def test_a_csv_value_longer_than_a_block_is_read(tmp_path):
    """A quoted value of 2.2 MB, over pyarrow's 1 MB block, failed with "straddles two block boundaries (try to
    increase block size?)", a size nobody could give."""
    value = "x\n" * 1_100_000
    source = tmp_path / "long.csv"
    source.write_text(f'text,id\nfirst,0\n"{value}",1\nlast,2\n')
    assert list(read_lines(source, "text")) == ["first", value.strip(), "last"]


def test_a_header_naming_a_column_twice_is_one_line(tmp_path, tiny_model_dir):
    source = tmp_path / "dup.csv"
    source.write_text("text,text\na,b\n")
    message = one_line_error(
        [str(source), str(tmp_path / "o.hdf5"), "--model", str(tiny_model_dir), "--top", "--text-column", "text"]
    )
    assert message == (
        f"error: --text-column text: 2 columns of {source} have that name: rename all but one in its "
        "header, then give text_column the one to embed"
    )


def test_a_tsv_is_a_table_read_as_a_csv_is(tmp_path, tiny_model_dir):
    """A .tsv refused `text_column`, and without it was embedded as text: its header and its id column as words."""
    source = tmp_path / "in.tsv"
    source.write_text('id\ttext\n1\t"Yes," she said.\n2\t\n3\tNA\n')
    assert list(read_lines(source, "text")) == ['"Yes," she said.', "", "NA"]  # no quoting in a TSV: a `"` is text
    message = one_line_error([str(source), str(tmp_path / "o.hdf5"), "--model", str(tiny_model_dir), "--top"])
    assert message == (
        f"error: --text-column not given: {source} is a tsv file (its columns: id, text): name the "
        "one to embed, one row a line"
    )
    assert not (tmp_path / "o.hdf5").exists()
    source.write_text("id\ttext\n1\ta\tb\n")
    with pytest.raises(DataError, match=r"cannot read it as tsv: .*Expected 2 columns, got 3"):
        read_lines(source, "text")


def test_a_parquet_column_of_bytes_says_to_write_strings(tmp_path):
    """It said "not UTF-8 text: convert the file with iconv", advice for a text file, not for Parquet's bytes."""
    source = tmp_path / "bytes.parquet"
    pq.write_table(pa.table({"text": pa.array([b"a b", b"c"], pa.binary())}), source)
    with pytest.raises(DataError) as raised:
        read_lines(source, "text")
    assert str(raised.value) == (
        f"text_column text: the column of {source} holds bytes (binary), not strings: "
        "write it as a string column of UTF-8 text (in pyarrow, "
        "`column.cast(pyarrow.string())`)"
    )
