"""OUTPUT.partial/ of `embed_file`: the resumable state of a run, and the checks of INPUT and OUTPUT made before
any work. It imports no torch, so that the command checks its paths before the model and torch load."""

import json
import multiprocessing
import os
import shutil

import filelock
import h5py
import numpy as np
from tqdm import tqdm

from ..errors import DataError, UnfinishedRunError
from ..output_paths import abandoned_work, check_file_output, check_output_apart, hold_lock, release_lock

CHECK_WAIT = 1  # seconds: longer than another process's check holds the lock, far shorter than a run


def check_paths(source, output, overwrite, resume, model=None):
    """Everything about INPUT and OUTPUT that can be wrong, found before any work is done; `model` (its folder) is
    an input too. Returns the absolute path of OUTPUT."""
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
    check_file_output(output, overwrite)
    run = PartialRun(output)
    run.check_not_running()
    if run.exists() and not resume:
        raise UnfinishedRunError(f"{run.folder} holds an interrupted run: pass {{resume}} to continue it, or delete it",
                                 run.folder)
    return output


class PartialRun:
    """OUTPUT.partial/: `run.json` (what is being computed), one `shard-*.npz` per finished batch and one
    `window-LINE-START-STOP.npz` per window of a long line (with the LSTM state after it), each written to a
    temporary name and renamed, so a killed process leaves only whole files."""

    def __init__(self, output):
        self.output = output
        self.folder = output + ".partial"
        self.lock_file = self.folder + ".lock"  # held by the process writing OUTPUT (output_paths.py's locks)
        self.lock = None

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
        """Shards are written only after run.json, so a folder without it holds nothing to resume."""
        return os.path.isfile(os.path.join(self.folder, "run.json"))

    def start(self, settings):
        os.makedirs(self.folder, exist_ok=True)
        self._write("run.json", lambda f: f.write(json.dumps(settings, indent=1).encode()))

    def check(self, settings):
        """Refuse to resume a run whose input or settings differ, naming the first difference (a setting that is a
        dict, such as the model's config, by the key inside it that differs)."""
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
        settings = json.loads(json.dumps(settings))  # as run.json holds them: lists, not tuples
        for key, value in settings.items():
            old = saved.get(key)
            pairs = [(f"{key}.{k}", old.get(k), v) for k, v in value.items()] if isinstance(value, dict) and \
                isinstance(old, dict) else [(key, old, value)]
            for name, old, new in pairs:
                if old != new:
                    raise DataError(
                        f"cannot resume {self.folder}: it was started with {name}={old!r:.200}, now "
                        f"{name}={new!r:.200} (use the first run's settings, or delete the folder to start over)"
                    )

    def progress(self):
        """(line -> shard path of finished batches, line -> sorted [(start, stop, path)] of long-line windows)."""
        batches, windows = {}, {}
        for name in sorted(os.listdir(self.folder)):
            path = os.path.join(self.folder, name)
            if name.startswith("shard-") and name.endswith(".npz"):
                with np.load(path) as shard:
                    batches.update((int(key), path) for key in shard.files)
            elif name.startswith("window-") and name.endswith(".npz"):
                line, start, stop = (int(part) for part in name[len("window-") : -len(".npz")].split("-"))
                windows.setdefault(line, []).append((start, stop, path))
        return batches, windows

    def add_batch(self, arrays):
        """Store a finished batch: {line number: array}."""
        name = f"shard-{min(arrays):09d}.npz"  # batches are disjoint: their first line names them
        self._write(name, lambda f: np.savez(f, **{str(i): a for i, a in arrays.items()}))

    def add_window(self, line, start, vectors, lstm_state):
        state = {
            f"{kind}{k}": s.float().cpu().numpy() for k, layer in enumerate(lstm_state) for kind, s in zip("hc", layer)
        }
        name = f"window-{line:09d}-{start:012d}-{start + vectors.shape[-2]:012d}.npz"
        self._write(name, lambda f: np.savez(f, vectors=vectors, **state))

    def _write(self, name, write):
        path = os.path.join(self.folder, name)
        with open(path + ".tmp", "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)

    def finish(self, output, lines, counts, progress=True):
        """Assemble OUTPUT (written inside the partial folder, then renamed into place), then remove the folder.

        The HDF5 file is written by a child process: a full disk can crash h5py (a segfault, not an exception),
        and the computed lines must survive that with a clear message. Free space is checked first. The child
        reports each line it has written, for a progress bar of this step, which takes minutes on a large input.
        """
        batches, windows = self.progress()
        missing = [i for i, n in enumerate(counts) if i not in batches and covered(windows.get(i, [])) != n]
        if missing:
            raise UnfinishedRunError(f"{self.folder} lacks lines {missing[:10]}: rerun with {{resume}}", self.folder)
        files = [os.path.join(self.folder, name) for name in os.listdir(self.folder)]
        text = sum(len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass")) for line in lines)
        needed = sum(map(os.path.getsize, files)) + text + 1024 * len(lines)  # ~1 KB HDF5 per dataset
        free = shutil.disk_usage(self.folder).free
        keep = f"the computed lines are kept in {self.folder}: free space there and rerun with {{resume}}"
        if needed > free:
            raise UnfinishedRunError(f"not enough disk space for {output}: it needs about {needed / 1e6:,.1f} MB, "
                                     f"{free / 1e6:,.1f} MB are free; {keep}", self.folder)
        staging = os.path.join(self.folder, "assembling.hdf5")
        shards = sorted(set(batches.values()))
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        receive, send = context.Pipe(duplex=False)
        writer = context.Process(target=write_hdf5_reporting, args=(send, staging, shards, windows, lines))
        writer.start()
        send.close()
        failure = None
        with tqdm(total=len(lines), unit="line", desc="writing HDF5", disable=not progress) as bar:
            try:
                while isinstance(message := receive.recv(), int):  # lines written; then None (done) or the error
                    bar.update(message)
                failure = message
            except EOFError:  # it died before reporting
                pass
        writer.join()
        if failure is not None or writer.exitcode != 0:
            failure = failure or f"the HDF5 writer died with exit code {writer.exitcode}"
            if os.path.exists(staging):
                os.remove(staging)
            raise UnfinishedRunError(f"writing {output} failed ({failure}; is the disk full?); {keep}", self.folder)
        os.replace(staging, output)
        shutil.rmtree(self.folder)


def covered(windows):
    """Words covered by a long line's windows, counting only an unbroken run from word 0."""
    end = 0
    for start, stop, _ in windows:
        if start != end:
            break
        end = stop
    return end


def write_hdf5(path, shards, windows, lines, written=lambda lines: None):
    """The output file: each shard's datasets, each long line filled window by window, and sentence_to_index (the
    JSON map of `lines`, built here, in the writer process); `written(n)` is told as each shard's n lines and each
    long line are in."""
    with h5py.File(path, "w") as f:
        for shard in shards:
            with np.load(shard) as arrays:
                for key in arrays.files:
                    f.create_dataset(key, data=arrays[key])
                written(len(arrays.files))
        for line, pieces in windows.items():
            dataset = None
            for start, stop, piece in pieces:
                with np.load(piece) as arrays:
                    vectors = arrays["vectors"]
                if dataset is None:
                    shape = (*vectors.shape[:-2], pieces[-1][1], vectors.shape[-1])
                    dataset = f.create_dataset(str(line), shape=shape, dtype=np.float32)
                dataset[..., start:stop, :] = vectors
            written(1)
        index = json.dumps({line: str(i) for i, line in enumerate(lines)})
        f.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())[0] = index


def write_hdf5_reporting(send, path, *args):
    """`write_hdf5` in the child process: sends the number of lines written as it goes, then None, or the error's
    first line (h5py's own noise goes to a log)."""
    log = os.open(os.path.join(os.path.dirname(path), "assembly.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 2)
    try:
        write_hdf5(path, *args, written=send.send)
        send.send(None)
    except Exception as e:  # reported by the parent, which keeps the shards
        send.send(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

