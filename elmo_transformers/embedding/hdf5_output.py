"""`embed INPUT OUTPUT.hdf5`: one HDF5 file in AllenNLP's layout, one dataset a line keyed by its number, and
`sentence_to_index` (docs/embedding-files.md).

The file is made whole in its structure before the first batch (`create_output`): every line's dataset is allocated
contiguous in the file and `sentence_to_index` written, so that afterwards only the vectors' bytes change, written in
place (`os.pwrite`) by any process of the run. No HDF5 metadata is written while vectors are, so a killed process
cannot leave a file that HDF5 cannot open; when every line is done the file is renamed into OUTPUT: each vector is
written once, never copied. Imports no torch."""

import contextlib
import errno
import json
import multiprocessing
import os
import shutil
import signal

import h5py
import numpy as np

from ..errors import OutputError, OutputExistsError
from ..output_paths import check_file_output, disk_hint


class Hdf5Output:
    """OUTPUT's file while the run makes it: `output.hdf5` in the run's folder (`partial_run.PartialRun`), renamed
    into OUTPUT by `finish`. A long line's windows are written in place as each is done (`windows`)."""

    windows = True

    def __init__(self, folder, output):
        self.output = output
        self.file = os.path.join(folder, "output.hdf5")
        self.fd = self.opened = None  # (opened: the file's device, inode and size, `check_whole`)
        self.offsets = self.shapes = self.dtype = None

    check_output = staticmethod(check_file_output)

    def create(self, lines, shapes, dtype):
        """The file (`create_output`): one dataset of shape `shapes[i]` and `dtype` for line i."""
        create_output(self.file, lines, shapes, dtype)

    def open(self):
        """Open the file for writing vectors into it. Its layout
        (`shapes`, `offsets`: arrays, a row a line) is read one dataset at a time, each closed before the next: HDF5
        holds some 16 KB for each dataset kept open (docs/embedding-files.md, "Memory")."""
        with h5py.File(self.file, "r") as f:
            self.shapes, self.offsets, self.dtype = layout(f)
        self.fd = os.open(self.file, os.O_RDWR | os.O_NOFOLLOW)
        opened = os.fstat(self.fd)
        self.opened = (opened.st_dev, opened.st_ino, opened.st_size)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
        self.fd = None

    def put(self, line, vectors, start=0):
        """Write `vectors` ([..., words, 2P], the file's dtype) into line `line`'s dataset from word `start` on."""
        shape = tuple(self.shapes[line].tolist())
        if (
            vectors.shape[:-2] != shape[:-2]
            or vectors.shape[-1] != shape[-1]
            or start + vectors.shape[-2] > shape[-2]
            or vectors.dtype != self.dtype
        ):
            raise ValueError(
                f"line {line}: vectors {vectors.dtype} {vectors.shape} from word {start} do not fit "
                f"its dataset {self.dtype} {shape}"
            )
        if vectors.size == 0:
            return
        words, width = shape[-2], shape[-1]
        planes = vectors.reshape(-1, vectors.shape[-2] * width)  # one contiguous run of the file per layer
        for k, plane in enumerate(planes):
            offset = int(self.offsets[line]) + vectors.itemsize * (k * words * width + start * width)
            data = memoryview(np.ascontiguousarray(plane)).cast("B")
            while data:  # a regular file takes it whole, but a short write is not an error
                written = os.pwrite(self.fd, data, offset)
                data, offset = data[written:], offset + written

    def add_batch(self, arrays, words=None):
        """Store a finished batch ({line number: array}; `words`, each line's words: not stored here); on the disk
        when it returns."""
        for line, vectors in arrays.items():
            self.put(line, vectors)
        os.fdatasync(self.fd)

    def add_window(self, line, start, vectors):
        """Store a window of long line `line` from word `start` on; on the disk when it returns."""
        self.put(line, vectors, start)
        os.fdatasync(self.fd)

    def check_text(self, lines, units, words, damaged):
        """Raise `damaged(what)` unless the file was made for `lines` (its `sentence_to_index`); the `units` are
        read through (`words`, the words of a unit's lines: not stored here)."""
        try:
            with h5py.File(self.file, "r") as f:
                index = f["sentence_to_index"][0]
        except (OSError, KeyError, ValueError):
            raise damaged(f"its {self.file} cannot be read") from None
        index = index.decode("utf-8", "surrogatepass") if isinstance(index, bytes) else index
        if index != json.dumps({line: str(i) for i, line in enumerate(lines)}):
            raise damaged(f"its {self.file} holds the lines of another text than the input")
        for _ in units:
            pass

    def holds(self, batch):
        """Whether the file holds a journaled batch (its lines): always, once journaled."""
        return True

    def check_whole(self, units, shape, dtype):
        """What keeps the file from being the finished output (one dataset of `shape`, the line's words at -2, and
        `dtype` for each line of the `units`, `batches.Plan.units` of the input), or None: gone, or not the file
        this process opened (`open` read its layout; its text was checked when it was made or resumed,
        `check_text`), whose size no vector changes (its blocks are allocated when it is made)."""
        try:
            now = os.stat(self.file)
        except FileNotFoundError:
            return f"its {self.file} is gone"
        if (now.st_dev, now.st_ino, now.st_size) != self.opened:
            return f"its {self.file} was replaced or rewritten by another file"
        other = f"its {self.file} holds datasets of other shapes than this run's lines"
        lines = 0
        for unit in units:
            lines += len(unit.lines)
            if unit.lines.max() >= len(self.shapes):
                return other
            expected = np.tile(np.array(shape, np.int64), (len(unit.lines), 1))
            expected[:, -2] = unit.counts
            if not np.array_equal(self.shapes[unit.lines], expected):
                return other
        if lines != len(self.shapes) or lines and self.dtype != dtype:
            return other
        return None

    def pending(self):
        """Whether the finished file is still here, not yet put in place (a file already linked as OUTPUT, by a run
        stopped before it removed its own name, is in place)."""
        if not os.path.exists(self.file):
            return False
        return not (os.path.exists(self.output) and os.path.samefile(self.file, self.output))

    def finish(self, overwrite):
        """Put the file in place as OUTPUT: replacing it with `overwrite`, else only where nothing is there (a hard
        link, which fails where a file appeared since the check, then the file's own name removed)."""
        if overwrite:
            os.replace(self.file, self.output)
            return
        try:
            os.link(self.file, self.output)
        except FileExistsError:
            raise OutputExistsError(f"{self.output} exists (pass overwrite=True to replace it)", self.output) from None
        except OSError:  # a file system without hard links
            if os.path.lexists(self.output):
                raise OutputExistsError(
                    f"{self.output} exists (pass overwrite=True to replace it)", self.output
                ) from None
            os.replace(self.file, self.output)
            return
        os.unlink(self.file)


