"""The output rules every tool that writes shares: an output never overlaps an input (`check_output_apart`); a file
or folder is checked before any work and written whole or not at all (`check_file_output`, `write_file_atomically`,
`check_output`, `write_folder_atomically`); work in progress is announced by a lock held while it runs
(`hold_lock`, `abandoned_work`). The rules in full: docs/code-layout.md (Output rules).
"""

import contextlib
import errno
import glob
import os
import secrets
import shutil
import tempfile

import filelock

from .errors import ModelError, OutputError, OutputExistsError


def disk_hint(number):
    """What a write's errno says of the disk, for its one-line message."""
    return {
        errno.ENOSPC: " (the disk is full)",
        errno.EDQUOT: " (the disk quota is reached)",
        errno.EFBIG: " (a file-size limit is reached: ulimit -f)",
        errno.EROFS: " (a read-only file system)",
    }.get(number, "")


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
        raise OutputError(
            f"{output} {relation} the input {source}: a tool never writes over what it reads; choose another output",
            output,
        )


def check_file_output(output, overwrite=False):
    """Raise OutputError in one line if the file `output` cannot be written: a folder, a missing parent folder, one
    that refuses a new file (permissions, read-only file system), or (OutputExistsError) an existing file without
    `overwrite`. Nothing is left behind."""
    if os.path.isdir(output):
        raise OutputError(f"{output} is a folder: give the path of the file to write", output)
    check_parent_takes_files(output)
    if os.path.lexists(output) and not overwrite:
        raise OutputExistsError(f"{output} exists (pass overwrite=True to replace it)", output)


