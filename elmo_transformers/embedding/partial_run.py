"""OUTPUT.partial/ of `embed_file`: the resumable state of a run, whichever format it writes (`hdf5_output`,
`parquet_output`), the LSTM state kept after each window of a long line (written and read here), and the checks of
INPUT and OUTPUT made before any work. It imports no torch (reading a window's state imports it), so that a run's
paths are checked before the model and torch load."""

import array
import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
from itertools import islice

import filelock
import numpy as np

from ..errors import DataError, OutputError, OutputExistsError, SettingDiffersError, UnfinishedRunError
from ..output_paths import (
    abandoned_work,
    check_output_apart,
    hold_lock,
    lock_is_held,
    release_lock,
    write_file_atomically,
)
from .batches import LongLine
from .hdf5_output import Hdf5Output
from .parquet_output import ParquetOutput
from .settings import ARGUMENTS

CHECK_WAIT = 1  # seconds: longer than another process's check holds the lock, far shorter than a run
FINISHED = "finished.json"  # in OUTPUT.partial/: every line is done; left: putting OUTPUT in place, removing the folder
OUTPUTS = {"hdf5": Hdf5Output, "parquet": ParquetOutput}  # what `embed --format` writes


def check_paths(source, output, settings, model=None):
    """Everything about INPUT `source` and OUTPUT (a file, or a folder for `settings.file_format` "parquet") that can
    be wrong, found before any work is done; `model` (its folder) is an input too. Returns (the absolute path of
    OUTPUT, whether `settings.resume` found the run finished and completed it: nothing is left to do)."""
    file_format, overwrite, resume = settings.file_format, settings.overwrite, settings.resume
    if os.fspath(output) == "-":
        raise DataError(
            "the output - would be a file named '-' (HDF5 cannot be written to stdout): give the path "
            "of the file to write, ./- for a file of that name"
        )
    if file_format == "hdf5" and os.fspath(output).endswith((os.sep, "/")):
        raise OutputError(
            f"{output}: a path that ends in / names a folder, and HDF5 is one file: give the file's "
            "path without the trailing /",
            output,
        )
    output = os.path.abspath(output)
    if isinstance(source, (str, os.PathLike)) and source != "-":
        check_readable(source)
    check_output_apart(output, [source, model])
    run = PartialRun(output, file_format)
    run.check_folder()
    if run.finished():  # a run killed after it finished: completed first, then OUTPUT is what it made
        run.check_not_running()
        run.complete_finished(overwrite)
        if resume:
            return output, True
    if resume and not overwrite and not run.exists() and os.path.lexists(output):
        run.check_not_running()  # (an empty folder and the lock file a killed run left go)
        raise OutputExistsError(
            f"{output} exists and there is no run to resume in {run.folder} (a run stopped as "
            "it ended leaves its finished output so): to replace it, rerun with overwrite=True",
            output,
        )
    OUTPUTS[file_format].check_output(output, overwrite)
    run.check_not_running()
    if run.exists() and not resume:
        raise UnfinishedRunError(
            f"{run.folder} holds an interrupted run: pass resume=True to continue it, or delete it", run.folder
        )
    return output, False


