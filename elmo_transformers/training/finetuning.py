"""What the two fine-tuning tasks share: arguments, labels, loading the head, and the Trainer run."""

import json
import logging
import sys
from dataclasses import dataclass, field

import datasets
from transformers import HfArgumentParser, Trainer, TrainingArguments, set_seed

from configuration_elmo import ElmoConfig
from ..errors import DataError
from ..model_source import load_config
from ..models import DEFAULT_MODEL
from .data import load_splits, settle_before_trainer
from ..output_paths import check_output_apart

logger = logging.getLogger(__name__)


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
class DataArguments:
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


def parse_and_load(argv=None, prog=None):
    """The command line (head, data and Trainer arguments), logging and the seed, then the data splits, checked
    against the --do_* flags: what both fine-tuning tasks start with."""
    parser = HfArgumentParser((HeadArguments, DataArguments, TrainingArguments), prog=prog)
    head_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    load_config(head_args.model_name_or_path, "--model-name-or-path")  # a missing or broken model: one line, now
    inputs = [head_args.model_name_or_path, data_args.train_file, data_args.validation_file, data_args.test_file]
    check_output_apart(training_args.output_dir, inputs, "--output_dir", DataError)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO,
                        handlers=[logging.StreamHandler(sys.stdout)])
    set_seed(training_args.seed)
    raw = load_data(data_args)
    check_training_args(training_args, raw)
    return head_args, data_args, training_args, raw


def load_data(data_args):
    """The splits (train / validation / test), limited to --max_*_samples."""
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    files = {split: [path] for split, path in files.items() if path}
    if data_args.dataset_name is None and not files:
        raise DataError("give --train_file / --validation_file / --test_file or --dataset_name")
    raw = load_splits(data_args.dataset_name, data_args.dataset_config_name, files)
    for split in raw:
        if len(raw[split]) == 0:
            raise DataError(f"the {split} split has no examples")
    for split in raw:
        limit = data_args.max_train_samples if split == "train" else data_args.max_eval_samples
        if limit is not None:
            raw[split] = raw[split].select(range(min(limit, len(raw[split]))))
    return raw


def label_mapping(raw, column, nested, model_name_or_path, head_class):
    """The labels, in class-id order. A head of this kind keeps its own `label2id` (its classifier rows mean those
    labels: data whose names sort differently must not swap them); otherwise the ClassLabel names of the data, else
    the sorted values seen in every split."""
    config = ElmoConfig.from_pretrained(model_name_or_path)
    if head_class.__name__ in (config.architectures or []):
        return [config.id2label[i] for i in range(config.num_labels)]
    if column not in next(iter(raw.values())).column_names:
        raise DataError(f"no column {column!r} in the data (columns: {next(iter(raw.values())).column_names}); "
                        "set --label_column")
    feature = class_label(raw, column, nested)
    if feature is not None:
        return list(feature.names)
    values = set()
    for name, split in raw.items():
        for index, value in enumerate(split[column]):
            values.update(label_values(value, nested, f"{name} example {index}"))
    return sorted(values)


def class_label(raw, column, nested):
    """The ClassLabel feature of a label column (labels stored as ids), or None (labels stored as names)."""
    feature = next(iter(raw.values())).features[column]
    feature = feature.feature if nested and hasattr(feature, "feature") else feature
    return feature if isinstance(feature, datasets.ClassLabel) else None


def label_values(value, nested, where):
    """The label(s) of one example as a list, refusing a missing (null) label by name."""
    if value is None or (nested and any(v is None for v in value)):
        raise DataError(f"{where}: missing label (null)")
    return list(value) if nested else [value]


def label_encoder(raw, column, nested, labels):
    """A function (value, where) -> class id(s) for the label column: names (or ClassLabel ids, read as their
    names) are looked up in `labels`; a label the model does not know is an error naming the example."""
    feature = class_label(raw, column, nested)
    label2id = {str(label): i for i, label in enumerate(labels)}

    def encode(value, where):
        ids = []
        for label in label_values(value, nested, where):
            name = feature.int2str(label) if feature is not None else str(label)
            if name not in label2id:
                raise DataError(f"{where}: label {name!r} is not one of the model's labels {list(label2id)}")
            ids.append(label2id[name])
        return ids if nested else ids[0]

    return encode


def load_head(head_class, head_args, labels, default_encoder):
    """The head from an ElmoModel (or same-head) folder, with the label mapping and the ELMo-recipe settings."""
    return head_class.from_pretrained(
        head_args.model_name_or_path,
        num_labels=len(labels),
        id2label={i: str(label) for i, label in enumerate(labels)},
        label2id={str(label): i for i, label in enumerate(labels)},
        freeze_bilm=head_args.freeze_bilm,
        task_encoder=head_args.task_encoder or default_encoder,
        task_encoder_dim=head_args.task_encoder_dim,
        mix_l2_lambda=head_args.mix_l2_lambda,
        dropout=head_args.dropout,
        scalar_mix_parameters=json.loads(head_args.scalar_mix_parameters) if head_args.scalar_mix_parameters else None,
    )


def tokenize_splits(raw, encode, training_args):
    """Every split through `encode(batch, indices, split)` (batched; the split's name for its error messages), once
    per machine under several processes."""
    with training_args.main_process_first(desc="tokenize"):
        return {name: split.map(encode, batched=True, with_indices=True, fn_kwargs={"split": name},
                                remove_columns=split.column_names, desc=f"tokenize {name}")
                for name, split in raw.items()}


def run(model, tokenizer, training_args, splits, collator, compute_metrics):
    """Train, evaluate, predict the test split, save: the saved folder loads with the Auto classes and
    trust_remote_code. Metrics are printed and saved ({train,eval,test}_results.json)."""
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
        trainer.log_metrics("train", result.metrics)
        trainer.save_metrics("train", result.metrics)
        trainer.save_state()
    if training_args.do_eval:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    if training_args.do_predict:
        metrics = trainer.predict(splits["test"], metric_key_prefix="test").metrics
        trainer.log_metrics("test", metrics)
        trainer.save_metrics("test", metrics)
    return trainer


def check_training_args(training_args: TrainingArguments, splits):
    for flag, split in (("do_train", "train"), ("do_eval", "validation"), ("do_predict", "test")):
        if getattr(training_args, flag) and split not in splits:
            raise DataError(f"--{flag} needs a {split} split")

