"""The one Trainer run behind every training function (`finetuning`, `pretraining`; their arguments are
`arguments.py`'s dataclasses and Trainer's `TrainingArguments`): the max_*_samples selection, the checks of the
model's arguments, and the train / evaluate / predict steps with their metrics printed and saved
({train,eval,test}_results.json)."""

import contextlib
import dataclasses
import json
import logging
import os
import re

from huggingface_hub.errors import StrictDataclassError
from transformers import Trainer
from transformers.trainer_utils import get_last_checkpoint

from ..errors import DataError, UserError, first_line
from .data import settle_before_trainer

logger = logging.getLogger(__name__)


def json_argument(value, argument, example):
    """The value of the argument named `argument` that holds JSON (None when not given), or one line naming it."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise UserError(
            f"{argument} {value!r:.100} is not JSON ({e.msg}); write it like {example}", value, argument=argument
        ) from None


# The field a configuration's refusal names first: "ElmoConfig.dropout must be ..." (options_elmo's rules) or
# "Field 'task_encoder' expected ..." (huggingface_hub's @strict types), then what it says of the value.
REFUSED_FIELD = re.compile(r"(?:ElmoConfig\.(\w+)|Field '(\w+)') (.*)")


@contextlib.contextmanager
def model_options(arguments):
    """Around building the model from `arguments` (a dataclass of arguments.py): a value the configuration refuses
    (`lstm_dim=0`, `dropout=1.5`) is one line, not a traceback, about the argument of the field's name where
    `arguments` has one (a command names its flag: --dropout), else naming the field."""
    try:
        yield
    except UserError:
        raise
    except (ValueError, StrictDataclassError) as e:  # StrictDataclassError: a value ElmoConfig refuses
        refused = REFUSED_FIELD.fullmatch(first_line(e))
        name = refused and (refused[1] or refused[2])
        if name in {f.name for f in dataclasses.fields(arguments)}:
            raise UserError(f"{name} {refused[3]}", argument=name) from None
        raise UserError(f"the model's configuration refuses it: {first_line(e)}") from None


def limit_samples(splits, max_train_samples=None, max_eval_samples=None):
    """Keep the first `max_train_samples` of the train split and `max_eval_samples` of the others (in place)."""
    for name in splits:
        limit = max_train_samples if name == "train" else max_eval_samples
        if limit is not None:
            splits[name] = splits[name].select(range(min(limit, len(splits[name]))))
    return splits


def check_splits(training_args, splits):
    """Each do_* argument needs its split: train, validation (do_eval), test (do_predict)."""
    for argument, split in (("do_train", "train"), ("do_eval", "validation"), ("do_predict", "test")):
        if getattr(training_args, argument) and split not in splits:
            raise DataError(f"{argument} needs a {split} split", argument=argument)


def settle_resume_point(training_args):
    """`resume_from_checkpoint` as the checkpoint folder it means, set before anything reads it (pre-training takes
    the checkpoint's vocabulary): a folder of a checkpoint, or "true" (Trainer.train's True: the last checkpoint of
    `output_dir`) when no folder has that name; one line for anything else."""
    value = training_args.resume_from_checkpoint
    if value is None:
        return
    if value is True or str(value).lower() == "true" and not os.path.isdir(value):
        folder = get_last_checkpoint(training_args.output_dir) if os.path.isdir(training_args.output_dir) else None
        if folder is None:
            raise DataError(
                f"resume_from_checkpoint {value}: output_dir {training_args.output_dir} holds no "
                "checkpoint-N folder to resume from: leave resume_from_checkpoint out to start a run"
            )
    elif os.path.isdir(value):
        folder = value
    else:
        raise DataError(
            f"resume_from_checkpoint {value}: no such folder: give a checkpoint folder (OUTPUT_DIR/"
            "checkpoint-N), or true for the last checkpoint of output_dir",
            value,
        )
    if not os.path.isfile(os.path.join(folder, "trainer_state.json")):
        raise DataError(
            f"resume_from_checkpoint {folder}: not a checkpoint of Trainer (no trainer_state.json): give "
            "a checkpoint folder (OUTPUT_DIR/checkpoint-N), or true for the last checkpoint of "
            "output_dir",
            folder,
        )
    training_args.resume_from_checkpoint = folder


def run(model, tokenizer, training_args, splits, collator, compute_metrics, length_column=None):
    """Train, evaluate, predict the test split and save: the saved folder loads with the Auto classes and
    trust_remote_code. With `length_column` (words per row), the metrics also count words: training words per
    second and the evaluation split's words, the figures language-model results are quoted in."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    logger.info(f"{type(model).__name__}: {model.num_parameters():,} parameters, {trainable:,} trainable")
    settle_before_trainer(model, tokenizer, training_args)
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=splits.get("train") if training_args.do_train else None,
        eval_dataset=splits.get("validation") if training_args.do_eval else None,
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=compute_metrics,
    )
    if training_args.do_train:
        result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        trainer.save_model()
        metrics = dict(result.metrics)
        if length_column:
            mean_words = sum(splits["train"][length_column]) / max(len(splits["train"]), 1)
            metrics["train_words_per_second"] = round(metrics["train_samples_per_second"] * mean_words, 1)
        save_metrics(trainer, "train", metrics)
        trainer.save_state()
    if training_args.do_eval:
        metrics = trainer.evaluate()
        if length_column:
            metrics["eval_words"] = sum(splits["validation"][length_column])
        save_metrics(trainer, "eval", metrics)
    if training_args.do_predict:
        save_metrics(trainer, "test", trainer.predict(splits["test"], metric_key_prefix="test").metrics)
    return trainer


def save_metrics(trainer, split, metrics):
    trainer.log_metrics(split, metrics)
    trainer.save_metrics(split, metrics)
