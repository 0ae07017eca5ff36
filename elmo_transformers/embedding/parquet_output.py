"""`embed INPUT OUTPUT_DIR --format parquet`: a folder of Parquet files that `datasets.load_dataset("parquet",
data_dir=OUTPUT_DIR, split="train")` reads, one row a line: `line` (its number from 0), `words` (as the tokenizer
split it) and `vectors` (the array the HDF5 layout holds for that line and mode).

The vectors go to Arrow from the NumPy buffers themselves (no Python lists), with their shape declared as `datasets`
declares arrays (`Array2D((None, 2P))` for --top and --average, a list of them for --all: one a layer), so that
`with_format("numpy")` or `("torch")` gives each line's array back. Each finished batch is one file,
`lines-FIRST.parquet` (written to a temporary name, on the disk, renamed, then journaled), in
OUTPUT_DIR.partial/data/, by whichever process computed it: the processes of a multi-process run write side by side,
with no assembly step, and the folder is renamed into OUTPUT_DIR once every line is done. A long line (in windows)
is one file of its own, written when its last window is done: an interrupted run starts that line again. Imports no
torch."""

import contextlib
import errno
import json
import os
import re
import shutil

import numpy as np

from ..errors import OutputError, OutputExistsError
from ..output_paths import check_parent_takes_files, write_file_atomically


def check_folder_output(output, overwrite):
    """Refuse, before any work, an OUTPUT_DIR that cannot be written: a file, a symbolic link (never replaced), a
    missing parent folder, or an existing folder (with `overwrite`, only an earlier output: one that holds nothing
    but files embed writes, `is_shard`; a user's own Parquet files or a folder named `*.parquet`, Spark's and Dask's
    layout, are not)."""
    check_parent_takes_files(output)
    if os.path.islink(output):
        raise OutputError(f"{output} is a symbolic link: give the real folder (links are never replaced)", output)
    if os.path.lexists(output) and not os.path.isdir(output):
        raise OutputError(f"{output} is a file: give the path of a folder for the Parquet files", output)
    if os.path.isdir(output):
        if not overwrite:
            raise OutputExistsError(f"{output} exists (pass overwrite=True to replace it)", output)
        others = [name for name in sorted(os.listdir(output)) if not is_shard(output, name)]
        if others:
            raise OutputError(
                f"{output} holds {others[0]!r}, which embed did not write: it is not an earlier "
                "output, so it is not replaced; choose another folder",
                output,
            )


SHARD = re.compile(r"lines-\d{9}\.parquet")  # a finished batch's file: `lines-FIRST.parquet`
COLUMNS = ["line", "words", "vectors"]
# What `write_file_atomically` leaves of a shard when the process is killed before its rename: `.NAME.RANDOM.tmp`.
UNFINISHED = re.compile(r"\.lines-\d{9}\.parquet\..+\.tmp")


def is_shard(folder, name):
    """Whether `name` in `folder` is a file embed wrote: a regular file (not a folder, not a link) named as a shard,
    whose schema is that of the rows (line, words, vectors)."""
    import pyarrow.parquet as pq

    path = os.path.join(folder, name)
    if not (SHARD.fullmatch(name) and os.path.isfile(path) and not os.path.islink(path)):
        return False
    try:
        return pq.read_schema(path).names == COLUMNS
    except Exception:  # noqa: BLE001 - pyarrow reports a file that is not Parquet with several error types
        return False


def nested(values, arrays, axis):
    """`values` (an Arrow array) grouped into one list per index of `arrays`' leading axes up to `axis`: a list
    array whose offsets come from the arrays' shapes."""
    import pyarrow as pa

    sizes = np.concatenate([np.full(int(np.prod(a.shape[:axis])), a.shape[axis], np.int64) for a in arrays])
    return pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(sizes)]), pa.int32()), values)


