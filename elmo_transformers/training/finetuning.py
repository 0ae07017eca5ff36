"""Fine-tuning a task head (`elmo-transformers finetune`): data, labels, loading the head, and the three tasks, token
and sequence classification and extractive question answering, with their metrics (their arguments are
`arguments.py`'s, the Trainer run `runner.run`)."""

import collections
import re
import string

import logging

import datasets
from datasets.exceptions import DatasetGenerationError
from transformers import DataCollatorForTokenClassification, DataCollatorWithPadding

from modeling_elmo import ElmoForQuestionAnswering, ElmoForSequenceClassification, ElmoForTokenClassification

from ..errors import DataError, first_line
from ..model_folder import loading, open_model
from ..model_source import load_model
from .data import is_squad_file, load_splits, read_squad
from .runner import check_splits, json_argument, limit_samples, model_options, run, settle_resume_point

logger = logging.getLogger(__name__)


def load(head_args, data_args, training_args, unread=()):
    """(the starting ModelFolder: `head_args.model`, else `model_name_or_path` opened; its config; the data splits)
    of the arguments, the splits checked against the do_* arguments: what the fine-tuning tasks start with. The
    config first: a broken one is one line before the data is read. `unread`: (the data arguments the task does not
    read, why): one given is refused, not ignored."""
    for name in ("max_words", "max_answer_words"):
        value = getattr(data_args, name)
        if value is not None and value < 1:
            raise DataError(f"{name} {value}: must be at least 1 (words)", value, argument=name)
    names, why = unread or ((), "")
    for name in names:
        value = getattr(data_args, name)
        if value is not None:
            raise DataError(f"{name} {value!r}: {why}; leave it out", value, argument=name)
    settle_resume_point(training_args)
    source = head_args.model or open_model(head_args.model_name_or_path)
    with loading(source.name):
        config = source.elmo_config()
    raw = load_data(data_args)
    check_splits(training_args, raw)
    return source, config, raw


def load_data(data_args):
    """The splits (train / validation / test), limited to max_*_samples."""
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    files = {split: [path] for split, path in files.items() if path}
    if data_args.dataset_name is None and not files:
        raise DataError("no data: give train_file / validation_file / test_file or dataset_name")
    if data_args.dataset_name is None and all(is_squad_file(path) for paths in files.values() for path in paths):
        try:
            raw = datasets.DatasetDict(
                {
                    split: datasets.Dataset.from_generator(read_squad, gen_kwargs={"paths": paths})
                    for split, paths in files.items()
                }
            )
        except DatasetGenerationError as e:  # datasets wraps the generator's errors: read_squad's one line
            if isinstance(e.__cause__, DataError):
                raise e.__cause__ from None
            raise
    else:
        raw = load_splits(data_args.dataset_name, data_args.dataset_config_name, files)
    for split in raw:
        if len(raw[split]) == 0:
            raise DataError(f"the {split} split has no examples")
    return limit_samples(raw, data_args.max_train_samples, data_args.max_eval_samples)


def label_mapping(raw, column, nested, config, head_class):
    """The label names, in class-id order. A head of this kind (the starting model's `config`) keeps its own
    `label2id` (its classifier rows mean those labels: data whose names sort differently must not swap them);
    otherwise the ClassLabel names of the data, else the sorted values seen in every split (an integer written as a
    float, 1.0, is the integer: `label_name`). At least two classes in the train split; a warning names the labels of
    another split that the train split lacks (classes the model never learns)."""
    if head_class.__name__ in (config.architectures or []):
        return [config.id2label[i] for i in range(config.num_labels)]
    require_column(raw, column, "label_column")
    feature = class_label(raw, column, nested)
    seen = {}
    for name, split in raw.items():
        seen[name] = set()
        for index, value in enumerate(split[column]):
            seen[name].update(label_values(value, nested, f"{name} example {index}"))
    if feature is not None:
        labels = list(feature.names)
        seen = {name: {feature.int2str(label) for label in values} for name, values in seen.items()}
    else:
        values = set().union(*seen.values())
        if len({type(value) in (int, float) or type(value) for value in values}) > 1:  # ints and floats are numbers
            types = sorted({type(value).__name__ for value in values})
            raise DataError(
                f"the labels of column {column!r} mix types ({', '.join(types)}): write every label the "
                "same way (e.g. all as strings)"
            )
        labels = [label_name(value) for value in sorted(values)]
        seen = {name: {label_name(value) for value in values} for name, values in seen.items()}
    trained = sorted(seen["train"]) if "train" in seen else labels  # (a validation label does not train)
    if len(trained) < 2:
        where = " in the train split" if "train" in seen else ""
        raise DataError(
            f"the column {column!r} holds one label ({', '.join(map(repr, trained))}){where}: a "
            "classifier needs at least two classes; give data with examples of two or more labels"
        )
    for name, values in seen.items():
        if "train" in seen and name != "train" and values - seen["train"]:
            untrained = ", ".join(repr(label) for label in sorted(values - seen["train"]))
            logger.warning(
                f"the {name} split has labels the train split lacks ({untrained}): the model never learns "
                "them, so their examples count as errors; add training examples of them or leave those "
                "examples out"
            )
    return labels


