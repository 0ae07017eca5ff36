#!/usr/bin/env python
"""Fill-mask on everyday sentences: how many of them have an expected word among a model's top-k and at the top
(issues 32 and 38).

    python research/evaluate_fill_mask.py --model elmo_transformers/models/elmo-en-small \
        --sentences research/fill_mask_sentences.tsv --output fill_mask.json

Each line of --sentences is `sentence<TAB>answers` (comma-separated, compared without case); a sentence is a hit when
one of its answers is among the model's --top-k words (the fill-mask pipeline: mean of forward and backward LM
log-probabilities). Prints each sentence's top words and the hit counts (top-k and top 1); --output keeps them as
JSON. --check-corpus FILE... first makes sure that no sentence, filled with one of its answers, is a line of those
(tokenised, .txt or .txt.gz) files, so that the sentences stay held out of a training corpus.
"""

import argparse
import gzip
import json

from transformers import pipeline

from elmo_transformers import ElmoFillMaskPipeline


def read_sentences(path):
    """(sentence, set of answers) pairs; `#` lines are comments."""
    items = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            sentence, answers = line.rstrip("\n").split("\t")
            items.append((sentence, {a.strip().lower() for a in answers.split(",")}))
    return items


def corpus_lines_among(paths, items):
    """The lines of the files at `paths` that are one of `items`' sentences with its <mask> filled by an answer."""
    filled = {sentence.replace("<mask>", answer) for sentence, answers in items for answer in answers}
    found = []
    for path in paths:
        with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
            found += [f"{path}: {line.strip()}" for line in f if line.strip().lower() in filled]
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a biLM language model folder (ElmoForLanguageModeling)")
    parser.add_argument("--sentences", default="research/fill_mask_sentences.tsv")
    parser.add_argument("--top-k", "--top_k", type=int, default=10)
    parser.add_argument("--output", help="write the top words and hits here as JSON")
    parser.add_argument(
        "--check-corpus",
        nargs="+",
        default=[],
        metavar="FILE",
        help="refuse to score when a filled sentence is a line of these files",
    )
    args = parser.parse_args(argv)

    items = read_sentences(args.sentences)
    seen = corpus_lines_among(args.check_corpus, items)
    if seen:
        parser.error(f"{len(seen)} filled sentences are in the corpus, e.g. {seen[0]}")
    fill = pipeline("fill-mask", model=args.model, pipeline_class=ElmoFillMaskPipeline)
    results = fill([sentence for sentence, _ in items], top_k=args.top_k)
    rows = []
    for (sentence, answers), candidates in zip(items, results):
        words = [c["token_str"] for c in candidates]
        hit = any(w.lower() in answers for w in words)
        top1 = bool(words) and words[0].lower() in answers
        rows.append({"sentence": sentence, "top": words, "hit": hit, "top1": top1})
        print(f"{'HIT ' if hit else '    '}{sentence}\n     {' '.join(words)}")
    hits = sum(row["hit"] for row in rows)
    top1_hits = sum(row["top1"] for row in rows)
    print(f"{hits}/{len(rows)} sentences with an expected word in the top {args.top_k}, {top1_hits} at the top")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "model": args.model,
                    "top_k": args.top_k,
                    "hits": hits,
                    "top1_hits": top1_hits,
                    "sentences": len(rows),
                    "results": rows,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
