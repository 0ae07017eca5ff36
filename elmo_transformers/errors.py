"""The one error model of the package: library code raises a `UserError` for anything the user can fix (a file, an
argument, a model folder); `elmo_transformers.cli.main` prints it as one line `error: ...` and exits 1. Only `cli/`
turns errors into exit codes; library callers catch these like any exception (they are also `ValueError`s, the
type Python code expects for bad input)."""


class UserError(ValueError):
    """Something the user gave cannot be used as given; the message names it and what to do, in one line."""


class DataError(UserError):
    """Input data the commands cannot use as given (missing, empty, inconsistent, wrong encoding)."""


class ConversionError(UserError):
    """The input cannot be converted, or the output cannot be written."""


class ModelError(UserError):
    """A model name that is neither a usable folder nor a reachable Hub repository, or a folder that is not the
    kind of ELMo model the command needs."""


def first_line(error):
    """The first line of an exception's message, or its type's name when it has none: what a one-line error quotes."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