def vectors_column(arrays):
    """The `vectors` column of arrays of one rank, [words, 2P] or [layers, words, 2P]: `datasets`' Array2D of each
    [words, 2P] (its Arrow extension type), in a list for the layers."""
    import pyarrow as pa
    from datasets.features.features import Array2DExtensionType

    width, dtype = arrays[0].shape[-1], arrays[0].dtype
    values = pa.array(np.concatenate([a.reshape(-1) for a in arrays]) if len(arrays) > 1 else arrays[0].reshape(-1))
    rows = nested(values, arrays, arrays[0].ndim - 1)
    matrices = pa.ExtensionArray.from_storage(
        Array2DExtensionType((None, width), dtype.name), nested(rows, arrays, arrays[0].ndim - 2)
    )
    return matrices if arrays[0].ndim == 2 else nested(matrices, arrays, 0)


def features(arrays):
    """The `datasets` features of a table of these arrays, as its schema's metadata records them."""
    from datasets import Array2D, Features, List, Value

    matrix = Array2D((None, arrays[0].shape[-1]), arrays[0].dtype.name)
    return Features(
        {
            "line": Value("int64"),
            "words": List(Value("string")),
            "vectors": matrix if arrays[0].ndim == 2 else List(matrix),
        }
    )


class ParquetOutput:
    """OUTPUT_DIR while the run makes it: data/ in the run's folder (`partial_run.PartialRun`), renamed into
    OUTPUT_DIR by `finish`. A long line is written whole, once its last window is done (`windows` False)."""

    windows = False
    check_output = staticmethod(check_folder_output)

    def __init__(self, folder, output):
        self.output = output
        self.data = os.path.join(folder, "data")
        self.pieces = {}
        self.mode = 0o644  # a file's mode, as `open` gives files less the umask (set by `open`)

    def create(self, lines, shapes, dtype):
        os.makedirs(self.data, exist_ok=True)

    def open(self):
        """What a killed process left of a file it was writing (never journaled: its lines are computed again) is
        removed."""
        umask = os.umask(0)  # (read once, before the threads that write start)
        os.umask(umask)
        self.mode = 0o666 & ~umask
        for name in os.listdir(self.data):
            if UNFINISHED.fullmatch(name):
                with contextlib.suppress(FileNotFoundError):  # (another process of the run removed it first)
                    os.remove(os.path.join(self.data, name))

    def close(self):
        pass

    def add_batch(self, arrays, words):
        """One Parquet file of the finished batch ({line number: array}; `words`: each line's words, in that order);
        on the disk when it returns."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        lines = list(arrays)
        vectors = [np.ascontiguousarray(arrays[i]) for i in lines]
        table = pa.table(
            {
                "line": pa.array(lines, pa.int64()),
                "words": pa.array(words, pa.list_(pa.string())),
                "vectors": vectors_column(vectors),
            }
        )
        table = table.replace_schema_metadata(
            {"huggingface": json.dumps({"info": {"features": features(vectors).to_dict()}})}
        )

        def write(f):
            os.fchmod(f.fileno(), self.mode)  # (the temporary file is made 0600)
            pq.write_table(table, f, compression="none", use_dictionary=False, write_statistics=False)

        write_file_atomically(self.shard(lines[0]), write)

    def shard(self, key):
        """The file of the batch whose first line is `key` (`batches.Batch.key`)."""
        return os.path.join(self.data, f"lines-{key:09d}.parquet")  # (SHARD)

    def add_window(self, line, start, vectors, words):
        """Keep a window of a long line of `words` words; once the line is whole, its array (which the run stores as
        a batch of one line), else None."""
        if line not in self.pieces:  # the line's array, filled window by window (held once, never concatenated)
            self.pieces[line] = np.empty((*vectors.shape[:-2], words, vectors.shape[-1]), vectors.dtype)
        whole = self.pieces[line]
        whole[..., start : start + vectors.shape[-2], :] = vectors
        return self.pieces.pop(line) if start + vectors.shape[-2] >= whole.shape[-2] else None

    def check_text(self, lines, units, words, damaged):
        """Raise `damaged(what)` unless every file written so far is that of one of the `units` (`batches.Plan.units`
        of `lines`), holding its lines and their words (`words(unit)`), one unit at a time."""
        import pyarrow.parquet as pq

        found = 0
        for unit in units:
            path = self.shard(unit.key)
            if not os.path.isfile(path):
                continue
            found += 1
            name = os.path.basename(path)
            try:
                table = pq.read_table(path, columns=["line", "words"]).to_pydict()
            except Exception:  # noqa: BLE001 - pyarrow reports a damaged file with several error types
                raise damaged(f"its {name} cannot be read as Parquet") from None
            if table["line"] != unit.lines.tolist():
                raise damaged(f"its {name} holds lines {table['line'][:5]}, a batch of another text than the input")
            for line, got, want in zip(table["line"], table["words"], words(unit)):
                if got != want:
                    raise damaged(f"its {name} holds line {line} of another text than the input")
        shards = sum(1 for name in os.listdir(self.data) if SHARD.fullmatch(name))
        if shards > found:
            raise damaged(f"its {self.data} holds {shards - found} files of lines of another text than the input")

    def holds(self, batch):
        """Whether data/ holds the file of a journaled batch (its lines, the first naming the file): one removed by
        hand is computed again."""
        return os.path.isfile(self.shard(batch[0])) if batch else True

    def check_whole(self, units, shape, dtype):
        """What keeps data/ from being the finished output, or None: gone, or not one file of each of the `units`
        (`batches.Plan.units` of the input, read once, one at a time) holding its lines, each with its number of
        words and vectors of `shape` (the words at -2) and `dtype`, or another file beside them."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if not os.path.isdir(self.data):
            return f"its {self.data} is gone"
        none = [np.zeros(shape, dtype)]  # (a line of no words)
        expected = (vectors_column(none).type, json.loads(json.dumps(features(none).to_dict())))
        found = 0
        for unit in units:
            path = self.shard(unit.key)
            name = os.path.basename(path)
            if not os.path.isfile(path):
                return f"its {self.data} lacks line {unit.key}"
            found += 1
            try:
                shard = pq.ParquetFile(path)
                table = shard.read(columns=["line", "words"])
                schema = shard.schema_arrow
                kind = (
                    schema.field("vectors").type,  # (and its shape and dtype, which the type's == leaves out)
                    json.loads(schema.metadata[b"huggingface"])["info"]["features"],
                )
            except Exception:  # noqa: BLE001 - pyarrow reports a damaged file with several error types
                return f"its {name} cannot be read as Parquet"
            if kind != expected:
                return f"its {name} holds vectors of another type ({kind[1].get('vectors')})"
            if not np.array_equal(table["line"].to_numpy(), unit.lines):
                return f"its {name} holds other lines than the batch the run wrote there"
            words = pc.list_value_length(table["words"]).fill_null(0).to_numpy()
            wrong = unit.lines[words != unit.counts]
            if wrong.size:
                return f"its {name} holds line {int(wrong[0])} with another number of words than the input's"
        others = [name for name in sorted(os.listdir(self.data)) if not SHARD.fullmatch(name)]
        if others:
            return f"its {self.data} holds {others[0]!r}, which the run did not write"
        shards = sum(1 for name in os.listdir(self.data) if SHARD.fullmatch(name))
        if shards > found:
            return f"its {self.data} holds {shards - found} files of no batch of this run"
        return None

    def pending(self):
        """Whether the finished files are still here, not yet put in place."""
        return os.path.isdir(self.data)

    def finish(self, overwrite):
        """Put data/ in place as OUTPUT_DIR: an earlier output there is removed first (with `overwrite`, checked
        again just before: nothing but Parquet files); the rename fails where a folder with files appeared since."""
        if os.path.isdir(self.output) and overwrite:
            shutil.rmtree(self.output)
        try:
            os.rename(self.data, self.output)
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise OutputExistsError(
                    f"{self.output} exists (pass overwrite=True to replace it)", self.output
                ) from None
            raise
