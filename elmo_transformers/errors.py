"""The one error model of the package: library code raises a `UserError` for anything the user can fix (a file, an
argument, a model folder); `elmo_transformers.cli.main` prints it as one line `error: ...` and exits 1. Only `cli/`
turns errors into exit codes and knows the command-line options; library callers catch these like any exception
(they are also `ValueError`s, the type Python code expects for bad input).

An error about one value (a path, a model name) carries it as `value`, and its message starts with it, so that a
command can put the option that gave the value in front ("--output out.json exists ..."). A message that names
arguments of the call writes each as "{name}" and lists the names in `arguments`: a Python caller reads the names
(`vocab_file`), a command its flags (`worded`; "--vocab-file"). A warning does the same through `Notice`.
"""

import sys


class NamesArguments:
    """A message (`template`) that names `arguments` of the call as "{name}"."""

    template, arguments = "", ()

    @staticmethod
    def python_wording(argument):
        """How the message names `argument` to a Python caller."""
        return argument

    def worded(self, wording):
        """The message with each argument it names written as `wording(name)` gives it."""
        message = self.template
        for argument in self.arguments:
            message = message.replace(f"{{{argument}}}", wording(argument))
        return message


class UserError(NamesArguments, ValueError):
    """Something the user gave cannot be used as given; the message names it and what to do, in one line."""

    def __init__(self, message, value=None, arguments=()):
        self.template, self.value, self.arguments = message, value, tuple(arguments)
        super().__init__(self.worded(self.python_wording))


class Notice(NamesArguments):
    """A log message that names arguments of the call, as a UserError does: `logger.warning(Notice(...))` reads
    "options_path" in a Python caller's log and "--options" in a command's (cli/ rewords it as it is logged)."""

    def __init__(self, message, arguments):
        self.template, self.arguments = message, tuple(arguments)

    def __str__(self):
        return self.worded(self.python_wording)


class DataError(UserError):
    """Input data the commands cannot use as given (missing, empty, inconsistent, wrong encoding)."""


class ConversionError(UserError):
    """The input cannot be converted (malformed or mismatched files)."""


class ModelError(UserError):
    """A model name that is neither a usable folder nor a reachable Hub repository, or a folder that is not the
    kind of ELMo model the command needs."""


class OutputError(UserError):
    """An output path that must not or cannot be written (over an input, in a missing folder, a full disk)."""


class RefusalLiftedByArgument(OutputError):
    """A refusal that a flag argument of the call lifts (`overwrite=True`, `resume=True`): the message names it as
    "{overwrite}" ("{resume}"), which a Python caller reads as "overwrite=True" and a command as its flag."""

    argument = None

    def __init__(self, template, value):
        super().__init__(template, value, arguments=[self.argument])

    @staticmethod
    def python_wording(argument):
        return f"{argument}=True"


class OutputExistsError(RefusalLiftedByArgument):
    """An output that already exists and is replaced only when the caller asks (`overwrite=True`)."""

    argument = "overwrite"


class UnfinishedRunError(RefusalLiftedByArgument):
    """An embed run that stopped (or found one that had) with its finished lines kept in OUTPUT.partial/ (the
    value): resuming (`resume=True`) continues it."""

    argument = "resume"


def first_line(error):
    """The first line of an exception's message, or its type's name when it has none: what a one-line error quotes.
    Of huggingface_hub's strict-dataclass errors (a config's field or rule refused), whose first line is a header,
    their cause's: it names the field and the value."""
    hub = sys.modules.get("huggingface_hub.errors")  # not loaded: the error cannot be one of them
    if hub is not None and isinstance(error, hub.StrictDataclassError) and error.__cause__ is not None:
        error = error.__cause__
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
