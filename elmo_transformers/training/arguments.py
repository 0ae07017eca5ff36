"""The training commands' command lines (`finetune TASK`, `pretrain`): their argument dataclasses and Trainer's
`TrainingArguments`, parsed before any model or data code is imported. --help lists the ELMo options from the
dataclasses below without importing transformers (which imports torch); `--help-trainer` lists Trainer's. A usage
error is one line after a short usage line, not the usage of every Trainer option."""

import argparse
import dataclasses
import logging
import os
import re
import sys
from dataclasses import dataclass, field

from ..errors import UserError, first_line
from ..models import DEFAULT_MODEL


@dataclass
class HeadArguments:
    model_name_or_path: str = field(default=DEFAULT_MODEL,
                                    metadata={"help": "ElmoModel folder or Hub repo id (converted AllenNLP weights, "
                                              "`elmo-transformers pretrain` output) or an already fine-tuned head "
                                              "of the same kind (default: the shipped model)."})
    freeze_bilm: bool = field(default=True, metadata={"help": "Keep the biLM frozen (the ELMo recipe); false: full "
                                                              "fine-tuning."})
    task_encoder: str | None = field(default=None, metadata={"help": "'linear' or 'lstm' (default: the script's)."})
    task_encoder_dim: int = field(default=128, metadata={"help": "Hidden size per direction of the 'lstm' encoder."})
    mix_l2_lambda: float = field(default=0.0, metadata={"help": "L2 penalty on the scalar-mix weights (paper: 0.001)."})
    dropout: float = field(default=0.5, metadata={"help": "Dropout on the ELMo vectors (AllenNLP default 0.5)."})
    scalar_mix_parameters: str | None = field(
        default=None,
        metadata={"help": "Fixed (untrained) mix weights before softmax, one per biLM layer, as JSON (AllenNLP's "
                  "scalar_mix_parameters); e.g. '[0, -1e4, -1e4]' uses layer 0 (context-free) only."},
    )