def require_column(raw, column, argument):
    """`column` is in the data, else an error that says to set `argument` (the name of the argument that gives it)."""
    columns = next(iter(raw.values())).column_names
    if column not in columns:
        raise DataError(
            f"{argument} {column!r}: no such column in the data (its columns: {columns})", column, argument=argument
        )


def class_label(raw, column, nested):
    """The ClassLabel feature of a label column (labels stored as ids), or None (labels stored as names)."""
    feature = next(iter(raw.values())).features[column]
    feature = feature.feature if nested and hasattr(feature, "feature") else feature
    return feature if isinstance(feature, datasets.ClassLabel) else None


def label_values(value, nested, where):
    """The label(s) of one example as a list, refusing a missing (null) label and one that is not a single value by
    name."""
    if nested and not isinstance(value, (list, tuple)):
        raise DataError(f"{where}: the tags must be a list, one per word; got {type(value).__name__} {value!r:.50}")
    for label in value if nested else [value]:
        if label is None:
            raise DataError(f"{where}: missing label (null)")
        if not isinstance(label, (str, int, float, bool)):
            raise DataError(f"{where}: a label must be one string or number, got {type(label).__name__} {label!r:.50}")
    return list(value) if nested else [value]


def label_name(label):
    """The name of the class of a label that is not a ClassLabel id: an integer written as a float (1.0, as a column
    that also holds a float has it) is the integer's, "1"."""
    return str(int(label) if isinstance(label, float) and label.is_integer() else label)


def label_encoder(raw, column, nested, labels):
    """A function (value, where) -> class id(s) for the label column: names (or ClassLabel ids, read as their
    names) are looked up in `labels`; a label the model does not know is an error naming the example."""
    feature = class_label(raw, column, nested)
    label2id = {label: i for i, label in enumerate(labels)}

    def encode(value, where):
        ids = []
        for label in label_values(value, nested, where):
            name = feature.int2str(label) if feature is not None else label_name(label)
            if name not in label2id:
                raise DataError(f"{where}: label {name!r} is not one of the model's labels {list(label2id)}")
            ids.append(label2id[name])
        return ids if nested else ids[0]

    return encode


def load_head(head_class, source, head_args, labels, default_encoder, **head_updates):
    """(the head, its tokenizer) from an ElmoModel (or same-head) folder `source` (a ModelFolder), with the label
    mapping (`labels`; None for a head without classes), the ELMo-recipe settings and the head's own config fields
    (`head_updates`)."""
    with model_options(head_args):  # a refused value (dropout=1.5, task_encoder="x"): one line
        if labels is not None:
            head_updates.update(
                num_labels=len(labels),
                id2label={i: str(label) for i, label in enumerate(labels)},
                label2id={str(label): i for i, label in enumerate(labels)},
            )
        updates = dict(
            **head_updates,
            freeze_bilm=head_args.freeze_bilm,
            task_encoder=head_args.task_encoder or default_encoder,
            task_encoder_dim=head_args.task_encoder_dim,
            mix_l2_lambda=head_args.mix_l2_lambda,
            dropout=head_args.dropout,
            scalar_mix_parameters=json_argument(
                head_args.scalar_mix_parameters, "scalar_mix_parameters", "'[0, -1e4, -1e4]'"
            ),
        )
        source.elmo_config(**updates)  # refused here, naming the argument
    check_head_shape(source, head_class, updates)
    return load_model(source, head_class, config=updates)