def layout(f):
    """The layout of an open output file `f`: (shapes, [lines, rank] int64; offsets in the file, [lines] int64;
    -1 where a dataset has no bytes; the vectors' dtype, None for no lines), one dataset open at a time."""
    lines = len(f) - 1  # (every key but sentence_to_index)
    offsets, shapes, dtype = np.zeros(lines, np.int64), None, None
    for i in range(lines):
        dataset = h5py.h5d.open(f.id, str(i).encode())
        if shapes is None:
            shapes, dtype = np.zeros((lines, len(dataset.shape)), np.int64), dataset.dtype
        offset = dataset.get_offset()  # (None for a blank line's dataset, which has no bytes)
        shapes[i], offsets[i] = dataset.shape, -1 if offset is None else offset
    return (np.zeros((0, 0), np.int64) if shapes is None else shapes), offsets, dtype


def output_bytes(lines, shapes, dtype):
    """About the size of OUTPUT: the vectors, the text twice (sentence_to_index) and ~1 KB of HDF5 a line."""
    text = lines.utf8_bytes()  # (`inputs.Input`)
    return np.dtype(dtype).itemsize * int(np.prod(shapes, axis=1).sum()) + 2 * text + 1024 * len(lines)


def create_output(path, lines, shapes, dtype):
    """The HDF5 file of AllenNLP's layout, every line's dataset allocated (contiguous, never filled: its bytes come
    later, in place) and `sentence_to_index` written, its blocks reserved on the disk (posix_fallocate): a disk
    too small is found now, before any work, in one line, and leaves nothing.

    HDF5 is written by a child process: a write that fails there (a full disk, a file-size limit) can crash h5py
    (a segfault, not an exception), and this process must survive it to say so (why, and what the child costs:
    docs/embedding-files.md, "The HDF5 layout in a child process")."""
    needed, free = output_bytes(lines, shapes, dtype), shutil.disk_usage(os.path.dirname(path)).free
    if needed > free:
        raise OutputError(
            f"not enough disk space for {os.path.basename(path)} in {os.path.dirname(path)}: it needs "
            f"about {needed / 1e6:,.1f} MB, {free / 1e6:,.1f} MB are free: free space there and rerun",
            path,
        )
    temporary = path + ".tmp"
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_write_layout, args=(send, temporary, lines, shapes, np.dtype(dtype).str))
    try:
        child.start()
        send.close()
        try:
            failure = receive.recv()  # None when done, else the error's first line
        except EOFError:
            failure = "it died"
        child.join()
        if failure is None and child.exitcode != 0:
            failure = "it died"
        if failure == "it died":
            failure = f"the HDF5 writer died with exit code {child.exitcode}"
        if failure is not None:
            raise OutputError(f"cannot make {path}: {failure} (is the disk full, or a file-size limit reached?)", path)
        fd = os.open(temporary, os.O_RDWR)
        try:
            try:
                os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system that cannot reserve blocks
                    raise
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError as e:
        raise OutputError(f"cannot make {path}: {e.strerror or e}{disk_hint(e.errno)}", path) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        if child.is_alive():
            child.kill()


def die_with_parent():
    """Have the kernel kill this (child) process when its parent dies (Linux's PR_SET_PDEATHSIG), so that a parent
    killed with `kill -9` leaves no child writing a file the next run would meet
    (docs/embedding-files.md, "The HDF5 layout in a child process")."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux
        pass


def _write_layout(send, path, lines, shapes, dtype):
    """`create_output`'s HDF5 part, in the child process: sends None when done, or the error's first line (h5py's
    own noise is silenced)."""
    die_with_parent()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    try:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        with h5py.File(path, "w") as f:
            for i, shape in enumerate(shapes):
                f.create_dataset(str(i), shape=tuple(shape.tolist()), dtype=np.dtype(dtype), dcpl=dcpl)
            index = json.dumps({line: str(i) for i, line in enumerate(lines)})
            f.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())[0] = index
        send.send(None)
    except Exception as e:  # noqa: BLE001 - reported by the parent
        send.send(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
