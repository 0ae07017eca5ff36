"""OUTPUT.partial/ of `embed_file`: the resumable state of a run, and the checks of INPUT and OUTPUT made before
any work. It imports no torch, so that the command checks its paths before the model and torch load."""

import contextlib
import errno
import json
import math
import multiprocessing
import os
import shutil

import filelock
import h5py
import numpy as np

from ..errors import DataError, OutputError, OutputExistsError, UnfinishedRunError
from ..output_paths import abandoned_work, check_file_output, check_output_apart, hold_lock, release_lock

CHECK_WAIT = 1  # seconds: longer than another process's check holds the lock, far shorter than a run
FORMAT = 2  # run.json's "format": OUTPUT written in place (1, unnamed: batches in .npz files, assembled at the end)


def check_paths(source, output, overwrite, resume, model=None, file_format="hdf5"):
    """Everything about INPUT and OUTPUT (a file, or a folder for `file_format` "parquet") that can be wrong, found
    before any work is done; `model` (its folder) is an input too. Returns the absolute path of OUTPUT."""
    if os.fspath(output) == "-":
        raise DataError("the output - would be a file named '-' (HDF5 cannot be written to stdout): give the path "
                        "of the file to write, ./- for a file of that name")
    output = os.path.abspath(output)
    if isinstance(source, (str, os.PathLike)) and source != "-":
        try:
            open(source, "rb").close()
        except OSError as e:
            raise OSError(f"cannot read the input {source}: {e.strerror or e}") from None
    check_output_apart(output, [source, model])
    (check_folder_output if file_format == "parquet" else check_file_output)(output, overwrite)
    run = PartialRun(output)
    run.check_not_running()
    if run.exists() and not resume:
        raise UnfinishedRunError(f"{run.folder} holds an interrupted run: pass {{resume}} to continue it, or delete it",
                                 run.folder)
    return output


def check_folder_output(output, overwrite):
    """Refuse, before any work, an OUTPUT_DIR that cannot be written: a file, a missing parent folder, or an existing
    folder (with `overwrite`, only one that holds nothing but Parquet files: an earlier output)."""
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise OutputError(f"{output}: cannot write it: {parent} is not an existing folder", output)
    if os.path.lexists(output) and not os.path.isdir(output):
        raise OutputError(f"{output} is a file: give the path of a folder for the Parquet files", output)
    if os.path.isdir(output):
        if not overwrite:
            raise OutputExistsError(f"{output} exists (pass {{overwrite}} to replace it)", output)
        others = [name for name in os.listdir(output) if not name.endswith(".parquet")]
        if others:
            raise OutputError(f"{output} holds {others[0]!r}, not only Parquet files: it is not an earlier output, "
                              "so it is not replaced; choose another folder", output)