def check_head_shape(source, head_class, updates):
    """Refuse to train a head of `head_class` further (`source` is one) with `updates` that reshape its layers: its
    weights would not fit them. A task encoder's size counts where either side is a BiLSTM; a pair encoder's where
    both have one (a single-sentence head grows a new one)."""
    saved = source.elmo_config()
    if head_class.__name__ not in (saved.architectures or []):
        return
    for name in ("task_encoder", "task_encoder_dim", "pair_encoder_dim"):
        given, trained = updates.get(name), getattr(saved, name)
        if name == "task_encoder_dim" and "lstm" not in (updates["task_encoder"], saved.task_encoder):
            continue
        if name == "pair_encoder_dim" and None in (given, trained):
            continue
        if given != trained:
            raise DataError(
                f"{name} {given!r}: {source.name} is an {head_class.__name__} trained with {trained!r} there, the "
                f"shape of its weights: give {trained!r} to train it further, or start from the model it was "
                "trained from",
                given,
                argument=name,
            )


def tokenize_splits(raw, encode, training_args):
    """Every split through `encode(batch, indices, split)` (batched; the split's name for its error messages), once
    per machine under several processes."""
    with training_args.main_process_first(desc="tokenize"):
        try:
            return {
                name: split.map(
                    encode,
                    batched=True,
                    with_indices=True,
                    fn_kwargs={"split": name},
                    remove_columns=split.column_names,
                    desc=f"tokenize {name}",
                )
                for name, split in raw.items()
            }
        except DataError:
            raise
        except (TypeError, ValueError) as e:  # the tokenizer's refusals of a text (None, not a string)
            raise DataError(f"the text column cannot be tokenized: {first_line(e)}") from None


def token_metrics(labels):
    """Accuracy; for BIO / IOB2 tag sets also span precision, recall and F1, by seqeval's conlleval rule (an I- without
    a matching chunk starts one)."""
    is_bio = all(tag == "O" or tag[:2] in ("B-", "I-") for tag in labels)

    def compute_metrics(prediction):
        predicted, gold = prediction.predictions.argmax(-1), prediction.label_ids
        keep = gold != -100
        metrics = {"accuracy": float((predicted[keep] == gold[keep]).mean())}
        if is_bio:
            from seqeval.metrics import f1_score, precision_score, recall_score

            p_tags = [[labels[i] for i in p[k]] for p, k in zip(predicted, keep)]
            g_tags = [[labels[i] for i in g[k]] for g, k in zip(gold, keep)]
            metrics.update(
                {
                    name: float(score(g_tags, p_tags, zero_division=0))
                    for name, score in (("precision", precision_score), ("recall", recall_score), ("f1", f1_score))
                }
            )
        return metrics

    return compute_metrics


def token_classification(head_args, data_args, training_args):
    """Fine-tune a token-classification head (`finetune token-classification`) on a model folder
    (`head_args.model_name_or_path`; `head_args.model` where it is open already); returns the Trainer."""
    unread = ("text_pair_column",), "token classification reads one sentence an example"
    source, config, raw = load(head_args, data_args, training_args, unread)
    words_column = data_args.text_column or "tokens"
    require_column(raw, words_column, "text_column")
    tags_column = data_args.label_column or ("tags" if "tags" in next(iter(raw.values())).column_names else "ner_tags")
    labels = label_mapping(raw, tags_column, True, config, ElmoForTokenClassification)
    label_ids = label_encoder(raw, tags_column, True, labels)
    model, tokenizer = load_head(ElmoForTokenClassification, source, head_args, labels, default_encoder="lstm")

    def encode(batch, indices, split):
        encoded = tokenizer(
            batch[words_column],
            is_split_into_words=True,
            truncation=data_args.max_words is not None,
            max_length=data_args.max_words,
        )
        encoded["labels"] = []
        for index, words, tags, ids in zip(indices, batch[words_column], batch[tags_column], encoded["input_ids"]):
            where = f"{split} example {index}"
            tag_ids = label_ids(tags, where)
            if len(tag_ids) != len(words):
                raise DataError(f"{where}: {len(words)} words but {len(tag_ids)} tags (one tag per word)")
            encoded["labels"].append(tag_ids[: len(ids)])
        return encoded

    splits = tokenize_splits(raw, encode, training_args)
    collator = DataCollatorForTokenClassification(tokenizer)
    return run(model, tokenizer, training_args, splits, collator, token_metrics(labels))


