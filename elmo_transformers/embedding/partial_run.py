"""OUTPUT.partial/ of `embed_file`: the resumable state of a run, whichever format it writes (`hdf5_output`,
`parquet_output`), the LSTM state kept after each window of a long line (written and read here), and the checks of
INPUT and OUTPUT made before any work. It imports no torch (reading a window's state imports it), so that a run's
paths are checked before the model and torch load."""

import contextlib
import errno
import json
import os
import shutil
import stat

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
        """Make the folder, the output (one array of shape `shapes[i]` for line i, in `settings.output_dtype`) and,
        last, run.json (`settings.record()`). A failure (a full disk) leaves nothing of it."""
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
        """The lines of each journaled batch, [line, ...] one at a time, of every process's journal."""
        for name in sorted(os.listdir(self.folder)):
            if name.startswith("done-") and name.endswith(".txt"):
                text = read_own(os.path.join(self.folder, name))
                for entry in text.split(b"\n")[:-1]:  # a last entry without its line break is not done
                    try:
                        lines = [int(line) for line in entry.decode("ascii").split()]
                    except ValueError:
                        raise self.damaged(f"its journal {name} holds {entry[:40]!r}, not line numbers") from None
                    yield lines

    def progress(self):
        """(the lines of finished batches, a sorted int64 array, each once; line -> sorted [(start, stop, path)] of
        long-line windows). A batch is finished when a journal names it and the output still holds it
        (`writer.holds`: a Parquet file removed by hand is computed again)."""
        entries = [np.array(entry, np.int64) for entry in self.journal_entries() if self.writer.holds(entry)]
        batches = np.unique(np.concatenate(entries)) if entries else np.zeros(0, np.int64)
        windows = {}
        for name in sorted(os.listdir(self.folder)):
            if name.startswith("window-") and name.endswith(".npz"):
                try:
                    line, start, stop = (int(part) for part in name[len("window-") : -len(".npz")].split("-"))
                except ValueError:
                    raise self.damaged(f"it holds {name}, which is not the name of a window") from None
                windows.setdefault(line, []).append((start, stop, os.path.join(self.folder, name)))
        return batches, windows

    def check_progress(self, units, lines, words_of):
        """Refuse to resume a folder whose journals name a batch this run does not make (`units`: its batches and
        long lines), or whose output holds another text than `lines`: an edited or foreign folder would finish with
        vectors never computed, or mix two texts' vectors in one output."""
        made = {(unit,) if isinstance(unit, int) else tuple(sorted(unit.tolist())) for unit in units}
        for entry in self.journal_entries():
            if tuple(sorted(entry)) not in made:
                raise self.damaged(f"its journals name lines {entry[:5]} as one batch, which this run does not make")
        self.writer.check_text(lines, words_of, self.damaged)

    def finished_lines(self):
        """How many lines (and long lines begun) this folder keeps: 0 where there is none."""
        if not self.exists():
            return 0
        batches, windows = self.progress()
        return len(batches) + len(windows)

    def open(self, rank, words_of):
        """Open the output for writing (`words_of(line)`: the words of a line, for an output that stores them) and
        this process's journal."""
        self.writer.open(words_of)
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
        entries = read_own(self.journal)
        if entries and not entries.endswith(b"\n"):
            os.ftruncate(self.journal, entries.rfind(b"\n") + 1)

    def close(self):
        self.writer.close()
        if self.journal is not None:
            os.close(self.journal)
        self.journal = None

    def note_done(self, lines):
        """Journal `lines` as finished: they are on the disk."""
        os.write(self.journal, (" ".join(map(str, lines)) + "\n").encode())
        os.fsync(self.journal)

    def add_batch(self, arrays):
        """Store a finished batch ({line number: array}); journal its lines once they are on the disk."""
        self.writer.add_batch(arrays)
        self.note_done(arrays)

    def add_window(self, line, start, vectors, lstm_state):
        """Store a window of long line `line` from word `start` on, and the LSTM state after it (where the output
        keeps windows; otherwise the line is stored as a batch once whole)."""
        if not self.writer.windows:
            whole = self.writer.add_window(line, start, vectors)
            if whole is not None:
                self.add_batch({line: whole})
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

    def finish(self, settings, shapes):
        """OUTPUT, complete: once every line is done and what is put in place is whole (`check_whole`: the run of
        `settings`, one array of shape `shapes[i]` for line i), marked finished (FINISHED), put in place and
        the folder removed; OUTPUT is checked again first (something may have appeared there while the run worked:
        it is replaced only under the rules of `settings.overwrite`, as before the run)."""
        if not os.path.isdir(self.folder):
            raise OutputError(
                f"{self.folder} was removed while the run worked, and the vectors with it: run again", self.folder
            )
        batches, windows = self.progress()
        done = finished_mask(batches, len(shapes))
        for line, line_windows in windows.items():
            if 0 <= line < len(shapes) and covered(line_windows) == shapes[line, -2]:
                done[line] = True
        missing = np.flatnonzero(~done).tolist()
        if missing:
            raise UnfinishedRunError(
                f"{self.folder} lacks the vectors of {len(missing):,} line{'s' * (len(missing) != 1)} (numbered from "
                f"0: {missing[:10]}), though the run computed them (removed while it worked?): {self.output} is not "
                "written; rerun with resume=True to compute them",
                self.folder,
            )
        self.check_whole(settings, shapes)
        self.check_lock()
        write_file_atomically(os.path.join(self.folder, FINISHED), json.dumps({"overwrite": settings.overwrite}))
        self._complete(settings.overwrite)

    def check_whole(self, settings, shapes):
        """Refuse to put OUTPUT in place unless it is what this run computed: run.json records `settings`, and the
        output holds every line, each of its shape (`writer.check_whole`)."""
        try:
            saved = json.loads(read_own(os.path.join(self.folder, "run.json")))
        except (OSError, ValueError, RecursionError):
            saved = None
        differences = settings.differences(saved) if isinstance(saved, dict) else None
        if differences is None:
            self.unusable("its run.json is gone or unreadable")
        if differences:
            self.unusable(f"its run.json no longer records this run ({differences[0][0]} differs)")
        problem = self.writer.check_whole(shapes, settings.output_dtype)
        if problem:
            self.unusable(problem)

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


def finished_mask(batches, lines):
    """Which of `lines` lines the finished `batches` (of `progress()`) hold, a bool array (numbers past the end are
    left out)."""
    done = np.zeros(lines, bool)
    done[batches[(batches >= 0) & (batches < lines)]] = True
    return done


def covered(windows):
    """Words covered by a long line's windows, counting only an unbroken run from word 0."""
    end = 0
    for start, stop, _ in windows:
        if start != end:
            break
        end = stop
    return end


def read_own(file):
    """The bytes of a file of the run's folder (a path, never followed if it is a symbolic link, or an open file
    descriptor, read from its start)."""
    fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW) if isinstance(file, str) else file
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        if fd is not file:
            os.close(fd)
