"""The text `embed` reads (docs/embedding-files.md): one sentence a line of a text file, stdin or an open file, or one
a row of a column of a JSON lines, CSV, TSV or Parquet file; each line's words as the model's tokenizer splits raw text;
and the SHA-256 that identifies the text in a resumed run. Imports no torch."""

import array
import hashlib
import os
import re
import stat
import sys
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..errors import DataError
from ..text_input import MAX_LINE_CHARS, checked_lines

WORD = re.compile(r"\S+")  # the words of str.split() (\s is str.isspace), found one at a time
LONG_LINE_CHARS = 1 << 20  # from here on words are counted without building a list of them
MAX_STREAM_CHARS = MAX_LINE_CHARS  # the most read from stdin or a pipe: what one line may hold, no more
TABLE_READERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}
MAX_BLOCK_BYTES = 1 << 30  # the most pyarrow's JSON and CSV readers read at once: the longest row they can read


class Lines:
    """The stripped lines of the input, kept compactly: their UTF-8 bytes end to end and where each ends (8 bytes a
    line, where a list of str takes some 57 more: docs/embedding-files.md, "Memory"); `lines[i]` is line i as str."""

    def __init__(self, lines=()):
        self.text, self.ends = bytearray(), array.array("q")
        for line in lines:
            self.append(line)

    def append(self, line):
        self.text += line.encode("utf-8", "surrogatepass")
        self.ends.append(len(self.text))

    def __len__(self):
        return len(self.ends)

    def __getitem__(self, i):
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        start = self.ends[i - 1] if i else 0
        return self.text[start : self.ends[i]].decode("utf-8", "surrogatepass")

    def __iter__(self):
        return (self[i] for i in range(len(self)))


def count_words(line, tokenizer):
    """How many words `tokenizer` (an ElmoBasicTokenizer) finds in `line` (`len(line.split())` in bounded memory for
    a line of any length where it splits on white space)."""
    if not tokenizer.splits_on_whitespace:
        return len(tokenizer.split_words(line))
    tokenizer.segmenter.check_segmented(line)
    return len(line.split()) if len(line) < LONG_LINE_CHARS else sum(1 for _ in WORD.finditer(line))


def line_words(line, tokenizer):
    """The words of `line`, one at a time, as `tokenizer` splits raw text."""
    if tokenizer.splits_on_whitespace:
        return (m.group() for m in WORD.finditer(line))
    return iter(tokenizer.split_words(line))


def input_name(source):
    return "stdin" if source == "-" else getattr(source, "name", source)


def is_stream(file):
    """True for an open file whose size is not known before it ends: stdin from a pipe or a terminal, a FIFO."""
    try:
        return not stat.S_ISREG(os.fstat(file.fileno()).st_mode)
    except (AttributeError, OSError):  # no file descriptor (StringIO): already in memory
        return False


def stripped(lines):
    """`lines` stripped, without a leading byte-order mark (an editor's encoding mark, not part of the first word)."""
    for number, line in enumerate(lines):
        line = line.strip()
        yield line[1:].strip() if not number and line.startswith("\ufeff") else line


def stripped_lines(file, name):
    """The stripped lines of the open text file `file`, kept (`Lines`); from a stream, at most MAX_STREAM_CHARS
    characters."""
    limit = MAX_STREAM_CHARS if is_stream(file) else None

    def bounded(lines):
        read = 0
        for line in lines:
            read += len(line)
            if limit is not None and read > limit:
                raise DataError(
                    f"{name}: more than {limit:,} characters before its end, the most embed reads from a "
                    "stream (it holds the whole input in memory until the end): save the text to a file "
                    "and embed the file"
                )
            yield line

    return Lines(stripped(bounded(checked_lines(file, name))))


def table_kind(source):
    """ "json", "csv", "tsv" or "parquet" for a path whose name says it is such a table, else None."""
    if not isinstance(source, (str, os.PathLike)) or source == "-":
        return None
    return TABLE_READERS.get(os.path.splitext(str(source))[1].lower())


def check_table_file(source, kind):
    """Refuse, in one line, a table file that pyarrow cannot read as one: a pipe or a FIFO (pyarrow seeks), a JSON
    file that is one array (pyarrow reads JSON lines)."""
    if not os.path.isfile(source):
        raise DataError(
            f"{source}: a {kind} table is read from a regular file, not a pipe or FIFO: save it to a file first", source
        )
    if kind == "json":
        with open(source, "rb") as f:
            if f.read(4096).lstrip()[:1] == b"[":
                raise DataError(
                    f"{source} is one JSON array: give JSON lines (.jsonl: one object a line, as `jq -c "
                    "'.[]'` writes them)",
                    source,
                )


