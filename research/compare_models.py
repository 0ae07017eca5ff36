#!/usr/bin/env python
"""The before/after tables of a model card from the folders written by research/evaluate_modern_model.sh (the same
protocol on every model; two or more, oldest first), as Markdown:

    python research/compare_models.py BEFORE_EVAL AFTER_EVAL --names "elmo-pd-small" "elmo-en-small"

Figures: held-out perplexity (biLM average of both directions; the two models have different vocabularies, so a
perplexity compares models only on the same vocabulary: each row also gives the bigram baseline of the same model's
vocabulary), word sense (ROC AUC and WiC accuracy per layer), EWT POS and polarity (ELMo mix vs layer 0), and
fill-mask hits in the top 10 (and at the top, for the everyday sentences of fill_mask_everyday.json, when all have
them).
"""

import argparse
import json
from pathlib import Path


def read(folder, name):
    path = Path(folder, name)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def percent(value):
    return "-" if value is None else f"{100 * value:.1f} %"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])


def perplexity_rows(names, folders):
    rows = []
    for name, folder in zip(names, folders):
        for path, figures in (read(folder, "perplexity.json") or {}).items():
            split = Path(path).parent.name + "/" + Path(path).name.split(".")[0]
            rows.append(
                [
                    name,
                    split,
                    f"{figures['words']:,}",
                    percent(figures.get("unknown_words")),
                    f"{figures['bilm']['perplexity']:.1f}",
                    f"{figures['bigram']['perplexity']:.1f}",
                    f"{figures['unigram']['perplexity']:.1f}",
                ]
            )
    return table(["model", "test split", "words", "not in its vocabulary", "biLM", "bigram", "unigram"], rows)


def word_sense_rows(names, folders):
    rows = []
    for name, folder in zip(names, folders):
        figures = read(folder, "word_sense.json")
        for layer, auc in figures["roc_auc"].items():
            rows.append(
                [
                    name,
                    layer,
                    f"{auc:.3f}",
                    percent(figures.get("accuracy", {}).get(layer)),
                    percent(figures.get("accuracy_oracle_threshold", {}).get(layer)),
                ]
            )
    return table(["model", "layer", "ROC AUC", "WiC accuracy", "accuracy, oracle threshold"], rows)


def downstream_rows(names, folders):
    rows = []
    for name, folder in zip(names, folders):
        for task, metric in (("pos-ewt", "test_accuracy"), ("polarity", "eval_accuracy")):
            cells = [
                (read(Path(folder, f"{task}-{features}"), "all_results.json") or {}).get(metric)
                for features in ("mix", "layer0")
            ]
            rows.append(
                [
                    name,
                    {"pos-ewt": "EWT UPOS, test accuracy", "polarity": "polarity, test accuracy"}[task],
                    *map(percent, cells),
                ]
            )
    return table(["model", "task", "ELMo mix", "layer 0 only"], rows)


def fill_mask_rows(names, folders, name="fill_mask.json"):
    results = [read(folder, name) for folder in folders]
    if None in results:
        return None
    top1 = all("top1_hits" in r for r in results)
    rows = [
        [model, f"{r['hits']} / {len(r['results'])}", *([f"{r['top1_hits']}"] if top1 else [])]
        for model, r in zip(names, results)
    ]
    examples = [
        [r["sentence"], *(", ".join(res["results"][i]["top"][:5]) for res in results)]
        for i, r in enumerate(results[0]["results"])
    ]
    return (
        table(["model", f"hits in the top {results[0]['top_k']}", *(["at the top"] if top1 else [])], rows)
        + "\n\n"
        + table(["sentence", *(f"{model}: top 5" for model in names)], examples)
    )


def everyday_fill_mask_rows(names, folders):
    return fill_mask_rows(names, folders, "fill_mask_everyday.json")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", help="the evaluation folders of the models, oldest first")
    parser.add_argument("--names", nargs="+", help="one name a folder (default: before, after, or model 1, 2, ...)")
    args = parser.parse_args(argv)
    if len(args.folders) < 2:
        parser.error("give at least two evaluation folders: the protocol compares models")
    if args.names is None:
        count = len(args.folders)
        args.names = ["before", "after"] if count == 2 else [f"model {i}" for i in range(1, count + 1)]
    if len(args.names) != len(args.folders):
        parser.error(f"--names has {len(args.names)} names for {len(args.folders)} folders: give one a folder")
    for title, section in (
        ("Held-out perplexity", perplexity_rows),
        ("Word sense", word_sense_rows),
        ("Frozen biLM downstream", downstream_rows),
        ("Fill-mask", fill_mask_rows),
        ("Fill-mask, everyday sentences", everyday_fill_mask_rows),
    ):
        rows = section(args.names, args.folders)
        if rows is not None:
            print(f"### {title}\n\n{rows}\n")


if __name__ == "__main__":
    main()
