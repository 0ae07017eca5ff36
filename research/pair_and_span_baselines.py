"""The baselines the pair and span heads are read against (docs/training.md), on the SNLI and SQuAD samples:

- SNLI: the majority class of the training pairs, predicted for every validation pair.
- SQuAD: Rajpurkar et al. (2016)'s sliding-window baseline, without a parser: the candidates are the spans of 1 to
  `MAX_CANDIDATE_WORDS` words of the context (theirs are constituents) that are not made only of question words,
  articles or punctuation; first, the candidates whose sentence (the candidate's own words left out) shares the most
  unigrams and bigrams with the question are kept; among those, Richardson et al. (2013)'s sliding window picks one:
  the target set is the question's and the candidate's words, a window of that many words slides over the context,
  and it scores the sum of log(1 + 1/count(w)) over the context words w it holds of the target set; the best window
  is the candidate's score (ties: the shorter, then the earlier span). Scored with SQuAD's exact match and F1.

    python research/pair_and_span_baselines.py ../shared/data/labeled/snli-sample ../shared/data/labeled/squad-sample
"""

import collections
import json
import math
import re
import string
import sys
from pathlib import Path

from elmo_transformers.training.data import read_squad
from elmo_transformers.training.finetuning import squad_scores

MAX_CANDIDATE_WORDS = 4
SKIP = {"a", "an", "the"}


def majority_class(folder):
    """(the training pairs' most frequent label, its accuracy on the validation pairs)."""
    read = lambda name: [json.loads(line)["label"] for line in open(folder / name, encoding="utf-8")]  # noqa: E731
    majority = collections.Counter(read("train.jsonl")).most_common(1)[0][0]
    validation = read("validation.jsonl")
    return majority, sum(label == majority for label in validation) / len(validation)


def words_with_spans(text):
    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\w+(?:[-'.]\w+)*|[^\w\s]", text)]


def key(word):
    return word.lower()


def sliding_window_answer(question, context):
    words = words_with_spans(context)
    keys = [key(w) for w, _, _ in words]
    question_keys = [key(w) for w, _, _ in words_with_spans(question)]
    question_set = set(question_keys)
    question_ngrams = question_set | set(zip(question_keys, question_keys[1:]))
    counts = collections.Counter(keys)
    weight = {k: math.log(1 + 1 / counts[k]) for k in counts}
    sentences, start = [], 0  # (first, end) word ranges, cut after . ! ?
    for i, k in enumerate(keys):
        if k in ".!?" or i == len(keys) - 1:
            sentences.append((start, i + 1))
            start = i + 1
    candidates = []
    for first, end in sentences:
        for s in range(first, end):
            for e in range(s + 1, min(s + MAX_CANDIDATE_WORDS, end) + 1):
                span = keys[s:e]
                if all(k in question_set or k in SKIP or k in string.punctuation for k in span):
                    continue
                rest = keys[first:s] + keys[e:end]
                overlap = len(question_ngrams & (set(rest) | set(zip(rest, rest[1:]))))
                candidates.append((overlap, s, e))
    if not candidates:
        return ""
    best_overlap = max(c[0] for c in candidates)
    scored = []
    for overlap, s, e in candidates:
        if overlap != best_overlap:
            continue
        target = question_set | set(keys[s:e])
        size = len(target)
        values = [weight[k] if k in target else 0.0 for k in keys]
        sums = [sum(values[i : i + size]) for i in range(max(len(keys) - size + 1, 1))]
        scored.append((-max(sums), e - s, s, e))
    _, _, s, e = min(scored)
    return context[words[s][1] : words[e - 1][2]]


def sliding_window(folder):
    """(exact match, F1) in percent of the sliding-window baseline on the validation questions."""
    rows = list(read_squad([folder / "validation.json"]))
    totals = [0.0, 0.0]
    for row in rows:
        answer = sliding_window_answer(row["question"], row["context"])
        for i, score in enumerate(squad_scores(answer, row["answers"]["text"])):
            totals[i] += score
    return 100 * totals[0] / len(rows), 100 * totals[1] / len(rows)


if __name__ == "__main__":
    snli, squad = Path(sys.argv[1]), Path(sys.argv[2])
    label, accuracy = majority_class(snli)
    print(f"SNLI majority class ({label}): accuracy {100 * accuracy:.2f} %")
    exact, f1 = sliding_window(squad)
    print(f"SQuAD sliding window: exact match {exact:.2f}, F1 {f1:.2f}")
