"""The one error model of the package: library code raises a `UserError` for anything the user can fix (a file, an
argument, a model folder); `elmo_transformers.cli.main` prints it as one line `error: ...` and exits 1. Only `cli/`
turns errors into exit codes and knows the command-line options; library callers catch these like any exception
(they are also `ValueError`s, the type Python code expects for bad input).

A message is written whole where it is raised, in a Python caller's words: it names an argument of the call as the
call passes it (`max_words`; a switch as `overwrite=True`). An error about one value (a path, a model name) carries it
as `value`, and an error about one argument carries the argument's name as `argument`; the message starts with that
value or that name ("max_words 0: must be at least 1"), so that a command can name its own option there instead
(`cli.one_line`: "--max-words 0: ...").
"""

import sys


class UserError(ValueError):
    """Something the user gave cannot be used as given; the message names it and what to do, in one line."""

    def __init__(self, message, value=None, argument=None):
        super().__init__(message)
        self.value, self.argument = value, argument


class DataError(UserError):
    """Input data the commands cannot use as given (missing, empty, inconsistent, wrong encoding)."""


class ConversionError(UserError):
    """The input cannot be converted (malformed or mismatched files)."""


class ModelError(UserError):
    """A model name that is neither a usable folder nor a reachable Hub repository, or a folder that is not the
    kind of ELMo model the command needs."""


class OutputError(UserError):
    """An output path that must not or cannot be written (over an input, in a missing folder, a full disk)."""


class OutputExistsError(OutputError):
    """An output that already exists and is replaced only when the caller asks: the message says "pass
    overwrite=True"."""


class SettingDiffersError(DataError):
    """An embed run asked to resume one (in OUTPUT.partial/, the value) whose run.json records another value of a
    setting: `setting` (run.json's name for it), the `recorded` value and the `given` one, from which a command words
    the refusal in its own options."""

    def __init__(self, message, folder, setting, recorded, given):
        super().__init__(message, folder)
        self.setting, self.recorded, self.given = setting, recorded, given


class UnfinishedRunError(OutputError):
    """An embed run that stopped (or found one that had) with its finished lines kept in OUTPUT.partial/ (the
    value): the message says how to continue it ("rerun with resume=True")."""


def first_line(error):
    """The first line of an exception's message, or its type's name when it has none: what a one-line error quotes.
    Of huggingface_hub's strict-dataclass errors (a config's field or rule refused), whose first line is a header,
    their cause's: it names the field and the value."""
    hub = sys.modules.get("huggingface_hub.errors")  # not loaded: the error cannot be one of them
    if hub is not None and isinstance(error, hub.StrictDataclassError) and error.__cause__ is not None:
        error = error.__cause__
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
