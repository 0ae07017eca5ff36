"""The training commands' command lines (`finetune TASK`, `pretrain`): the training functions' argument dataclasses
(`training/arguments.py`) and Trainer's `TrainingArguments`, parsed before any model or data code is imported.
--help lists the ELMo options from the dataclasses without importing transformers (which imports torch);
`--help-trainer` lists Trainer's. A usage error is one line after a short usage line, not the usage of every Trainer
option (HfArgumentParser's, as it refuses a value that is not a number)."""

import argparse
import dataclasses
import logging
import os
import re
import sys
from dataclasses import dataclass, field

from ..errors import UserError, first_line
from ..training.arguments import FinetuneDataArguments, HeadArguments, PretrainDataArguments, PretrainModelArguments


@dataclass
class OutputArguments:
    """Trainer writes into --output-dir whatever is there; the commands ask first (transformers 5 has no
    TrainingArguments.overwrite_output_dir)."""

    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Write into an --output-dir that already holds files (files of the same names are replaced)."
        },
    )


INPUT_OPTIONS = ("model_name_or_path", "train_file", "validation_file", "test_file", "vocab_file")
HELP_TRAINER = "--help-trainer"
TRAINER_NOTE = (
    f"Trainer's options (transformers.TrainingArguments) are accepted too: --output-dir, --do-train, "
    f"--do-eval, --learning-rate, --num-train-epochs, --per-device-train-batch-size, ...; `{HELP_TRAINER}` "
    "lists every one. Options are written with - or _ alike (--output-dir, --output_dir)."
)


def check_output_dir(known):
    """--output-dir apart from every input (the model, the data and vocabulary files); one that already holds files
    is written into only when the run resumes there or --overwrite-output-dir says so."""
    from ..output_paths import check_output_apart
    from . import option

    out = known.output_dir
    if not out:
        return
    inputs = []
    for name in INPUT_OPTIONS:
        value = getattr(known, name, None)
        inputs += value if isinstance(value, list) else [value]
    with option("--output-dir", out):
        check_output_apart(out, inputs)
    # Under torchrun every process parses; the first one judges, as the others may see files it has just written.
    first_process = os.environ.get("RANK", "0") == "0"
    asked = known.overwrite_output_dir or known.resume_from_checkpoint
    if first_process and os.path.isdir(out) and os.listdir(out) and not asked:
        raise UserError(
            f"--output-dir {out} already holds files: choose a new folder, pass --overwrite-output-dir "
            f"to write into it (files of the same names are replaced), or --resume-from-checkpoint to "
            f"continue a run there"
        )


def usage(prog):
    """The one short usage line (the full one lists ~200 Trainer options and would bury the error under it)."""
    return f"{prog or 'the command'} [--help] [{HELP_TRAINER}] [OPTIONS]"


def print_help(argument_classes, prog, description):
    """--help: the command's own options (its dataclasses and OutputArguments), read from the dataclasses without
    importing transformers, then where Trainer's options are."""
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=usage(prog),
        description=description,
        epilog=TRAINER_NOTE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    for argument_class in (*argument_classes, OutputArguments):
        group = parser.add_argument_group(re.sub(r"(?<!^)([A-Z])", r" \1", argument_class.__name__).lower())
        for f in (f for f in dataclasses.fields(argument_class) if f.init):  # (as HfArgumentParser: no `model`)
            text = f.metadata.get("help", "")
            if f.default not in (None, dataclasses.MISSING) and "(default" not in text:
                text += f" (default: {f.default})"
            kind = {"nargs": "?", "metavar": "true|false"} if f.type is bool else {"metavar": f.name.upper()}
            group.add_argument(f"--{f.name.replace('_', '-')}", help=text, **kind)
    parser.print_help()


def parse_arguments(argument_classes, argv=None, prog=None, description=None):
    """The command's argument dataclasses, then `TrainingArguments`, parsed from `argv`; the model opened once (the
    first dataclass's `model`, its ModelFolder); logging to stdout and the seed set (before any model is built, so
    that new weights are reproducible). --help and --help-trainer print and exit 0."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print_help(argument_classes, prog, description)
        sys.exit(0)
    from transformers import HfArgumentParser, TrainingArguments, set_seed

    from ..model_folder import open_model
    from . import option

    if HELP_TRAINER in argv:
        HfArgumentParser(TrainingArguments, prog=prog, usage=usage(prog)).print_help()
        sys.exit(0)
    parser = HfArgumentParser((*argument_classes, OutputArguments, TrainingArguments), prog=prog, usage=usage(prog))
    # Unknown options and a missing model first: TrainingArguments sets up devices when it is built, which takes
    # seconds.
    known, unknown = parser.parse_known_args(args=argv)
    if unknown:
        raise UserError(f"unknown options {unknown}: `{prog or 'the command'} --help` lists them")
    folder = None
    if known.model_name_or_path:
        with option("--model-name-or-path", known.model_name_or_path):
            folder = open_model(known.model_name_or_path)
    check_output_dir(known)
    try:
        *parsed, _, training_args = parser.parse_args_into_dataclasses(args=argv)
    except ValueError as e:  # options that TrainingArguments' own checks refuse together (its __post_init__)
        raise UserError(first_line(e)) from None
    parsed[0].model = folder  # opened once: what the training function loads
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO,
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    set_seed(training_args.seed)
    return (*parsed, training_args)


def finetune_arguments(argv=None, prog=None, description=None):
    """(HeadArguments, FinetuneDataArguments, TrainingArguments) of a `finetune TASK` command line."""
    return parse_arguments((HeadArguments, FinetuneDataArguments), argv, prog, description)


def pretrain_arguments(argv=None, prog=None, description=None):
    """(PretrainModelArguments, PretrainDataArguments, TrainingArguments) of a `pretrain` command line."""
    return parse_arguments((PretrainModelArguments, PretrainDataArguments), argv, prog, description)
