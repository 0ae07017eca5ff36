"""The `elmo-transformers` command (also `python -m elmo_transformers`): one module a subcommand, each with --help.

A subcommand's module is imported only when it runs, so `elmo-transformers embed` does not load Trainer. Each parses
its arguments before it imports torch or transformers (`import_package`), so that --help and usage errors answer at
once. This is the one place where errors become exit codes: a `UserError` (elmo_transformers.errors) or an OSError
is printed as one line `error: ...`, exit 1, without a traceback (ELMO_TRANSFORMERS_DEBUG=1 prints the traceback
too); Ctrl-C is one line, exit 130 (a signal that stops a command, 128 + its number: SIGTERM 143); usage errors
exit 2 (argparse).
"""

import contextlib
import errno
import gc
import importlib
import importlib.util
import os
import signal
import sys
import threading
import traceback

DEBUG_VARIABLE = "ELMO_TRANSFORMERS_DEBUG"  # set to 1: a one-line error also prints the traceback behind it

# subcommand -> (module of this package, what it does)
COMMANDS = {
    "convert": ("convert", "convert AllenNLP / bilm-tf, TF-Hub / TensorFlow or ELMoForManyLangs weights to ELMo"),
    "embed": ("embed", "write the ELMo vectors of a text file into HDF5 (AllenNLP's `allennlp elmo`)"),
    "push": ("push", "upload an ELMo folder to the Hugging Face Hub with a model card"),
    "finetune": ("finetune", "train a token- or sequence-classification head with Trainer"),
    "pretrain": ("pretrain", "train the biLM language model, from scratch or from a model (domain adaptation)"),
    "perplexity": ("perplexity", "forward, backward and average perplexity of a biLM language model"),
    "demo": ("demo", "show how ELMo's vectors of a word depend on its sentence (--web: as a web page)"),
    "export": ("export", "an ONNX graph of an ELMo model, served by onnxruntime without PyTorch"),
}

USAGE = (
    "usage: elmo-transformers COMMAND [--help] ...\n\ncommands:\n"
    + "\n".join(f"  {name:<11} {text}" for name, (_, text) in COMMANDS.items())
    + "\n\n`elmo-transformers COMMAND --help` tells a command's arguments."
)


def import_package():
    """Register ELMo with the transformers Auto classes (`elmo_transformers.register`), once a command that loads
    models through them has parsed its arguments."""
    from .. import register

    register()


@contextlib.contextmanager
def option(flag, value):
    """Around library calls that check `value`, given by the command-line option `flag`: a UserError about that value
    (its `value`; the message starts with it) is printed with the option in front ("--model nosuch: no such
    folder..."), unless it names the argument it is about (`one_line` then names that argument's flag)."""
    from ..errors import UserError

    try:
        yield
    except UserError as e:
        if None not in (e.value, value) and os.path.abspath(str(e.value)) == os.path.abspath(str(value)):
            e.option = flag  # (the same path, given relative or absolute)
        raise


STOPPING_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")  # what stops a command as Ctrl+C does


class Interrupted(KeyboardInterrupt):
    """The signal `signum` stopped the command (Ctrl+C is SIGINT; a `kill` or a job scheduler's stop, SIGTERM; a
    closed terminal, SIGHUP); its message names it, so that a user can tell which."""

    def __init__(self, signum):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def name(self):
        return "Ctrl+C (SIGINT)" if self.signum == signal.SIGINT else signal.Signals(self.signum).name


@contextlib.contextmanager
def signals_as_interrupts():
    """Inside, each of STOPPING_SIGNALS stops the command as Ctrl+C does (an `Interrupted`, a KeyboardInterrupt), so
    that what it made is cleaned up (`finally`, atexit) instead of the process dying where it stands. (Only the main
    thread may set signal handlers: elsewhere nothing changes.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum, frame):
        raise Interrupted(signum)

    previous = {
        number: signal.signal(number, interrupted)
        for number in (getattr(signal, name, None) for name in STOPPING_SIGNALS)
        if number is not None
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def interruption(error):
    """How `error` (a KeyboardInterrupt) stopped the command, for its message: the signal's name."""
    return error.name if isinstance(error, Interrupted) else "Ctrl+C (SIGINT)"


def exit_code(error):
    """The exit code of a command stopped by `error` (a KeyboardInterrupt), as a shell gives a process a signal
    ended: 128 + the signal's number (Ctrl+C 130, SIGTERM 143, SIGHUP 129)."""
    return 128 + (error.signum if isinstance(error, Interrupted) else signal.SIGINT)


# The library arguments whose flag is not their name (convert's files, embed's --format).
FLAGS = {
    "options_path": "--options",
    "weights_path": "--weights",
    "softmax_path": "--softmax-weights",
    "vocab_path": "--vocab",
    "file_format": "--format",
}


