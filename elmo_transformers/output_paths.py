"""Output rules every tool that writes shares.

1. Its output never overlaps one of its inputs (`check_output_apart`).

An output that is an input (also through a symbolic or hard link), contains one (a folder around it) or sits inside
one (a file or folder within an input folder) is refused with one line, so that a tool can never replace, fill or
delete what it reads. Inputs that do not exist on this machine (Hub repo ids, stdin "-") cannot overlap and are
skipped.

2. A file output is checked before any work (`check_file_output`: not a folder, its folder exists and takes a
new file, an existing file only with `overwrite`), and written whole or not at all (`write_file_atomically`: a
temporary file beside it, renamed into place), so that a full disk or a kill never leaves a cut file where the old
one was.

3. Work in progress is announced by a lock file (`hold_lock`, filelock's), held while the work runs: the operating
system releases it when its process ends, also on `kill -9`, so no process id is ever judged alive or not. A run that
finds what another announced touches it only while holding that lock itself (`abandoned_work`): whether the work was
abandoned is decided, and its leftovers removed, with the lock held, so no other process can take it up in between.
The lock file goes while still held (`release_lock`), by the run that created or took it over.
"""

import contextlib
import os
import tempfile

import filelock

from .errors import OutputError, OutputExistsError


def check_output_apart(output, inputs):
    """Raise OutputError naming the overlap if `output` is, contains or sits inside one of `inputs` (paths; None,
    "-" and paths that do not exist are skipped)."""
    out = os.path.realpath(output)
    for source in inputs:
        if source is None or not isinstance(source, (str, os.PathLike)) or source == "-" or not os.path.exists(source):
            continue
        src = os.path.realpath(source)
        same = out == src or (os.path.exists(out) and os.path.samefile(out, src))
        if same:
            relation = "is"
        elif os.path.commonpath([out, src]) == src:
            relation = "is inside"
        elif os.path.commonpath([out, src]) == out:
            relation = "contains"
        else:
            continue
        raise OutputError(f"{output} {relation} the input {source}: a tool never writes over what it reads; choose "
                          "another output", output)


def check_file_output(output, overwrite=False):
    """Raise OutputError in one line if the file `output` cannot be written: a folder, a missing parent folder, one
    that refuses a new file (permissions, read-only file system), or (OutputExistsError) an existing file without
    `overwrite`. Nothing is left behind."""
    if os.path.isdir(output):
        raise OutputError(f"{output} is a folder: give the path of the file to write", output)
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise OutputError(f"{output}: cannot write it: {parent} is not an existing folder", output)
    try:
        tempfile.TemporaryFile(dir=parent).close()
    except OSError as e:
        raise OutputError(f"{output}: cannot write into {parent}: {e.strerror or e}", output) from None
    if os.path.lexists(output) and not overwrite:
        raise OutputExistsError(f"{output} exists (pass {{overwrite}} to replace it)", output)


def write_file_atomically(path, data):
    """Write `data` (a str, or a function that writes into a binary file) to `path` through a temporary file in the
    same folder, on the disk (fsync), then a rename: `path` is either its old self or the whole new file. A failure (a
    full disk) leaves no temporary file and is an OSError of the same errno naming `path`."""
    parent = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=parent, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            data(f) if callable(data) else f.write(data.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        if isinstance(e, OSError):
            raise OSError(e.errno, f"{path}: cannot write it: {e.strerror or e}") from None
        raise


def hold_lock(path, wait=0):
    """The lock file `path`, acquired within `wait` seconds (filelock.Timeout if another process holds it), announcing
    this process's work until `release_lock` or the process's end."""
    lock = filelock.FileLock(path, timeout=wait, thread_local=False)
    lock.acquire()
    return lock


def release_lock(lock):
    """Remove the lock file of `lock` (held), then release it: removed while held, so that no process takes a lock
    whose file then vanishes under it."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(lock.lock_file)
    lock.release()


@contextlib.contextmanager
def abandoned_work(path, wait=0):
    """Yield False if a running process holds the lock file `path` (its work goes on), True if none does within
    `wait` seconds (a killed run left it, or nothing announced the work): then this process holds the lock while the
    caller removes or takes over that work, and the lock file goes afterwards."""
    try:
        lock = hold_lock(path, wait)
    except filelock.Timeout:
        yield False
        return
    try:
        yield True
    finally:
        release_lock(lock)
