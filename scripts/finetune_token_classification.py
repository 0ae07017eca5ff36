"""Fine-tune an ELMo token classifier (POS tagging, NER, ...) with Trainer: `ElmoForTokenClassification`.

The ELMo recipe by default: frozen biLM, trainable scalar mix + gamma with dropout 0.5, a BiLSTM task encoder,
one label per word (ELMo reads whole words: no sub-word alignment). Data: local CoNLL files (`token<TAB>tag`, blank
line between sentences), JSON/CSV with a word-list column and a tag-list column, or a Hub dataset.

    python scripts/finetune_token_classification.py --model-name-or-path ELMO_FOLDER \\
        --train-file train.conll --validation-file valid.conll --output-dir out --do-train --do-eval

Metrics: word accuracy, and for BIO/IOB2 tag sets (every tag O or X-TYPE) span precision / recall / F1.
"""

from transformers import DataCollatorForTokenClassification

from elmo_data import DataError, command_line
from elmo_finetuning import label_encoder, label_mapping, load_head, parse_and_load, run
from modeling_elmo import ElmoForTokenClassification
from tokenization_elmo import ElmoTokenizer


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


def make_compute_metrics(labels):
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


def main(argv=None):
    head_args, data_args, training_args, raw = parse_and_load(argv)
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

    with training_args.main_process_first(desc="tokenize"):
        splits = {name: split.map(encode, batched=True, with_indices=True, fn_kwargs={"split": name},
                                  remove_columns=split.column_names, desc=f"tokenize {name}")
                  for name, split in raw.items()}
    model = load_head(ElmoForTokenClassification, head_args, labels, default_encoder="lstm")
    collator = DataCollatorForTokenClassification(tokenizer)
    return run(model, tokenizer, training_args, splits, collator, make_compute_metrics(labels))


if __name__ == "__main__":
    command_line(main)