def read_table(source, kind, text_column=None):
    """The pyarrow table of the file `source` of `kind` (pyarrow's readers, those of `datasets`): a JSON line or CSV
    row of any length up to MAX_BLOCK_BYTES, quoted line breaks in CSV values, a TSV as IANA's tab-separated values
    (no quoting: a `"` is text), a CSV's or TSV's `text_column` as text whatever it reads like (a cell "NA", "null"
    or "123" is that text, an empty one a blank line); one line naming what cannot be read."""
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.json
    import pyarrow.parquet

    check_table_file(source, kind)
    block = max(1 << 20, min(os.path.getsize(source) + 1, MAX_BLOCK_BYTES))  # a block must hold the longest row
    try:
        if kind == "json":
            return pyarrow.json.read_json(str(source), read_options=pyarrow.json.ReadOptions(block_size=block))
        if kind in ("csv", "tsv"):
            text = {} if text_column is None else {"column_types": {text_column: pa.string()}}
            parse = (
                pyarrow.csv.ParseOptions(newlines_in_values=True)
                if kind == "csv"
                else pyarrow.csv.ParseOptions(delimiter="\t", quote_char=False)
            )
            return pyarrow.csv.read_csv(
                str(source),
                read_options=pyarrow.csv.ReadOptions(block_size=block),
                parse_options=parse,
                convert_options=pyarrow.csv.ConvertOptions(
                    strings_can_be_null=False, quoted_strings_can_be_null=False, **text
                ),
            )
        return pyarrow.parquet.read_table(str(source))
    except (pa.ArrowException, OSError) as e:
        reason = str(e).splitlines()[0]
        if "UTF8" in reason or "UTF-8" in reason:
            reason = "it is not UTF-8 text: convert it, e.g. with `iconv -f ENCODING -t UTF-8`"
        elif "straddl" in reason:
            reason = (
                f"a row is longer than {MAX_BLOCK_BYTES >> 20} MiB, the most read at once: split it, or give "
                "the text as a text file, one sentence a line"
            )
        raise DataError(f"{source}: cannot read it as {kind}: {reason}", source) from None


def read_column(source, column):
    """The stripped texts of column `column` of a JSON lines, CSV, TSV or Parquet file, a missing value as a blank
    line (a categorical column, dictionary-encoded, by its values)."""
    kind = table_kind(source)
    if kind is None:
        raise DataError(
            f"text_column {column}: reads a column of a JSON lines (.jsonl), CSV (.csv), TSV (.tsv) or "
            f"Parquet (.parquet) file, not of {source}; a text file is read one sentence a line without "
            "it",
            column,
            argument="text_column",
        )
    import pyarrow as pa

    table = read_table(source, kind, column)
    if column not in table.column_names:
        raise DataError(
            f"text_column {column}: no such column in {source} (it has {', '.join(table.column_names)})",
            column,
            argument="text_column",
        )
    if table.column_names.count(column) > 1:
        raise DataError(
            f"text_column {column}: {table.column_names.count(column)} columns of {source} have that "
            "name: rename all but one in its header, then give text_column the one to embed",
            column,
            argument="text_column",
        )
    values = table.column(column)
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):  # a Parquet file's bytes
        raise DataError(
            f"text_column {column}: the column of {source} holds bytes ({values.type}), not strings: "
            "write it as a string column of UTF-8 text (in pyarrow, `column.cast(pyarrow.string())`)",
            column,
            argument="text_column",
        )
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type) or pa.types.is_null(values.type)):
        raise DataError(
            f"text_column {column}: the column of {source} holds {values.type}, not text",
            column,
            argument="text_column",
        )
    return Lines((text or "").strip() for text in values.to_pylist())


def check_text_source(source):
    """Refuse a table file given without `text_column` (read as text, it would embed its markup: `{"id":`, commas)
    and a closed stdin."""
    kind = table_kind(source)
    if kind is not None:
        check_table_file(source, kind)
        try:
            columns = read_table(source, kind).column_names
        except DataError:
            columns = None  # not such a table after all: text with that name
        if columns is not None:
            raise DataError(
                f"text_column not given: {source} is a {kind} file (its columns: {', '.join(columns)}): "
                "name the one to embed, one row a line",
                source,
                argument="text_column",
            )
    if source == "-" and sys.stdin is None:
        raise DataError("-: stdin is closed: give INPUT as a file, or pipe the text into the command", source)