def check_parent_takes_files(output):
    """Raise OutputError in one line unless the folder `output` goes into exists and takes a new file (permissions, a
    read-only file system, a full disk: `disk_hint`). Nothing is left behind."""
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise OutputError(f"{output}: cannot write it: {parent} is not an existing folder", output)
    try:
        tempfile.TemporaryFile(dir=parent).close()
    except OSError as e:
        raise OutputError(
            f"{output}: cannot write into {parent}: {e.strerror or e}{disk_hint(e.errno)}", output
        ) from None


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
    this process's work until `release_lock` or the process's end. A path that is not a plain file (a symbolic link,
    a folder) or cannot be opened is an OutputError naming it."""
    check_lock_path(path)
    lock = filelock.FileLock(path, timeout=wait, thread_local=False)
    try:
        lock.acquire()
    except filelock.Timeout:  # (an OSError too)
        raise
    except OSError as e:
        raise OutputError(f"{path}: cannot lock it: {e.strerror or e}{disk_hint(e.errno)}", path) from None
    try:
        held = os.stat(path)
        lock.held_file = (held.st_dev, held.st_ino)  # what `lock_is_held` compares the path with
    except OSError:
        lock.held_file = None
    return lock


def check_lock_path(path):
    """Refuse, in one line, a lock path that is a symbolic link or not a plain file: a lock is a plain file the tool
    makes, never followed elsewhere."""
    if os.path.islink(path):
        raise OutputError(
            f"{path} is a symbolic link, where a lock file is a plain file the tool makes: remove the "
            "link (not what it points to) and rerun",
            path,
        )
    if os.path.lexists(path) and not os.path.isfile(path):
        raise OutputError(
            f"{path} is not a plain file, where a lock file is one the tool makes: move it away and rerun", path
        )


def lock_is_held(lock):
    """Whether the lock file of `lock` (held) is still the file this process locked: removed or replaced (by hand),
    another process may have taken a new lock at the same path and be doing the same work."""
    try:
        now = os.stat(lock.lock_file)
    except OSError:
        return False
    return getattr(lock, "held_file", None) == (now.st_dev, now.st_ino)


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


def is_earlier_conversion(folder):
    """True if `folder` holds only files a conversion writes, and is an ELMo model folder (`open_model`)."""
    from .model_files import is_model_file  # imports huggingface_hub: not before `convert --help` has answered
    from .model_folder import open_model

    try:
        names = os.listdir(folder)
        open_model(folder, local=True)
    except (OSError, ModelError):
        return False
    regular = all(
        os.path.isfile(os.path.join(folder, n)) and not os.path.islink(os.path.join(folder, n)) for n in names
    )
    return regular and all(is_model_file(n) for n in names)


def remove_stale_staging(parent, name=None):
    """Remove, in the folder `parent`, the staging folders of killed conversions into its output `name` (None: into
    any output there): those whose lock no process holds."""
    pattern = f".{glob.escape(name) if name is not None else '*'}.convert-*.lock"
    for lock_file in glob.glob(os.path.join(glob.escape(parent), pattern)):
        with abandoned_work(lock_file) as abandoned:
            if not abandoned:
                continue
            staging = lock_file[: -len(".lock")]
            for folder in (staging, staging + "-old"):
                if os.path.isdir(folder) and not os.path.islink(folder):
                    shutil.rmtree(folder)


def _check_output(output, overwrite):
    """Refuse, before any work is done, an output path that must not or cannot be replaced."""
    if os.path.islink(output):
        raise OutputError(f"{output} is a symbolic link: give the real folder path (links are never replaced)", output)
    if os.path.exists(output) and not os.path.isdir(output):
        raise OutputError(f"{output} exists and is not a folder: choose another output folder", output)
    if os.path.isdir(output):
        try:
            empty = not os.listdir(output)
        except OSError as e:
            raise OutputError(f"{output}: cannot read the folder: {e.strerror or e}", output) from e
        if empty:
            return
        if not overwrite:
            raise OutputExistsError(f"{output} exists and is not empty (pass overwrite=True to replace it)", output)
        if not is_earlier_conversion(output):
            raise OutputError(
                f"{output} does not hold an earlier conversion (a config.json of model_type elmo and only the files a "
                "conversion writes), so it is never replaced: choose another output folder",
                output,
            )


def check_output(output, overwrite=False, inputs=()):
    """Fail fast (before a long conversion) if `output` could not be written or overlaps one of the `inputs` (the
    files and folders converted); returns its absolute path."""
    check_output_apart(output, inputs)
    output = os.path.abspath(output)
    _check_output(output, overwrite)
    parent = os.path.dirname(output)
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise OutputError(f"{output}: cannot write it: {parent} is a file, not a folder", output)
    return output


def write_folder_atomically(write, output, overwrite=False):
    """Call `write(staging)` to fill a staging folder, then rename it to `output` (rules: the module docstring, 3)."""
    output = check_output(output, overwrite)
    parent, name = os.path.split(output)
    staging = os.path.join(parent, f".{name}.convert-{os.getpid()}-{secrets.token_hex(4)}")
    old = staging + "-old"  # where an earlier conversion waits until the new one is in place
    lock, replaced = None, False
    try:
        try:
            os.makedirs(parent, exist_ok=True)
            remove_stale_staging(parent, name)
            lock = hold_lock(staging + ".lock")
            os.mkdir(staging)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(staging, 0o777 & ~umask)
            write(staging)
            _check_output(output, overwrite)  # again: the folder may have changed during the conversion
            if os.path.isdir(output) and os.listdir(output):
                os.rename(output, old)
            elif os.path.isdir(output):
                os.rmdir(output)  # empty: nothing is lost
            try:
                os.replace(staging, output)
                replaced = True
            except OSError:
                if os.path.isdir(old):
                    os.rename(old, output)
                raise
        except OSError as e:
            raise OutputError(f"{output}: cannot write it: {e.strerror or e}{disk_hint(e.errno)}", output) from e
        except Exception as e:
            if type(e).__name__ != "SafetensorError":  # safetensors reports failed writes (disk full) with its own type
                raise
            raise OutputError(f"{output}: cannot write it: {e}", output) from e
    finally:
        # The earlier conversion is removed only once the new one is in place; if even its way back failed, it
        # stays (without its lock file, which no later run then finds) for the user to recover.
        for folder in (staging, old) if replaced else (staging,):
            if os.path.isdir(folder) and not os.path.islink(folder):
                shutil.rmtree(folder, ignore_errors=True)
        if lock is not None:
            release_lock(lock)
    return output
