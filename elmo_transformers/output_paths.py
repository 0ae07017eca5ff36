"""Output rules every tool that writes shares.

1. Its output never overlaps one of its inputs (`check_output_apart`).

An output that is an input (also through a symbolic or hard link), contains one (a folder around it) or sits inside
one (a file or folder within an input folder) is refused with one line, so that a tool can never replace, fill or
delete what it reads. Inputs that do not exist on this machine (Hub repo ids, stdin "-") cannot overlap and are
skipped.

2. A file output is checked before any work (`check_file_output`: not a folder, its folder exists and takes a
new file, an existing file only with --overwrite), and written whole or not at all (`write_file_atomically`: a
temporary file beside it, renamed into place), so that a full disk or a kill never leaves a cut file where the old
one was.

3. Work in progress is announced by an owner file (`write_owner_file`): JSON naming the host and process id, created
exclusively. A run that finds one refuses to touch what it announces while `owner_is_gone` is False; a run killed
without cleaning up (`kill -9`) leaves it, and the next run may then take over what it owned.
"""

import json
import os
import socket
import tempfile

from .errors import OutputExistsError, UserError


def check_output_apart(output, inputs, option="output", error=UserError):
    """Raise `error` (a UserError type) naming the overlap if `output` is, contains or sits
    inside one of `inputs` (paths; None, "-" and paths that do not exist are skipped). `option` names the output
    in the message (e.g. "--output")."""
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
        raise error(
            f"the {option} {output} {relation} the input {source}: a tool never writes over what it reads; "
            f"choose another {option}"
        )


def check_file_output(output, option="output", error=UserError, overwrite=False):
    """Raise `error` in one line if the file `output` cannot be written: a folder, a missing parent folder, one that
    refuses a new file (permissions, read-only file system), or an existing file without `overwrite`. Nothing is
    left behind."""
    if os.path.isdir(output):
        raise error(f"the {option} {output} is a folder: give the path of the file to write")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise error(f"cannot write the {option} {output}: {parent} is not an existing folder")
    try:
        tempfile.TemporaryFile(dir=parent).close()
    except OSError as e:
        raise error(f"cannot write the {option} into {parent}: {e.strerror or e}") from None
    if os.path.lexists(output) and not overwrite:
        raise OutputExistsError(f"{output} exists (pass {{option}} to replace it)", output)


def write_file_atomically(path, data, option="output", error=UserError):
    """Write `data` (str) to `path` through a temporary file in the same folder and a rename: `path` is either its
    old self or the whole new file. A failure (a full disk) is `error` in one line and leaves no temporary file."""
    parent = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=parent, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except OSError as e:
        os.unlink(temporary)
        raise error(f"cannot write the {option} {path}: {e.strerror or e}") from None


def write_owner_file(path):
    """Create `path` naming this process; FileExistsError if another run already announced itself there."""
    with open(path, "x", encoding="utf-8") as f:
        json.dump({"host": socket.gethostname(), "pid": os.getpid()}, f)


def read_owner_file(path):
    """The owner recorded in `path` (a dict), or None if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            owner = json.load(f)
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def owner_is_gone(owner):
    """True only when the owner names a process of this machine, not this one, that has ended."""
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return False
    if owner["pid"] == os.getpid():
        return False
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False
