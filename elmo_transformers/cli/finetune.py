"""`elmo-transformers finetune token-classification | sequence-classification`: an ELMo task head with Trainer.

The ELMo recipe by default: frozen biLM, trainable scalar mix + gamma with dropout 0.5, then
- token-classification (POS tagging, NER, ...; `ElmoForTokenClassification`): a BiLSTM task encoder, one label per
  word (ELMo reads whole words: no sub-word alignment). Data: local CoNLL files (`token<TAB>tag`, blank line between
  sentences), JSON/CSV with a word-list column and a tag-list column, or a Hub dataset. Metrics: word accuracy, and
  for BIO/IOB2 tag sets (every tag O or X-TYPE) span precision / recall / F1.
- sequence-classification (`ElmoForSequenceClassification`): the sentence vector is the masked mean of the ELMo
  vectors over its words, then a linear classifier (`--task-encoder lstm` puts a BiLSTM before the mean). Data: local
  JSON Lines / JSON / CSV files with a text and a label column, or a Hub dataset. Text is split into words on
  whitespace, as the tokenizer does. Metrics: accuracy and macro F1.

    elmo-transformers finetune token-classification --model-name-or-path ELMO_FOLDER \\
        --train-file train.conll --validation-file valid.conll --output-dir out --do-train --do-eval
    elmo-transformers finetune sequence-classification --model-name-or-path ELMO_FOLDER \\
        --train-file train.jsonl --validation-file test.jsonl --output-dir out --do-train --do-eval

`elmo-transformers finetune TASK --help` lists every argument (Trainer's TrainingArguments included).
"""

import sys

from . import import_package


def spans(tags):
    """(type, start, end) chunks of one BIO / IOB2 tag sequence; an I- without a matching chunk starts one."""
    chunks, start, kind = set(), None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, label = tag.partition("-")
        if start is not None and (prefix != "I" or label != kind):
            chunks.add((kind, start, i))
            start = kind = None
        if prefix in ("B", "I") and start is None:
            start, kind = i, label
    return chunks


def token_metrics(labels):
    is_bio = all(tag == "O" or tag[:2] in ("B-", "I-") for tag in labels)

    def compute_metrics(prediction):
        predicted, gold = prediction.predictions.argmax(-1), prediction.label_ids
        keep = gold != -100
        metrics = {"accuracy": float((predicted[keep] == gold[keep]).mean())}
        if is_bio:
            found = correct = expected = 0
            for p, g, k in zip(predicted, gold, keep):
                p_spans = spans([labels[i] for i in p[k]])
                g_spans = spans([labels[i] for i in g[k]])
                found, expected = found + len(p_spans), expected + len(g_spans)
                correct += len(p_spans & g_spans)
            precision, recall = correct / max(found, 1), correct / max(expected, 1)
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            metrics.update(precision=precision, recall=recall, f1=f1)
        return metrics

    return compute_metrics


def token_classification(argv=None, prog=None):
    from transformers import DataCollatorForTokenClassification

    from modeling_elmo import ElmoForTokenClassification
    from tokenization_elmo import ElmoTokenizer

    from ..errors import DataError
    from ..training.finetuning import label_encoder, label_mapping, load_head, parse_and_load, run, tokenize_splits

    head_args, data_args, training_args, raw = parse_and_load(argv, prog)
    words_column = data_args.text_column or "tokens"
    tags_column = data_args.label_column or ("tags" if "tags" in next(iter(raw.values())).column_names else "ner_tags")
    labels = label_mapping(raw, tags_column, True, head_args.model_name_or_path, ElmoForTokenClassification)
    label_ids = label_encoder(raw, tags_column, True, labels)
    tokenizer = ElmoTokenizer.from_pretrained(head_args.model_name_or_path)

    def encode(batch, indices, split):
        encoded = tokenizer(batch[words_column], is_split_into_words=True, truncation=data_args.max_words is not None,
                            max_length=data_args.max_words)
        encoded["labels"] = []
        for index, words, tags, ids in zip(indices, batch[words_column], batch[tags_column], encoded["input_ids"]):
            where = f"{split} example {index}"
            tag_ids = label_ids(tags, where)
            if len(tag_ids) != len(words):
                raise DataError(f"{where}: {len(words)} words but {len(tag_ids)} tags (one tag per word)")
            encoded["labels"].append(tag_ids[: len(ids)])
        return encoded

    splits = tokenize_splits(raw, encode, training_args)
    model = load_head(ElmoForTokenClassification, head_args, labels, default_encoder="lstm")
    collator = DataCollatorForTokenClassification(tokenizer)
    return run(model, tokenizer, training_args, splits, collator, token_metrics(labels))


def sequence_metrics(prediction):
    import numpy as np

    predicted, gold = prediction.predictions.argmax(-1), prediction.label_ids
    f1s = []
    for label in np.union1d(predicted, gold):
        tp = np.sum((predicted == label) & (gold == label))
        denominator = np.sum(predicted == label) + np.sum(gold == label)
        f1s.append(2 * tp / denominator if denominator else 0.0)
    return {"accuracy": float((predicted == gold).mean()), "macro_f1": float(np.mean(f1s))}


def sequence_classification(argv=None, prog=None):
    from transformers import DataCollatorWithPadding

    from modeling_elmo import ElmoForSequenceClassification
    from tokenization_elmo import ElmoTokenizer

    from ..training.finetuning import label_encoder, label_mapping, load_head, parse_and_load, run, tokenize_splits

    head_args, data_args, training_args, raw = parse_and_load(argv, prog)
    text_column, label_column = data_args.text_column or "text", data_args.label_column or "label"
    labels = label_mapping(raw, label_column, False, head_args.model_name_or_path, ElmoForSequenceClassification)
    label_id = label_encoder(raw, label_column, False, labels)
    tokenizer = ElmoTokenizer.from_pretrained(head_args.model_name_or_path)

    def encode(batch, indices, split):
        encoded = tokenizer(batch[text_column], truncation=data_args.max_words is not None,
                            max_length=data_args.max_words)
        encoded["labels"] = [label_id(label, f"{split} example {index}")
                             for index, label in zip(indices, batch[label_column])]
        return encoded

    splits = tokenize_splits(raw, encode, training_args)
    model = load_head(ElmoForSequenceClassification, head_args, labels, default_encoder="linear")
    return run(model, tokenizer, training_args, splits, DataCollatorWithPadding(tokenizer), sequence_metrics)


TASKS = {"token-classification": token_classification, "sequence-classification": sequence_classification}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: elmo-transformers finetune {{{','.join(TASKS)}}} [--help] ..."
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{usage}\n\n{__doc__}")
        return 0
    if not argv or argv[0] not in TASKS:
        print(usage, file=sys.stderr)
        return 2
    task = argv.pop(0)
    import_package()  # the task's arguments are parsed with Trainer's, which import torch anyway
    TASKS[task](argv, prog=f"elmo-transformers finetune {task}")
    return 0