def read_lines(source, text_column=None):
    """Stripped lines of a path, "-" (stdin) or an open text file, as AllenNLP reads them, without a leading
    byte-order mark, kept in memory (`Lines`); with `text_column`, the texts of that column of a JSON lines, CSV or
    Parquet file, one a line."""
    if text_column is not None:
        return read_column(source, text_column)
    check_text_source(source)
    try:
        if hasattr(source, "read"):
            lines = stripped_lines(source, input_name(source))
        else:
            with open(sys.stdin.fileno() if source == "-" else source, encoding="utf-8", closefd=source != "-") as f:
                lines = stripped_lines(f, input_name(source))
    except OSError as e:
        raise OSError(f"cannot read the input {input_name(source)}: {e.strerror or e}") from None
    return lines


@dataclass
class Scan:
    """What a pass over the whole input finds, before any work: its `lines`, UTF-8 bytes and `sha256` (of each line
    and a line break: what identifies the text of a run), how many lines have each number of words up to `max_words`
    (`histogram`), the longer lines' words (`long`: {line: words}), the first of the longest lines (`longest`:
    (line, words)), and each line's words (`counts`, an int64 array) where asked for (the HDF5 layout: one dataset a
    line)."""

    lines: int = 0
    utf8_bytes: int = 0
    sha256: str = ""
    histogram: Counter = field(default_factory=Counter)
    long: dict = field(default_factory=dict)
    longest: tuple = (0, 0)
    counts: np.ndarray | None = None


class Input:
    """The text of a run (a path, "-" for stdin, or an open text file; with `text_column`, that column of a table
    file), read again on each pass (`counted`), so that a run holds no more of it than its batches need: a regular
    file is opened again each time, and a pass that finds another text than the first is refused (`changed`); stdin, a
    pipe, an open file and a table's column (which pyarrow reads whole) are read once and kept (`Lines`: their text
    and 8 bytes a line)."""

    def __init__(self, source, text_column=None):
        self.name = input_name(source)
        self.scan = None
        streamed = (
            text_column is None
            and isinstance(source, (str, os.PathLike))
            and source != "-"
            and os.path.isfile(source)  # (a regular file: not a FIFO, which cannot be read twice)
        )
        if streamed:
            check_text_source(source)
            self.path, self.kept = source, None
        else:
            self.path, self.kept = None, read_lines(source, text_column)

    def __iter__(self):
        """The stripped lines, in order, read again."""
        if self.kept is not None:
            yield from self.kept
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                yield from stripped(checked_lines(f, self.name))
        except OSError as e:
            raise OSError(f"cannot read the input {self.name}: {e.strerror or e}") from None

    def __len__(self):
        return self.scan.lines

    def utf8_bytes(self):
        return self.scan.utf8_bytes

    def first_pass(self, count, max_words, keep_counts=False):
        """Read the whole input once (`Scan`), `count(line)` giving a line's words; kept as `self.scan`, which
        later passes (`counted`) must find again."""
        scan, digest, counts = Scan(), hashlib.sha256(), array.array("q")
        for number, (line, size, words) in enumerate(self._hashed(count, digest)):
            scan.lines += 1
            scan.utf8_bytes += size
            if words > max_words:
                scan.long[number] = words
            else:
                scan.histogram[words] += 1
            if words > scan.longest[1]:
                scan.longest = (number, words)
            if keep_counts:
                counts.append(words)
        scan.sha256 = digest.hexdigest()
        scan.counts = np.frombuffer(counts, np.int64) if keep_counts else None
        self.scan = scan
        return scan

    def counted(self, count, folder):
        """(line number, line, its words by `count`) of every line, read again; `changed(folder)` is raised where
        the text is not the one the first pass read."""
        digest = hashlib.sha256()
        yield from ((number, line, words) for number, (line, _, words) in enumerate(self._hashed(count, digest)))
        if digest.hexdigest() != self.scan.sha256:
            raise self.changed(folder)

    def changed(self, folder):
        """The error of a text that changed while the run read it (`folder`: the run's, which holds its work)."""
        return DataError(
            f"{self.name} changed while the run read it (it is read once to plan the batches, then again to embed "
            f"them and to check the output): keep it unchanged until a run ends, delete {folder} and run again",
            self.name,
        )

    def _hashed(self, count, digest):
        for line in self:
            yield line, update_sha256(digest, line), count(line)


def update_sha256(digest, line):
    """Add `line` and a line break to `digest` (a SHA-256 of the text: a run's `input_sha256`), a piece at a time (no
    copy of a long line); returns the line's UTF-8 bytes."""
    size = 0
    for start in range(0, len(line), LONG_LINE_CHARS):
        piece = line[start : start + LONG_LINE_CHARS].encode("utf-8", "surrogatepass")
        digest.update(piece)
        size += len(piece)
    digest.update(b"\n")
    return size