def check_readable(source):
    """Refuse an input path that cannot be read, without opening a stream (a FIFO): opening and closing one ends what
    writes into it (SIGPIPE), and the run's own open would then wait for ever."""
    try:
        mode = os.stat(source).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if stat.S_ISREG(mode):
            open(source, "rb").close()
        elif not os.access(source, os.R_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as e:
        raise OSError(f"cannot read the input {source}: {e.strerror or e}") from None


class PartialRun:
    """OUTPUT.partial/, the resumable state of a run:

    - `run.json`: what is being computed (written last when a run starts: a folder without it holds nothing);
    - the output while it is made (`writer`: an `Hdf5Output` or a `ParquetOutput`), renamed into OUTPUT at the end;
    - `done-RANK.txt`: the journal of the process of rank RANK, one line of line numbers per batch, appended once
      the batch is on the disk (fsync): a line is finished when a journal names it;
    - `window-LINE-START-STOP.npz` (HDF5): the LSTM state after a window of a long line (whose vectors are in the
      output), written to a temporary name and renamed once the window's vectors are on the disk (`add_window`), read
      by the run that resumes the line (`lstm_state`);
    - `finished.json`: every line is done and the output checked whole (written before OUTPUT is put in place,
      removed after every other file of the folder): a run stopped between that and removing the folder is completed
      by the next command on the same OUTPUT (`complete_finished`); an empty folder left after it is removed.
    """

    def __init__(self, output, file_format="hdf5"):
        self.output = output
        self.folder = output + ".partial"
        self.writer = OUTPUTS[file_format](self.folder, output)
        self.lock_file = self.folder + ".lock"  # held by the process writing OUTPUT (output_paths.py's locks)
        self.lock = self.journal = None
        self.output_in_place = False  # set by `_complete` once OUTPUT is whole in place: what is left is removal

    def check_folder(self):
        """Refuse a folder this run would follow elsewhere or cannot use: OUTPUT.partial that is a symbolic link or
        not a folder, or that holds a symbolic link (a journal, data/): a run writes and removes only what it made,
        never through a link."""
        if os.path.islink(self.folder):
            raise OutputError(
                f"{self.folder} is a symbolic link, where a run keeps its own folder: remove the link "
                "(not what it points to) and rerun",
                self.folder,
            )
        if os.path.lexists(self.folder) and not os.path.isdir(self.folder):
            raise OutputError(f"{self.folder} is a file, not the folder of a run: move it away and rerun", self.folder)
        if not os.path.isdir(self.folder):
            return
        data = os.path.join(self.folder, "data")
        inside = [
            *os.scandir(self.folder),
            *(os.scandir(data) if os.path.isdir(data) and not os.path.islink(data) else []),
        ]
        link = next((entry.path for entry in inside if entry.is_symlink()), None)
        if link is not None:
            raise OutputError(
                f"{link} is a symbolic link, which a run never makes nor follows: remove it (or "
                f"delete {self.folder}) and rerun",
                link,
            )

    def _refuse(self):
        raise DataError(
            f"{self.output} is being written by another run, which holds {self.lock_file}: wait for it "
            "to finish or stop it"
        )

    def check_not_running(self):
        """Refuse while another run, still alive, writes the same OUTPUT; else remove an empty OUTPUT.partial/ (a run
        killed as it removed its folder left it: it holds nothing). (A check holds the lock for a moment; the
        processes of one run check at once, so each waits out the others' checks.)"""
        with abandoned_work(self.lock_file, CHECK_WAIT) as free:
            if not free:
                self._refuse()
            with contextlib.suppress(OSError):  # (not empty, or not there)
                os.rmdir(self.folder)

    def claim(self):
        """Announce this process as the writer of OUTPUT, taking over from a run that was killed; the folder is
        checked again once the lock is held (`check_folder`)."""
        try:
            self.lock = hold_lock(self.lock_file, CHECK_WAIT)
        except filelock.Timeout:
            self._refuse()
        self.check_folder()

    def check_lock(self):
        """Refuse to finish when the lock this process holds is no longer at its path (removed or replaced by
        hand): another run may then have taken the folder and be writing it beside this one."""
        if self.lock is not None and not lock_is_held(self.lock):
            raise UnfinishedRunError(
                f"{self.lock_file} was removed or replaced while the run worked, so another run may be writing "
                f"{self.folder} beside this one: nothing is put in place; once no other run works on "
                f"{self.output}, rerun with resume=True",
                self.folder,
            )

    def release(self):
        if self.lock is not None:
            release_lock(self.lock)
            self.lock = None

    def exists(self):
        """The files of a run are made before run.json, so a folder without it holds nothing to resume."""
        return os.path.isfile(os.path.join(self.folder, "run.json"))

    def start(self, settings, lines, shapes):
        """Make the folder, the output (`lines`: the `inputs.Input`; one array of shape `shapes[i]` for line i, in
        `settings.output_dtype`, where the output is made whole first: HDF5) and, last, run.json
        (`settings.record()`). A failure (a full disk) leaves nothing of it."""
        os.makedirs(self.folder, exist_ok=True)
        self.check_folder()
        try:
            self.writer.create(lines, shapes, settings.output_dtype)
            write_file_atomically(os.path.join(self.folder, "run.json"), json.dumps(settings.record(), indent=1))
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def check(self, settings):
        """Refuse to resume a run whose input or settings (an `EmbedSettings`) differ from those run.json records,
        naming the first difference (`EmbedSettings.differences`)."""
        path = os.path.join(self.folder, "run.json")
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
        except (ValueError, RecursionError) as e:  # not JSON, not UTF-8, nested too deep
            saved = ValueError(str(e).splitlines()[0] if str(e) else type(e).__name__)
        if not isinstance(saved, dict):
            reason = f"not valid JSON ({saved})" if isinstance(saved, ValueError) else "not a JSON object"
            raise DataError(
                f"cannot resume {self.folder}: its {path} is {reason}, so what it computed is unknown: "
                "delete the folder to start over"
            )
        differences = settings.differences(saved)
        if not differences:
            return
        name, old, new = differences[0]
        if name in settings.__dataclass_fields__ and name not in saved:  # (a run.json edited, or cut)
            raise self.damaged(f"its run.json lacks {name}")
        argument = ARGUMENTS.get(name, name)
        raise SettingDiffersError(
            f"cannot resume {self.folder}: it was started with {argument}={old!r:.200}, now {argument}={new!r:.200} "
            "(use the first run's arguments, or delete the folder to start over)",
            self.folder,
            name,
            old,
            new,
        )

    def damaged(self, what):
        return DataError(
            f"cannot resume {self.folder}: {what}, so what it computed is unknown: delete the folder to start over"
        )

    def journal_entries(self):
        """The lines of each journaled batch, [line, ...] one at a time, of every process's journal (read a line at a
        time: a journal names every finished line)."""
        for name in sorted(os.listdir(self.folder)):
            if name.startswith("done-") and name.endswith(".txt"):
                for entry in own_lines(os.path.join(self.folder, name)):
                    try:
                        lines = [int(line) for line in entry.decode("ascii").split()]
                    except ValueError:
                        raise self.damaged(f"its journal {name} holds {entry[:40]!r}, not line numbers") from None
                    yield lines

    def progress(self):
        """What is done (`Progress`): each journaled batch, done while its output is still there (`writer.holds`: a
        Parquet file removed by hand is computed again), and the windows of long lines."""
        progress = Progress((entry, self.writer.holds(entry)) for entry in self.journal_entries())
        windows = progress.windows
        for name in sorted(os.listdir(self.folder)):
            if name.startswith("window-") and name.endswith(".npz"):
                try:
                    line, start, stop = (int(part) for part in name[len("window-") : -len(".npz")].split("-"))
                except ValueError:
                    raise self.damaged(f"it holds {name}, which is not the name of a window") from None
                windows.setdefault(line, []).append((start, stop, os.path.join(self.folder, name)))
        return progress

    def check_progress(self, lines, units, words, progress):
        """Refuse to resume a folder whose journals name a batch this run does not make (`units`: its batches and
        long lines, `batches.Plan.units`, as `progress`, its `Progress`, holds them), or whose output holds another
        text than `lines` (`words(unit)`: the words of a unit's lines): an edited or foreign folder would finish with
        vectors never computed, or mix two texts' vectors in one output."""
        self.writer.check_text(lines, (progress.match(unit) for unit in units), words, self.damaged)
        unmatched = progress.unmatched()
        if unmatched is not None:
            entry = next(islice((entry for entry in self.journal_entries() if entry), unmatched, None))
            raise self.damaged(f"its journals name lines {entry[:5]} as one batch, which this run does not make")

    def finished_lines(self):
        """How many lines (and long lines begun) this folder keeps: 0 where there is none."""
        if not self.exists():
            return 0
        return self.progress().finished_lines()

    def open(self, rank):
        """Open the output for writing and this process's journal."""
        self.writer.open()
        self.open_journal(rank)

    def open_journal(self, rank):
        """This process's journal, for appending; an entry cut short (a crash mid-write) is cut off first, so that
        the next entry does not run on from it."""
        path = os.path.join(self.folder, f"done-{rank}.txt")
        try:  # (less the umask, as open's; never through a link: O_NOFOLLOW)
            self.journal = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o666)
        except OSError as e:
            raise OutputError(
                f"{path}: cannot open the journal: {e.strerror or e} (a symbolic link is never "
                f"followed): delete {self.folder} to start over",
                path,
            ) from None
        end = last_line_end(self.journal)
        if end != os.fstat(self.journal).st_size:
            os.ftruncate(self.journal, end)

    def close(self):
        self.writer.close()
        if self.journal is not None:
            os.close(self.journal)
        self.journal = None

    def note_done(self, lines):
        """Journal `lines` as finished: they are on the disk."""
        os.write(self.journal, (" ".join(map(str, lines)) + "\n").encode())
        os.fsync(self.journal)

    def add_batch(self, arrays, words):
        """Store a finished batch ({line number: array}; `words`: each line's words, for an output that stores them);
        journal its lines once they are on the disk."""
        self.writer.add_batch(arrays, words)
        self.note_done(arrays)

    def add_window(self, unit, start, vectors, lstm_state, words):
        """Store a window of the long line `unit` (a `batches.LongLine`) from word `start` on, and the LSTM state
        after it (where the output keeps windows; otherwise the line is stored as a batch once whole, `words()`
        giving its words)."""
        line = unit.line
        if not self.writer.windows:
            whole = self.writer.add_window(line, start, vectors, unit.words)
            if whole is not None:
                self.add_batch({line: whole}, [words()])
            return
        self.writer.add_window(line, start, vectors)
        state = {
            f"{kind}{k}": s.float().cpu().numpy() for k, layer in enumerate(lstm_state) for kind, s in zip("hc", layer)
        }
        name = f"window-{line:09d}-{start:012d}-{start + vectors.shape[-2]:012d}.npz"
        write_file_atomically(os.path.join(self.folder, name), lambda f: np.savez(f, **state))

    def lstm_state(self, window, model):
        """The LSTM state `add_window` stored after `window` (a `(start, stop, path)` of `progress()`), as
        `lstm_state` for `model` (its device and dtype)."""
        import torch

        like = next(model.parameters())
        try:
            with np.load(window[2]) as saved:
                return tuple(
                    tuple(torch.from_numpy(saved[f"{kind}{k}"]).to(like.device, like.dtype) for kind in "hc")
                    for k in range(model.config.n_layers)
                )
        except (OSError, ValueError, KeyError, EOFError):  # (np.load's errors for a cut or foreign file)
            raise DataError(
                f"cannot resume: the window state {window[2]} cannot be read: delete {self.folder} to start over"
            ) from None

    def finish(self, settings, units, shape):
        """OUTPUT, complete: once every line is done and what is put in place is whole (`check_whole`: the run of
        `settings`, its `units` made again from the input, `batches.Plan.units`; line i's vectors of `shape` with
        its words at -2), marked finished (FINISHED), put in place and the folder removed; OUTPUT is checked again
        first (something may have appeared there while the run worked: it is replaced only under the rules of
        `settings.overwrite`, as before the run)."""
        if not os.path.isdir(self.folder):
            raise OutputError(
                f"{self.folder} was removed while the run worked, and the vectors with it: run again", self.folder
            )
        progress, missing, first_missing = self.progress(), 0, []

        def counted(units):
            nonlocal missing
            for unit in units:
                if not progress.done(unit):
                    missing += len(unit.lines)
                    first_missing.extend(unit.lines[: 10 - len(first_missing)].tolist())
                yield unit

        units = counted(units)
        problem = self.writer.check_whole(units, shape, settings.output_dtype)
        for _ in units:  # (the writer stops at the first problem; every line is counted)
            pass
        if missing:
            raise UnfinishedRunError(
                f"{self.folder} lacks the vectors of {missing:,} line{'s' * (missing != 1)} (numbered from 0: "
                f"{sorted(first_missing)}), though the run computed them (removed while it worked?): {self.output} is "
                "not written; rerun with resume=True to compute them",
                self.folder,
            )
        self.check_record(settings)
        if problem:
            self.unusable(problem)
        self.check_lock()
        write_file_atomically(os.path.join(self.folder, FINISHED), json.dumps({"overwrite": settings.overwrite}))
        self._complete(settings.overwrite)

    def check_record(self, settings):
        """Refuse to put OUTPUT in place unless run.json records `settings`, the run that computed it."""
        try:
            saved = json.loads(read_own(os.path.join(self.folder, "run.json")))
        except (OSError, ValueError, RecursionError):
            saved = None
        differences = settings.differences(saved) if isinstance(saved, dict) else None
        if differences is None:
            self.unusable("its run.json is gone or unreadable")
        if differences:
            self.unusable(f"its run.json no longer records this run ({differences[0][0]} differs)")

    def unusable(self, what):
        raise OutputError(
            f"{self.output} is not written: {what}, so the folder no longer holds what this run "
            f"computed (changed while it worked?): delete {self.folder} and run again",
            self.folder,
        )

    def _complete(self, overwrite):
        """Put the finished output in place (unless it is there already), then remove the folder, FINISHED last:
        until then the next command on OUTPUT completes the run (`complete_finished`), wherever it stopped."""
        self.check_folder()
        if self.writer.pending():
            try:
                self.writer.check_output(self.output, overwrite)
                self.writer.finish(overwrite)
            except OutputError as e:
                what = "" if isinstance(e, OutputExistsError) else " and holds what embed did not write"
                raise UnfinishedRunError(
                    f"{self.output} appeared while the run worked{what}: it is not replaced; every line is done and "
                    f"kept in {self.folder}: move {self.output} away and rerun with resume=True",
                    self.folder,
                ) from None
        self.output_in_place = True
        self.remove_folder()

    def remove_folder(self):
        """Remove this run's folder (never through a link), FINISHED last, then the empty folder."""
        for entry in os.scandir(self.folder):
            if entry.name == FINISHED:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.folder, FINISHED))
        os.rmdir(self.folder)

    def finished(self):
        """Whether every line of this folder's run is done (FINISHED): what is left is putting OUTPUT in place."""
        return os.path.isfile(os.path.join(self.folder, FINISHED))

    def complete_finished(self, overwrite=False):
        """Complete a run that was killed after it finished (FINISHED written, OUTPUT put in place or not, the folder
        not removed), before a new command on the same OUTPUT checks it: that run's OUTPUT is put in place (by its
        own `overwrite` rule, or this command's) and its folder removed."""
        try:
            with open(os.path.join(self.folder, FINISHED), encoding="utf-8") as f:
                recorded = json.load(f).get("overwrite") is True
        except (OSError, ValueError, AttributeError):
            recorded = False
        self._complete(overwrite or recorded)


