"""`embed INPUT OUTPUT_DIR --format parquet`: a folder of Parquet files that `datasets.load_dataset("parquet",
data_dir=OUTPUT_DIR, split="train")` reads, one row a line: `line` (its number from 0), `words` (as the tokenizer
split it) and `vectors` (the array the HDF5 layout holds for that line and mode, as nested lists).

Each finished batch is one file, `lines-FIRST.parquet` (written to a temporary name, on the disk, renamed, then
journaled as the HDF5 output's batches are), in OUTPUT_DIR.partial/data/, by whichever process computed it: the
processes of a multi-process run write side by side, with no assembly step, and the folder is renamed into
OUTPUT_DIR once every line is done. A long line (in windows) is one file of its own, written when its last window
is done: an interrupted run starts that line again. Imports no torch."""

import json
import os
import shutil

import numpy as np

from .partial_run import PartialRun, UnfinishedRunError, _write_atomically, covered


def nested(arrays):
    """A pyarrow list array holding each of the float32 `arrays` (all of one rank) as one nested list."""
    import pyarrow as pa

    column = pa.array(np.concatenate([a.reshape(-1) for a in arrays]))
    for axis in range(arrays[0].ndim - 1, -1, -1):  # innermost first: each array has prod(shape[:axis]) such lists
        sizes = np.concatenate([np.full(int(np.prod(a.shape[:axis])), a.shape[axis], np.int64) for a in arrays])
        column = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(sizes)]), pa.int32()), column)
    return column


class ParquetRun(PartialRun):
    """OUTPUT_DIR.partial/: run.json, the journals and data/ (the Parquet files), renamed into OUTPUT_DIR at the
    end (see the module docstring)."""

    def __init__(self, output):
        super().__init__(output)
        self.data = os.path.join(self.folder, "data")
        self.words_of, self.windows = None, {}

    def start(self, settings, lines, shapes):
        os.makedirs(self.data, exist_ok=True)
        try:
            _write_atomically(os.path.join(self.folder, "run.json"),
                              lambda f: f.write(json.dumps(settings, indent=1).encode()))
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def open(self, rank, words_of=None):
        self.words_of = words_of
        self.open_journal(rank)

    def close(self):
        if self.journal is not None:
            os.close(self.journal)
        self.journal = None

    def add_batch(self, arrays):
        """One Parquet file of the finished batch ({line number: float32 array}), then its journal entry."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        lines = list(arrays)
        table = pa.table({"line": pa.array(lines, pa.int64()),
                          "words": pa.array([self.words_of(i) for i in lines], pa.list_(pa.string())),
                          "vectors": nested([np.ascontiguousarray(arrays[i]) for i in lines])})
        _write_atomically(os.path.join(self.data, f"lines-{lines[0]:09d}.parquet"), lambda f: pq.write_table(table, f))
        self.note_done(lines)

    def add_window(self, line, start, vectors, lstm_state):
        """Keep a long line's window until the line is whole, then write it as a batch of one line."""
        pieces = self.windows.setdefault(line, [])
        pieces.append(vectors)
        words = self.words_of(line)
        if sum(piece.shape[-2] for piece in pieces) == len(words):
            self.add_batch({line: np.concatenate(self.windows.pop(line), axis=-2)})

    def finish(self, counts):
        batches, windows = self.progress()
        missing = [i for i, n in enumerate(counts) if i not in batches and covered(windows.get(i, [])) != n]
        if missing:
            raise UnfinishedRunError(f"{self.folder} lacks lines {missing[:10]}: rerun with {{resume}}", self.folder)
        if os.path.isdir(self.output):  # checked before the run: an earlier output, nothing but Parquet files
            shutil.rmtree(self.output)
        os.replace(self.data, self.output)
        shutil.rmtree(self.folder)