def sequence_metrics(prediction):
    from sklearn.metrics import f1_score

    predicted, gold = prediction.predictions.argmax(-1), prediction.label_ids
    macro_f1 = f1_score(gold, predicted, average="macro", zero_division=0)
    return {"accuracy": float((predicted == gold).mean()), "macro_f1": float(macro_f1)}


def sequence_classification(head_args, data_args, training_args):
    """Fine-tune a sequence-classification head (`finetune sequence-classification`) on a model folder
    (`head_args.model_name_or_path`; `head_args.model` where it is open already), on texts or, with
    `data_args.text_pair_column`, on text pairs (the head's ESIM-style pair encoder); returns the Trainer."""
    source, config, raw = load(head_args, data_args, training_args)
    text_column, label_column = data_args.text_column or "text", data_args.label_column or "label"
    pair_column = data_args.text_pair_column
    require_column(raw, text_column, "text_column")
    pair_updates = {}
    if pair_column is not None:
        require_column(raw, pair_column, "text_pair_column")
        pair_updates = dict(pair_encoder_dim=head_args.pair_encoder_dim, pair_alignment=head_args.pair_alignment)
    labels = label_mapping(raw, label_column, False, config, ElmoForSequenceClassification)
    label_id = label_encoder(raw, label_column, False, labels)
    model, tokenizer = load_head(
        ElmoForSequenceClassification, source, head_args, labels, default_encoder="linear", **pair_updates
    )

    def encode(batch, indices, split):
        for argument, column in (("text_column", text_column), ("text_pair_column", pair_column)):
            for index, text in zip(indices, batch[column] if column is not None else ()):
                if not isinstance(text, str):
                    raise DataError(
                        f"{argument} {column!r}: {split} example {index} holds {text!r:.50}, not a text: give every "
                        "example one, an empty string for none",
                        column,
                        argument=argument,
                    )
        pairs = None if pair_column is None else batch[pair_column]
        encoded = tokenizer(
            batch[text_column], pairs, truncation=data_args.max_words is not None, max_length=data_args.max_words
        )
        encoded["labels"] = [
            label_id(label, f"{split} example {index}") for index, label in zip(indices, batch[label_column])
        ]
        return encoded

    splits = tokenize_splits(raw, encode, training_args)
    return run(model, tokenizer, training_args, splits, DataCollatorWithPadding(tokenizer), sequence_metrics)


def normalize_answer(text):
    """SQuAD's official normalisation (its evaluate-v1.1.py): lower case, no punctuation, no articles (a, an, the),
    single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def squad_scores(prediction, answers):
    """SQuAD v1.1's exact match and F1 (0 to 1) of one predicted answer: the best over the gold `answers`."""
    predicted = normalize_answer(prediction).split()
    exact, f1 = 0.0, 0.0
    for answer in answers:
        gold = normalize_answer(answer).split()
        exact = max(exact, float(predicted == gold))
        common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
        if common:
            precision, recall = common / len(predicted), common / len(gold)
            f1 = max(f1, 2 * precision * recall / (precision + recall))
    return exact, f1


def answer_words(spans, start, text):
    """The first and last word (of a context's word `spans`) of the answer `text` at character `start`, or
    (-1, -1) where it is not within the words (the loss ignores such positions)."""
    end = start + len(text)
    words = [i for i, (s, e) in enumerate(spans) if s < end and e > start]
    return (words[0], words[-1]) if words else (-1, -1)