class Progress:
    """What a run's folder holds as done (`PartialRun.progress`), as every process reads it before any writes: each
    journaled batch by its first line (its key, `batches.Batch.key`), with a digest of its lines and their number
    (some 40 bytes a batch, nothing a line), and the windows of long lines ({line: [(start, stop, path)]})."""

    def __init__(self, entries):
        """`entries`: (lines, whether the output holds them) of each journal entry, one at a time (never every
        journaled line at once)."""
        keys, digests, sizes, held = array.array("q"), array.array("Q"), array.array("q"), array.array("b")
        for entry, holds in entries:
            if entry:
                keys.append(entry[0])
                digests.append(lines_digest(entry))
                sizes.append(len(entry))
                held.append(holds)
        self.keys, self.digests, self.sizes = np.array(keys, np.int64), np.array(digests, np.uint64), np.array(sizes)
        self.held = np.array(held, bool)
        self.order = np.argsort(self.keys, kind="stable")
        self.sorted_keys = self.keys[self.order]
        self.matched = np.zeros(len(self.keys), bool)
        self.windows = {}  # (`PartialRun.progress` adds them)

    def _entries(self, unit):
        """The entries (indices) that journal `unit`: its key and the digest of its lines."""
        lo, hi = np.searchsorted(self.sorted_keys, [unit.key, unit.key + 1])
        found = self.order[lo:hi]
        return found[self.digests[found] == lines_digest(unit.lines)] if found.size else found

    def done(self, unit):
        """Whether `unit` (a `batches.Batch` or `LongLine`) is done: journaled, or a long line's windows cover it."""
        if self.held[self._entries(unit)].any():
            return True
        return isinstance(unit, LongLine) and covered(self.windows.get(unit.line, [])) >= unit.words

    def match(self, unit):
        """Mark the entries that journal `unit` as this run's; returns it."""
        self.matched[self._entries(unit)] = True
        return unit

    def unmatched(self):
        """The index of the first entry that `match` found no unit for, or None."""
        left = np.flatnonzero(~self.matched)
        return int(left[0]) if left.size else None

    def finished_lines(self):
        """The lines of the journaled batches the output holds (each batch once) and the long lines begun."""
        if not self.held.any():
            return len(self.windows)
        keys = np.stack([self.keys[self.held], self.digests[self.held].view(np.int64)])
        _, first = np.unique(keys, axis=1, return_index=True)
        return int(self.sizes[self.held][first].sum()) + len(self.windows)


def lines_digest(lines):
    """A 64-bit digest of a batch's line numbers, whatever their order."""
    numbers = np.sort(np.asarray(lines, np.int64))
    return int.from_bytes(hashlib.blake2b(numbers.tobytes(), digest_size=8).digest(), "little")


def covered(windows):
    """Words covered by a long line's windows, counting only an unbroken run from word 0."""
    end = 0
    for start, stop, _ in windows:
        if start != end:
            break
        end = stop
    return end


def own_lines(path):
    """The lines of a file of the run's folder that end in a line break (without it), one at a time; a symbolic link
    is never followed."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        for line in f:
            if line.endswith(b"\n"):
                yield line[:-1]


def last_line_end(fd):
    """Where the last line break of the open file `fd` ends (0 for none), read backwards a piece at a time."""
    end = os.fstat(fd).st_size
    while end:
        start = max(0, end - (1 << 16))
        piece = os.pread(fd, end - start, start)
        if b"\n" in piece:
            return start + piece.rindex(b"\n") + 1
        end = start
    return 0


def read_own(path):
    """The bytes of a file of the run's folder; a symbolic link is never followed."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        return f.read()
