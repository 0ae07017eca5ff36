#!/usr/bin/env python
"""Contextual word-sense evaluation: are ELMo's contextual layers better than the context-free layer 0?

For each pair (the same word in two sentences, same or different WordNet sense) the score is the cosine similarity
of the target word's vectors; the figures, for each biLM layer and for the ELMo mix, are the ROC AUC of that score
against the same-sense label, and WiC's accuracy (Pilehvar & Camacho-Collados 2019: "same sense" when the cosine is
above a threshold) with the threshold chosen on other lemmas than those it is scored on (5 folds by lemma), since the
pairs have no separate development split; and, to compare with figures measured that way, the accuracy of the
threshold that is best on all the pairs (an optimistic, oracle figure).

    python research/evaluate_word_sense.py --model DIR --pairs ../shared/data/eval/word-sense-pairs/pairs.jsonl

`--pairs` takes a local JSON Lines file or a Hub dataset name (fields: tokens1, index1, tokens2, index2, label).
"""

import argparse
import json
import os

import numpy as np
import torch
from datasets import load_dataset
from transformers import AutoModel, AutoTokenizer


def roc_auc(scores, labels):
    """Probability that a positive scores above a negative (ties count half): the Mann-Whitney statistic."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    start = 0
    for end in range(1, len(scores) + 1):  # average ranks over ties
        if end == len(scores) or sorted_scores[end] != sorted_scores[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    n_pos, n_neg = labels.sum(), (~labels).sum()
    if n_pos == 0 or n_neg == 0:
        raise ValueError("ROC AUC needs both labels among the pairs")
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def threshold_accuracy(scores, labels, groups, folds=5):
    """Accuracy of "label 1 when the score is above a threshold", each pair scored with the threshold that is most
    accurate on the pairs of the other folds (a group, here a lemma, lies in one fold: the k-th sorted group in fold
    k mod `folds`)."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    fold_of_group = {group: k % folds for k, group in enumerate(sorted(set(groups)))}
    fold = np.array([fold_of_group[group] for group in groups])
    correct = 0
    for k in range(folds):
        fit = fold != k
        threshold, _ = best_threshold(scores[fit], labels[fit])
        correct += int(((scores[~fit] > threshold) == labels[~fit]).sum())
    return correct / len(scores)


def best_threshold(scores, labels):
    """(threshold, accuracy) of the most accurate "label 1 when the score is above the threshold" on these pairs;
    its accuracy, measured on the pairs it was chosen on, is an optimistic figure (an oracle threshold)."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    candidates = np.unique(scores)
    accuracy = [((scores > t) == labels).mean() for t in candidates]
    best = int(np.argmax(accuracy))
    return candidates[best], float(accuracy[best])


def load_pairs(source, split="train"):
    if os.path.exists(source):
        return load_dataset("json", data_files=source, split="train")
    return load_dataset(source, split=split)


@torch.no_grad()
def target_vectors(model, tokenizer, sentences, indices, batch_size, device):
    """[n_layers + 2, len(sentences), 2P]: each biLM layer, then the ELMo mix, at each sentence's target word."""
    rows = []
    for start in range(0, len(sentences), batch_size):
        batch = tokenizer(
            sentences[start : start + batch_size], is_split_into_words=True, padding=True, return_tensors="pt"
        ).to(device)
        out = model(**batch, output_hidden_states=True)
        layers = torch.stack([*out.hidden_states, out.last_hidden_state])  # [L + 2, B, T, 2P]
        index = torch.tensor(indices[start : start + batch_size], device=device)
        rows.append(layers[:, torch.arange(len(index), device=device), index].float().cpu())
    return torch.cat(rows, dim=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="ELMo folder or Hub repo id")
    parser.add_argument("--pairs", required=True, help="JSON Lines file or Hub dataset name")
    parser.add_argument("--split", default="train", help="split of a Hub dataset")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--output", help="write the figures here as JSON")
    args = parser.parse_args(argv)

    pairs = load_pairs(args.pairs, args.split)
    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    model = AutoModel.from_pretrained(args.model, trust_remote_code=True).to(args.device).eval()
    first = target_vectors(model, tokenizer, pairs["tokens1"], pairs["index1"], args.batch_size, args.device)
    second = target_vectors(model, tokenizer, pairs["tokens2"], pairs["index2"], args.batch_size, args.device)
    cosine = torch.nn.functional.cosine_similarity(first, second, dim=-1).numpy()  # [L + 2, pairs]
    names = [f"layer {i}" + (" (context-free)" if i == 0 else "") for i in range(cosine.shape[0] - 1)] + ["ELMo mix"]
    results = {
        "roc_auc": {name: roc_auc(scores, pairs["label"]) for name, scores in zip(names, cosine)},
        "accuracy": {
            name: threshold_accuracy(scores, pairs["label"], pairs["lemma"]) for name, scores in zip(names, cosine)
        },
        "accuracy_oracle_threshold": {
            name: best_threshold(scores, pairs["label"])[1] for name, scores in zip(names, cosine)
        },
    }
    print(f"word sense over {len(pairs)} pairs: ROC AUC, WiC accuracy (threshold from other lemmas; oracle threshold)")
    for name in names:
        print(
            f"  {name:>22}: {results['roc_auc'][name]:.4f}  {100 * results['accuracy'][name]:.1f} %  "
            f"{100 * results['accuracy_oracle_threshold'][name]:.1f} %"
        )
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"pairs": len(pairs), **results}, f, indent=2)
    return results


if __name__ == "__main__":
    main()
