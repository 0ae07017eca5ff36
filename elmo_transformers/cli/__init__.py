"""The `elmo-transformers` command (also `python -m elmo_transformers`): one module a subcommand, each with --help.

A subcommand's module is imported only when it runs, so `elmo-transformers embed` does not load Trainer. This is the
one place where errors become exit codes: a `UserError` (elmo_transformers.errors) is printed as one line
`error: ...`, exit 1, without a traceback; usage errors exit 2 (argparse).
"""

import importlib
import sys

# subcommand -> (module of this package, what it does)
COMMANDS = {
    "convert": ("convert", "convert AllenNLP / bilm-tf or ELMoForManyLangs weights into an ELMo folder"),
    "embed": ("embed", "write the ELMo vectors of a text file into HDF5 (AllenNLP's `allennlp elmo`)"),
    "push": ("push", "upload an ELMo folder to the Hugging Face Hub with a model card"),
    "finetune": ("finetune", "train a token- or sequence-classification head with Trainer"),
    "pretrain": ("pretrain", "train the biLM language model, from scratch or from a model (domain adaptation)"),
    "perplexity": ("perplexity", "forward, backward and average perplexity of a biLM language model"),
    "demo": ("demo", "show how ELMo's vectors of a word depend on its sentence"),
}

USAGE = "usage: elmo-transformers COMMAND [--help] ...\n\ncommands:\n" + "\n".join(
    f"  {name:<11} {text}" for name, (_, text) in COMMANDS.items()
) + "\n\n`elmo-transformers COMMAND --help` tells a command's arguments."


def main(argv=None):
    """Run a subcommand; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"error: unknown command {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    from ..errors import UserError

    module = importlib.import_module(f"{__name__}.{COMMANDS[argv[0]][0]}")
    try:
        result = module.main(argv[1:])
    except (UserError, OSError) as e:  # OSError: a file or disk problem the library did not name more precisely
        print(f"error: {e}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0  # the training commands return their Trainer (for tests)