# The switches a message's advice may name ("pass overwrite=True"): a command words them as flags (--overwrite).
SWITCHES = ("overwrite", "resume", "dry_run")


def flag_of(argument):
    """The command-line flag of a library argument: `vocab_file` is --vocab-file (the training commands also take
    --vocab_file), `overwrite` --overwrite, `options_path` --options (FLAGS)."""
    return FLAGS.get(argument, "--" + argument.replace("_", "-"))


def one_line(error):
    """What `main` prints for `error`: its message on one line (also for wrapped causes), in the command's words: the
    argument a UserError is about (its `argument`, the message's first word) named by its flag, else the option that
    gave the value it is about in front (`option`); a refusal's advice to pass a switch ("pass overwrite=True") names
    the flag ("pass --overwrite")."""
    from ..errors import UserError

    if isinstance(error, OSError) and error.strerror and error.filename is None:  # OSError(errno, "what failed")
        message = error.strerror
    else:
        message = str(error)
    flag = getattr(error, "option", None)
    if isinstance(error, UserError) and error.argument:
        message, flag = flag_of(error.argument) + message.removeprefix(error.argument), None
    if isinstance(error, UserError):
        for switch in SWITCHES:
            message = message.replace(f"{switch}=True", flag_of(switch))
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return " ".join([*([flag] if flag else []), *lines]) or type(error).__name__


def print_traceback_when_debugging():
    """With ELMO_TRANSFORMERS_DEBUG=1, the traceback of the error being handled, with every error that led to it,
    also those a one-line message hid (`raise ... from None`): what a bug report needs."""
    if os.environ.get(DEBUG_VARIABLE, "") in ("", "0"):
        return
    error, seen = sys.exc_info()[1], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__suppress_context__ = False
        error = error.__cause__ or error.__context__
    traceback.print_exc()


class BestEffort:
    """The process's stdout or stderr, whose reader may go away (`| head -1`, a closed terminal): the first write or
    flush that fails for that reason sends the stream's file to /dev/null, so that what a command prints (progress,
    the closing line) never stops its work, hangs a thread that prints, or changes its exit code."""

    GONE = (errno.EPIPE, errno.EBADF, errno.EIO)

    def __init__(self, stream):
        self.stream = stream

    def _guarded(self, call, *args):
        try:
            return call(*args)
        except OSError as e:
            if e.errno not in self.GONE:
                raise
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.stream.fileno())
            os.close(null)
            with contextlib.suppress(OSError, ValueError):
                call(*args)  # (what the buffer held goes to /dev/null now)
            return len(args[0]) if args else None

    def write(self, text):
        return self._guarded(self.stream.write, text)

    def flush(self):
        return self._guarded(self.stream.flush)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def own_streams():
    """The process's standard files made safe to use: a closed one (`2>&-`) is opened on /dev/null, so that no file
    the command opens gets its number (where a stray write would land in the output), and stdout and stderr print
    best effort (`BestEffort`). A closed stdin stays None in `sys.stdin`, so that reading "-" can say so."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # (the lowest free number: this one)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        setattr(sys, name, BestEffort(stream if stream is not None else open(os.devnull, "w", encoding="utf-8")))


def main(argv=None):
    """Run a subcommand; returns the exit code. Without `argv` it runs the process's own command line (its standard
    files made safe, `own_streams`), which ends when this returns: what the command made is then frozen out of the
    interpreter's last garbage collection, which would only walk torch's objects to free memory the exit frees
    anyway (docs/speed.md, "Start-up": a quarter of a second of a one-line `embed`)."""
    if argv is None:
        own_streams()
        try:
            return main(sys.argv[1:])
        finally:
            gc.freeze()
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"error: unknown command {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    from ..errors import UserError
    from ..hub.deadline import use_deadlines
    from ..runtime.threads import settle_threads_variable

    settle_threads_variable()  # before torch loads
    module = importlib.import_module(f"{__name__}.{COMMANDS[argv[0]][0]}")
    use_deadlines()  # no Hub call of a command waits for ever
    try:
        with signals_as_interrupts():
            result = module.main(argv[1:])
    except (UserError, OSError) as e:  # OSError: a file or disk problem the library did not name more precisely
        print_traceback_when_debugging()
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # a command that keeps partial work for a rerun says so itself (embed)
        print_traceback_when_debugging()
        print(
            f"\ninterrupted by {interruption(e)}: elmo-transformers {argv[0]} stopped before it finished",
            file=sys.stderr,
        )
        return exit_code(e)
    return result if isinstance(result, int) else 0  # the training commands return their Trainer (for tests)
