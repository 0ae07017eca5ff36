"""Fine-tune an ELMo sentence classifier with Trainer: `ElmoForSequenceClassification`.

The ELMo recipe by default: frozen biLM, trainable scalar mix + gamma with dropout 0.5; the sentence vector is the
masked mean of the ELMo vectors over its words, then a linear classifier (`--task-encoder lstm` puts a BiLSTM
before the mean). Data: local JSON Lines / JSON / CSV files with a text and a label column, or a Hub dataset.

    python scripts/finetune_sequence_classification.py --model-name-or-path ELMO_FOLDER \\
        --train-file train.jsonl --validation-file test.jsonl --output-dir out --do-train --do-eval

Text is split into words on whitespace (`str.split`), as the tokenizer does. Metrics: accuracy and macro F1.
"""

import numpy as np
from transformers import DataCollatorWithPadding

from elmo_data import command_line
from elmo_finetuning import label_encoder, label_mapping, load_head, parse_and_load, run
from modeling_elmo import ElmoForSequenceClassification
from tokenization_elmo import ElmoTokenizer


def compute_metrics(prediction):
    predicted, gold = prediction.predictions.argmax(-1), prediction.label_ids
    f1s = []
    for label in np.union1d(predicted, gold):
        tp = np.sum((predicted == label) & (gold == label))
        denominator = np.sum(predicted == label) + np.sum(gold == label)
        f1s.append(2 * tp / denominator if denominator else 0.0)
    return {"accuracy": float((predicted == gold).mean()), "macro_f1": float(np.mean(f1s))}


def main(argv=None):
    head_args, data_args, training_args, raw = parse_and_load(argv)
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

    with training_args.main_process_first(desc="tokenize"):
        splits = {name: split.map(encode, batched=True, with_indices=True, fn_kwargs={"split": name},
                                  remove_columns=split.column_names, desc=f"tokenize {name}")
                  for name, split in raw.items()}
    model = load_head(ElmoForSequenceClassification, head_args, labels, default_encoder="linear")
    return run(model, tokenizer, training_args, splits, DataCollatorWithPadding(tokenizer), compute_metrics)


if __name__ == "__main__":
    command_line(main)