def best_spans(start_logits, end_logits, lengths, max_answer_words):
    """(first, last) word of the best span of each context: the highest start + end logit with first <= last <
    first + max_answer_words, over the context's `lengths` words ((0, -1) for a context with no words)."""
    import torch

    best = []
    for starts, ends, n in zip(torch.as_tensor(start_logits), torch.as_tensor(end_logits), lengths):
        if n == 0:
            best.append((0, -1))
            continue
        scores = starts[:n, None].double() + ends[None, :n].double()
        allowed = torch.ones(n, n, dtype=torch.bool).triu().tril(max_answer_words - 1)
        index = int(scores.masked_fill(~allowed, float("-inf")).argmax())
        best.append((index // n, index % n))
    return best


def check_answers_kept(splits, max_words):
    """The train split's answers within the words a context keeps (`max_words`, None: all): none is refused where
    `max_words` cut them all (the run would learn nothing, its loss 0), some missing are counted in a warning (they
    are not learned from)."""
    if "train" not in splits:
        return
    starts = splits["train"]["start_positions"]
    cut = sum(start < 0 or (max_words is not None and start >= max_words) for start in starts)
    if cut == len(starts) and max_words is not None:
        raise DataError(
            f"max_words {max_words}: no train example's answer lies within its context's first {max_words} words, so "
            "there is nothing to learn from: raise it, or leave it out",
            max_words,
            argument="max_words",
        )
    if cut:
        kept = f" kept (the first {max_words})" if max_words is not None else ""
        logger.warning(
            f"{cut:,} of {len(starts):,} train examples have no answer within their context's words{kept}: they are "
            "not learned from"
        )


def question_answering(head_args, data_args, training_args):
    """Fine-tune an extractive question-answering head (`finetune question-answering`, `ElmoForQuestionAnswering`)
    on a model folder, from SQuAD-format JSON files or a dataset with `question`, `context` and `answers` columns
    (`answers`: {"text": [...], "answer_start": [...]}, SQuAD's); returns the Trainer. Training reads each question's
    first answer; a context longer than `max_words` keeps its first words (an answer past them is not learned
    from). Metrics: SQuAD's exact match and F1 (the best over the gold answers) of the best span of at most
    `data_args.max_answer_words` words."""
    unread = ("text_column", "text_pair_column", "label_column"), "question answering reads SQuAD's columns"
    source, config, raw = load(head_args, data_args, training_args, unread)
    columns = next(iter(raw.values())).column_names
    missing = [column for column in ("question", "context", "answers") if column not in columns]
    if missing:
        raise DataError(
            f"the data has no {', '.join(map(repr, missing))} column (its columns: {columns}): question answering "
            "reads SQuAD-format JSON files, or data with SQuAD's question, context and answers columns"
        )
    model, tokenizer = load_head(ElmoForQuestionAnswering, source, head_args, None, default_encoder="lstm")
    truncate = data_args.max_words is not None

    def encode(batch, indices, split):
        contexts = [tokenizer.segment(context) for context in batch["context"]]
        words = [w[: data_args.max_words] if truncate else w for w, _ in contexts]
        encoded = tokenizer([tokenizer.split_words(q) for q in batch["question"]], words, is_split_into_words=True)
        encoded["start_positions"], encoded["end_positions"] = [], []
        for index, (_, spans), answers, context in zip(indices, contexts, batch["answers"], batch["context"]):
            if not answers["text"]:
                raise DataError(
                    f"{split} example {index}: no answer (SQuAD 2.0's unanswerable questions, is_impossible): the "
                    "head learns answerable questions, as SQuAD v1.1's; leave such questions out of the data"
                )
            start, text = answers["answer_start"][0], answers["text"][0]
            if context[start : start + len(text)] != text or start < 0:
                raise DataError(
                    f"{split} example {index}: its answer {text!r:.60} is not at its answer_start {start} in the "
                    f"context (which reads {context[max(start, 0) : max(start, 0) + len(text)]!r:.60} there): fix "
                    "answer_start, the character offset of the answer's first character"
                )
            first, last = answer_words(spans, start, text)
            encoded["start_positions"].append(first)
            encoded["end_positions"].append(last)
        return encoded

    splits = tokenize_splits(raw, encode, training_args)
    check_answers_kept(splits, data_args.max_words)
    compute_metrics = None
    if "validation" in raw:
        validation = raw["validation"]
        contexts = [tokenizer.segment(context)[1][: data_args.max_words] for context in validation["context"]]

        def compute_metrics(prediction):
            start_logits, end_logits = prediction.predictions[:2]
            spans = best_spans(start_logits, end_logits, [len(s) for s in contexts], data_args.max_answer_words)
            totals = [0.0, 0.0]
            for (first, last), context_spans, context, answers in zip(
                spans, contexts, validation["context"], validation["answers"]
            ):
                answer = context[context_spans[first][0] : context_spans[last][1]] if last >= first else ""
                for i, score in enumerate(squad_scores(answer, answers["text"])):
                    totals[i] += score
            return {"exact_match": 100 * totals[0] / len(contexts), "f1": 100 * totals[1] / len(contexts)}

    return run(model, tokenizer, training_args, splits, DataCollatorWithPadding(tokenizer), compute_metrics)
