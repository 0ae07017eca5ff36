"""Where a converter writes its output folder: the rules, shared by every converter, that keep it from losing files.

- The folder appears only complete: everything is written into a staging folder next to it and renamed into place.
- An existing folder is replaced only with `overwrite` (the command's --overwrite), and only if it holds an earlier
  conversion: a config.json of
  model_type "elmo" and no file but the model files (`model_files.py`). Anything else, such as the folder holding the
  original weights, is refused with nothing touched. An empty folder is simply used.
- Staging folders are named `.NAME.convert-PID-TOKEN` (and `-old`, where an earlier conversion waits to be replaced),
  announced by the lock `.NAME.convert-PID-TOKEN.lock` (output_paths.hold_lock), taken before the folder exists and
  held while the conversion runs. A run killed without cleaning up (`kill -9`) leaves the folders and a free lock: the
  next conversion into the same NAME removes the staging folders of a lock it can take, while holding it
  (output_paths.abandoned_work). Nothing else is ever deleted.
- Every operating-system failure (the path is a file or a symbolic link, a parent is a file, no permission, a full
  disk) becomes an `OutputError` with one line naming the path and the cause; an interruption (Ctrl-C) removes the
  staging folder, as any failure does.
"""

import errno
import glob
import os
import secrets
import shutil

from ..errors import ConversionError, ModelError, OutputError, OutputExistsError
from ..output_paths import abandoned_work, check_output_apart, hold_lock, release_lock


MAX_PROBLEMS_SHOWN = 10


def mismatch_error(path, problems, reference="the model config"):
    """A ConversionError listing the first `MAX_PROBLEMS_SHOWN` ways the weight file `path` does not match the
    options and counting the rest: a short message whatever the file or the options hold."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = len(problems) - len(shown)
    if more:
        shown.append(f"... and {more:,} more")
    return ConversionError(f"{path} does not match {reference}:\n  " + "\n  ".join(shown))


def is_earlier_conversion(folder):
    """True if `folder` holds only files a conversion writes, and is an ELMo model folder (`open_model`)."""
    from ..model_files import is_model_file  # imports huggingface_hub: not before `convert --help` has answered
    from ..model_folder import open_model

    try:
        names = os.listdir(folder)
        open_model(folder, local=True)
    except (OSError, ModelError):
        return False
    regular = all(os.path.isfile(os.path.join(folder, n)) and not os.path.islink(os.path.join(folder, n))
                  for n in names)
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
        raise OutputError(f"{output} is a symbolic link: give the real folder path (links are never replaced)",
                          output)
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
            raise OutputExistsError(f"{output} exists and is not empty (pass {{overwrite}} to replace it)", output)
        if not is_earlier_conversion(output):
            raise OutputError(
                f"{output} does not hold an earlier conversion (a config.json of model_type elmo and only the files a "
                "conversion writes), so it is never replaced: choose another output folder", output
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


def save_atomically(model, tokenizer, output, overwrite=False, card=None):
    """Write `model`, `tokenizer` and the model card `card` (a huggingface_hub ModelCard, if any) into a staging
    folder and rename it to `output` (rules: module docstring)."""

    def write(staging):
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if card is not None:
            card.save(os.path.join(staging, "README.md"))

    return write_folder_atomically(write, output, overwrite)


def write_folder_atomically(write, output, overwrite=False):
    """Call `write(staging)` to fill a staging folder, then rename it to `output` (rules: module docstring)."""
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
            hint = " (is the disk full?)" if e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) else ""
            raise OutputError(f"{output}: cannot write it: {e.strerror or e}{hint}", output) from e
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
