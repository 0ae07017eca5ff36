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


class RefusalLiftedByOption(UserError):
    """A refusal that an argument of the call lifts (`overwrite=True`, `resume=True`): the message carries the
    value it is about (`path`) and names the keyword; a command words it with its own flag (`with_option`), since
    only `cli/` knows flag names. `template` is the message with "{option}" where the keyword or flag goes."""

    keyword = None

    def __init__(self, template, path):
        self.template, self.path = template, path
        super().__init__(self.with_option(f"{self.keyword}=True"))

    def with_option(self, option):
        return self.template.replace("{option}", option)


class OutputExistsError(RefusalLiftedByOption):
    """An output file that exists, where replacing it was not asked for."""

    keyword = "overwrite"


class UnfinishedRunError(RefusalLiftedByOption):
    """An embed run that stopped (or found one that had) with its finished lines kept in OUTPUT.partial/ (`path`):
    resuming continues it."""

    keyword = "resume"


def first_line(error):
    """The first line of an exception's message, or its type's name when it has none: what a one-line error quotes."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