class PartialRun:
    """OUTPUT.partial/, the resumable state of a run:

    - `run.json`: what is being computed (written last when a run starts: a folder without it holds nothing);
    - `output.hdf5`: OUTPUT itself, whole in its structure from the start (`create_output`): every line's dataset
      is allocated contiguous in the file and `sentence_to_index` written, so that afterwards only the vectors' bytes
      change, written in place (`os.pwrite`) by any process of the run. No HDF5 metadata is written while vectors
      are, so a killed process cannot leave a file that HDF5 cannot open; when every line is done the file is
      renamed into OUTPUT: each vector is written once, never copied;
    - `done-RANK.txt`: the journal of the process of rank RANK, one line of line numbers per batch, appended once
      the batch's bytes are on the disk (fdatasync): a line is finished when a journal names it;
    - `window-LINE-START-STOP.npz`: the LSTM state after a window of a long line (whose vectors are in
      output.hdf5), written to a temporary name and renamed once the window's bytes are on the disk.
    """

    def __init__(self, output):
        self.output = output
        self.folder = output + ".partial"
        self.file = os.path.join(self.folder, "output.hdf5")
        self.lock_file = self.folder + ".lock"  # held by the process writing OUTPUT (output_paths.py's locks)
        self.lock = None
        self.fd = self.journal = None
        self.offsets = self.shapes = None

    def _refuse(self):
        raise DataError(f"{self.output} is being written by another run, which holds {self.lock_file}: wait for it "
                        "to finish or stop it")

    def check_not_running(self):
        """Refuse while another run, still alive, writes the same OUTPUT. (A check holds the lock for a moment; the
        processes of one run check at once, so each waits out the others' checks.)"""
        with abandoned_work(self.lock_file, CHECK_WAIT) as free:
            if not free:
                self._refuse()

    def claim(self):
        """Announce this process as the writer of OUTPUT, taking over from a run that was killed."""
        try:
            self.lock = hold_lock(self.lock_file, CHECK_WAIT)
        except filelock.Timeout:
            self._refuse()

    def release(self):
        if self.lock is not None:
            release_lock(self.lock)
            self.lock = None

    def exists(self):
        """The files of a run are made before run.json, so a folder without it holds nothing to resume."""
        return os.path.isfile(os.path.join(self.folder, "run.json"))

    def start(self, settings, lines, shapes):
        """Make the folder, OUTPUT's file (`create_output`: one dataset of shape `shapes[i]` for line i) and, last,
        run.json. A failure (a full disk) leaves nothing of it."""
        os.makedirs(self.folder, exist_ok=True)
        try:
            create_output(self.file, lines, shapes)
            _write_atomically(os.path.join(self.folder, "run.json"),
                              lambda f: f.write(json.dumps(settings, indent=1).encode()))
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def check(self, settings):
        """Refuse to resume a run whose input or settings differ, naming the first difference (a setting that is a
        dict, such as the model's config, by the key inside it that differs). Every key either side has is
        compared: a setting the first run recorded and this one lacks (or the reverse) is a difference too."""
        path = os.path.join(self.folder, "run.json")
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
        except ValueError as e:  # not JSON, not UTF-8
            saved = e
        if not isinstance(saved, dict):
            reason = f"not valid JSON ({saved})" if isinstance(saved, ValueError) else "not a JSON object"
            raise DataError(f"cannot resume {self.folder}: its {path} is {reason}, so what it computed is unknown: "
                            "delete the folder to start over")
        if saved.get("format") != FORMAT:
            raise DataError(f"cannot resume {self.folder}: an older version of embed wrote it (batches in .npz files, "
                            "not output.hdf5): finish it with that version, or delete the folder to start over")
        settings = json.loads(json.dumps(settings))  # as run.json holds them: lists, not tuples
        for key in [*settings, *(k for k in saved if k not in settings)]:
            old, value = saved.get(key), settings.get(key)
            pairs = [(f"{key}.{k}", old.get(k), value.get(k)) for k in [*value, *(k for k in old if k not in value)]] \
                if isinstance(value, dict) and isinstance(old, dict) else [(key, old, value)]
            for name, old, new in pairs:
                if old != new:
                    raise DataError(
                        f"cannot resume {self.folder}: it was started with {name}={old!r:.200}, now "
                        f"{name}={new!r:.200} (use the first run's settings, or delete the folder to start over)"
                    )

    def progress(self):
        """(set of the lines of finished batches, line -> sorted [(start, stop, path)] of long-line windows)."""
        batches, windows = set(), {}
        for name in sorted(os.listdir(self.folder)):
            path = os.path.join(self.folder, name)
            if name.startswith("done-") and name.endswith(".txt"):
                with open(path, encoding="ascii") as f:
                    for entry in f.read().split("\n")[:-1]:  # a last entry without its line break is not done
                        batches.update(map(int, entry.split()))
            elif name.startswith("window-") and name.endswith(".npz"):
                line, start, stop = (int(part) for part in name[len("window-") : -len(".npz")].split("-"))
                windows.setdefault(line, []).append((start, stop, path))
        return batches, windows

    def finished_lines(self):
        """How many lines (and long lines begun) this folder keeps: 0 where there is none."""
        if not self.exists():
            return 0
        batches, windows = self.progress()
        return len(batches) + len(windows)

    def open(self, rank, words_of=None):
        """Open OUTPUT's file for writing vectors into it, and this process's journal (`words_of(line)`: the words
        of a line, for an output that stores them)."""
        with h5py.File(self.file, "r") as f:
            self.shapes = [f[str(i)].shape for i in range(len(f) - 1)]
            self.offsets = [f[str(i)].id.get_offset() for i in range(len(self.shapes))]
        self.fd = os.open(self.file, os.O_RDWR)
        self.open_journal(rank)

    def open_journal(self, rank):
        """This process's journal, for appending; an entry cut short (a crash mid-write) is cut off first, so that
        the next entry does not run on from it."""
        path = os.path.join(self.folder, f"done-{rank}.txt")
        self.journal = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        with open(path, "rb") as f:
            entries = f.read()
        if entries and not entries.endswith(b"\n"):
            os.ftruncate(self.journal, entries.rfind(b"\n") + 1)

    def note_done(self, lines):
        """Journal `lines` as finished: their vectors are on the disk."""
        os.write(self.journal, (" ".join(map(str, lines)) + "\n").encode())
        os.fsync(self.journal)

    def close(self):
        for fd in (self.fd, self.journal):
            if fd is not None:
                os.close(fd)
        self.fd = self.journal = None

    def _put(self, line, vectors, start=0):
        """Write `vectors` ([..., words, 2P] float32) into line `line`'s dataset from word `start` on."""
        shape = self.shapes[line]
        if vectors.shape[:-2] != shape[:-2] or vectors.shape[-1] != shape[-1] or \
                start + vectors.shape[-2] > shape[-2] or vectors.dtype != np.float32:
            raise ValueError(f"line {line}: vectors {vectors.dtype} {vectors.shape} from word {start} do not fit "
                             f"its dataset {shape}")
        if vectors.size == 0:
            return
        words, width = shape[-2], shape[-1]
        planes = vectors.reshape(-1, vectors.shape[-2] * width)  # one contiguous run of the file per layer
        for k, plane in enumerate(planes):
            offset = self.offsets[line] + 4 * (k * words * width + start * width)
            data = memoryview(np.ascontiguousarray(plane)).cast("B")
            while data:  # a regular file takes it whole, but a short write is not an error
                written = os.pwrite(self.fd, data, offset)
                data, offset = data[written:], offset + written

    def add_batch(self, arrays):
        """Store a finished batch ({line number: float32 array}) in OUTPUT's file; journal it once on the disk."""
        for line, vectors in arrays.items():
            self._put(line, vectors)
        os.fdatasync(self.fd)
        self.note_done(arrays)

    def add_window(self, line, start, vectors, lstm_state):
        """Store a window of long line `line` from word `start` on, and the LSTM state after it."""
        self._put(line, vectors, start)
        os.fdatasync(self.fd)
        state = {
            f"{kind}{k}": s.float().cpu().numpy() for k, layer in enumerate(lstm_state) for kind, s in zip("hc", layer)
        }
        name = f"window-{line:09d}-{start:012d}-{start + vectors.shape[-2]:012d}.npz"
        _write_atomically(os.path.join(self.folder, name), lambda f: np.savez(f, **state))

    def finish(self, counts):
        """OUTPUT, complete: the file renamed into place once every line is done, then the folder removed."""
        batches, windows = self.progress()
        missing = [i for i, n in enumerate(counts) if i not in batches and covered(windows.get(i, [])) != n]
        if missing:
            raise UnfinishedRunError(f"{self.folder} lacks lines {missing[:10]}: rerun with {{resume}}", self.folder)
        os.replace(self.file, self.output)
        shutil.rmtree(self.folder)