@dataclass
class FinetuneDataArguments:
    train_file: str | None = field(default=None, metadata={"help": "Local training file (.conll/.json/.jsonl/.csv)."})
    validation_file: str | None = field(default=None, metadata={"help": "Local evaluation file."})
    test_file: str | None = field(default=None, metadata={"help": "Local test file (predicted at the end)."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset name (instead of files)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset configuration."})
    text_column: str | None = field(default=None, metadata={"help": "Column of the words or text."})
    label_column: str | None = field(default=None, metadata={"help": "Column of the labels."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N eval/test examples."})
    max_words: int | None = field(default=None, metadata={"help": "Truncate longer examples to this many words."})


@dataclass
class PretrainModelArguments:
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Existing ElmoModel / ElmoForLanguageModeling folder to start from (new softmax unless its "
                  "vocabulary is reused); omit to train from scratch with the size arguments below."},
    )
    char_embedding_dim: int = field(default=16, metadata={"help": "From scratch: character embedding size."})
    filters: str = field(
        default="[[1,32],[2,32],[3,64],[4,128],[5,256],[6,512],[7,1024]]",
        metadata={"help": "From scratch: char-CNN filters as JSON [[width, number], ...]."},
    )
    n_highway: int = field(default=1, metadata={"help": "From scratch: highway layers."})
    lstm_dim: int = field(default=1024, metadata={"help": "From scratch: LSTM cell size."})
    projection_dim: int = field(default=128, metadata={"help": "From scratch: LSTM projection / token embedding size."})
    n_layers: int = field(default=2, metadata={"help": "From scratch: LSTM layers per direction."})
    n_negative_samples: int | None = field(
        default=None, metadata={"help": "Sampled softmax with this many negatives per batch (default: the starting "
                                "LM's, or 8192 as bilm-tf; from scratch: none, the full softmax)."}
    )
    add_words: int = field(default=0, metadata={"help": "Continuing an LM: append up to this many of the training "
                                                "text's out-of-vocabulary words to its vocabulary and softmax."})
    add_words_min_count: int = field(default=5, metadata={"help": "--add-words: only words seen this often."})
    lm_dropout: float = field(default=0.1, metadata={"help": "Dropout on the top biLM layer before the softmax."})


@dataclass
class PretrainDataArguments:
    train_file: list[str] | None = field(default=None, metadata={"help": "Training text files (.txt, .txt.gz)."})
    validation_file: list[str] | None = field(default=None, metadata={"help": "Evaluation text files."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset name (instead of files)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset configuration."})
    text_column: str = field(default="text", metadata={"help": "Column holding the text."})
    validation_split_percentage: float = field(
        default=1.0,
        metadata={"help": "Percent of the training lines held out when there is no validation split (0: none)."},
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training lines."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N evaluation lines."})
    max_words: int = field(default=50, metadata={"help": "Split lines into windows of at most this many words."})
    vocab_file: str | None = field(default=None, metadata={"help": "bilm-tf vocabulary file (<S>, </S>, <UNK>, ...)."})
    vocab_size: int | None = field(default=50000, metadata={"help": "Building the vocabulary: most lines to keep."})
    min_count: int = field(default=1, metadata={"help": "Building the vocabulary: keep words seen this often."})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for datasets.map."})


@dataclass
class OutputArguments:
    """Trainer writes into --output-dir whatever is there; the commands ask first (transformers 5 has no
    TrainingArguments.overwrite_output_dir)."""

    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Write into an --output-dir that already holds files (files of the same names are replaced)."})


INPUT_OPTIONS = ("model_name_or_path", "train_file", "validation_file", "test_file", "vocab_file")
HELP_TRAINER = "--help-trainer"
TRAINER_NOTE = (f"Trainer's options (transformers.TrainingArguments) are accepted too: --output-dir, --do-train, "
                f"--do-eval, --learning-rate, --num-train-epochs, --per-device-train-batch-size, ...; `{HELP_TRAINER}` "
                "lists every one. Options are written with - or _ alike (--output-dir, --output_dir).")


def check_output_dir(known):
    """--output-dir apart from every input (the model, the data and vocabulary files); one that already holds files
    is written into only when the run resumes there or --overwrite-output-dir says so."""
    from ..output_paths import check_output_apart
    from ..cli import option

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
        raise UserError(f"--output-dir {out} already holds files: choose a new folder, pass --overwrite-output-dir "
                        f"to write into it (files of the same names are replaced), or --resume-from-checkpoint to "
                        f"continue a run there")


def usage(prog):
    """The one short usage line (the full one lists ~200 Trainer options and would bury the error under it)."""
    return f"{prog or 'the command'} [--help] [{HELP_TRAINER}] [OPTIONS]"


def print_help(argument_classes, prog, description):
    """--help: the command's own options (its dataclasses and OutputArguments), read from the dataclasses without
    importing transformers, then where Trainer's options are."""
    parser = argparse.ArgumentParser(prog=prog, usage=usage(prog), description=description, epilog=TRAINER_NOTE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    for argument_class in (*argument_classes, OutputArguments):
        group = parser.add_argument_group(re.sub(r"(?<!^)([A-Z])", r" \1", argument_class.__name__).lower())
        for f in dataclasses.fields(argument_class):
            text = f.metadata.get("help", "")
            if f.default not in (None, dataclasses.MISSING) and "(default" not in text:
                text += f" (default: {f.default})"
            kind = {"nargs": "?", "metavar": "true|false"} if f.type is bool else {"metavar": f.name.upper()}
            group.add_argument(f"--{f.name.replace('_', '-')}", help=text, **kind)
    parser.print_help()


def parse_arguments(argument_classes, argv=None, prog=None, description=None):
    """The command's argument dataclasses, then `TrainingArguments`, parsed from `argv`; the model resolved once
    (`model_name_or_path` is then its folder); logging to stdout and the seed set (before any model is built, so
    that new weights are reproducible). --help and --help-trainer print and exit 0."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print_help(argument_classes, prog, description)
        sys.exit(0)
    from transformers import HfArgumentParser, TrainingArguments, set_seed

    from ..cli import option
    from ..model_source import resolve_model

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
            folder = resolve_model(known.model_name_or_path)
    check_output_dir(known)
    try:
        *parsed, _, training_args = parser.parse_args_into_dataclasses(args=argv)
    except ValueError as e:  # options that TrainingArguments' own checks refuse together (its __post_init__)
        raise UserError(first_line(e)) from None
    if folder is not None:
        parsed[0].model_name_or_path = folder  # resolved once: the code after this loads the folder
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO,
                        handlers=[logging.StreamHandler(sys.stdout)])
    set_seed(training_args.seed)
    return (*parsed, training_args)


def finetune_arguments(argv=None, prog=None, description=None):
    """(HeadArguments, FinetuneDataArguments, TrainingArguments) of a `finetune TASK` command line."""
    return parse_arguments((HeadArguments, FinetuneDataArguments), argv, prog, description)


def pretrain_arguments(argv=None, prog=None, description=None):
    """(PretrainModelArguments, PretrainDataArguments, TrainingArguments) of a `pretrain` command line."""
    return parse_arguments((PretrainModelArguments, PretrainDataArguments), argv, prog, description)