def _write_atomically(path, write):
    """`write(f)` into a temporary file beside `path`, then on the disk and renamed: `path` is whole or absent, and
    a failure (a full disk) leaves no temporary file."""
    try:
        with open(path + ".tmp", "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + ".tmp")
        raise


def output_bytes(lines, shapes):
    """About the size of OUTPUT: the float32 vectors, the text twice (sentence_to_index) and ~1 KB of HDF5 a line."""
    text = sum(len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass")) for line in lines)
    return 4 * sum(math.prod(shape) for shape in shapes) + 2 * text + 1024 * len(lines)


def create_output(path, lines, shapes):
    """The HDF5 file of AllenNLP's layout, every line's dataset allocated (contiguous, never filled: its bytes come
    later, in place) and `sentence_to_index` written, its blocks reserved on the disk (posix_fallocate): a disk
    too small is found now, before any work, in one line, and leaves nothing.

    HDF5 is written by a child process: a write that fails there (a full disk, a file-size limit) can crash h5py
    (a segfault, not an exception), and this process must survive it to say so."""
    needed, free = output_bytes(lines, shapes), shutil.disk_usage(os.path.dirname(path)).free
    if needed > free:
        raise OutputError(f"not enough disk space for {os.path.basename(path)} in {os.path.dirname(path)}: it needs "
                          f"about {needed / 1e6:,.1f} MB, {free / 1e6:,.1f} MB are free: free space there and rerun",
                          path)
    temporary = path + ".tmp"
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_write_layout, args=(send, temporary, lines, shapes))
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
            raise OutputError(f"cannot make {path}: {failure} (is the disk full?)", path)
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
        raise OutputError(f"cannot make {path}: {e.strerror or e} (is the disk full?)", path) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        if child.is_alive():
            child.kill()


def _write_layout(send, path, lines, shapes):
    """`create_output`'s HDF5 part, in the child process: sends None when done, or the error's first line (h5py's
    own noise is silenced)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    try:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        with h5py.File(path, "w") as f:
            for i, shape in enumerate(shapes):
                f.create_dataset(str(i), shape=shape, dtype=np.float32, dcpl=dcpl)
            index = json.dumps({line: str(i) for i, line in enumerate(lines)})
            f.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())[0] = index
        send.send(None)
    except Exception as e:  # noqa: BLE001 - reported by the parent
        send.send(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def covered(windows):
    """Words covered by a long line's windows, counting only an unbroken run from word 0."""
    end = 0
    for start, stop, _ in windows:
        if start != end:
            break
        end = stop
    return end
