#!/usr/bin/env python
"""Domain adaptation of the shipped default model on movie-review text, measured two ways.

    python research/domain_adaptation.py --work /tmp/domain-adaptation [--seeds 0 1 2]

1. `pretrain --model-name-or-path DEFAULT_MODEL` continues the biLM on the text of sentence-polarity/train.jsonl
   (labels unused) with its own softmax and vocabulary (sampled softmax), once per seed.
2. Perplexity of test.jsonl's sentences (each sentence one window, full softmax) before and after.
3. The frozen-biLM sentence classifier (trainable scalar mix + linear head, the ELMo recipe) trained on train.jsonl,
   tested on test.jsonl, with the same budget on the model before and after adaptation, once per seed (seed s of the
   classifier reads the model adapted with seed s).

The data are read from ../shared only (no licence to copy them). Every step is one command of the installed tool;
a step whose result file exists is skipped, so an interrupted run continues. Prints a Markdown table and writes
results.json into --work.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import elmo_transformers

# The shared data folder next to the checkout (../shared): the data have no licence to be copied into the repository.
DATA = str(Path(__file__).resolve().parents[2] / "shared" / "data" / "labeled" / "sentence-polarity")
# The adaptation budget, small enough for a shared 2-core CPU: 50 steps of 32 sentences (1,600 sentences, half an
# epoch), a quarter of the default model's peak learning rate, sentences of similar length batched together.
ADAPT = [
    "--max-steps",
    "50",
    "--train-sampling-strategy",
    "group_by_length",
    "--per-device-train-batch-size",
    "32",
    "--learning-rate",
    "5e-4",
    "--lr-scheduler-type",
    "linear",
    "--warmup-steps",
    "5",
    "--max-grad-norm",
    "5.0",
    "--max-words",
    "200",
    "--n-negative-samples",
    "2048",
    "--logging-steps",
    "10",
    "--save-strategy",
    "no",
    "--report-to",
    "none",
]
# The classifier budget (the same before and after): the default model card's recipe with 3 epochs instead of 10.
CLASSIFY = [
    "--per-device-train-batch-size",
    "32",
    "--learning-rate",
    "3e-3",
    "--num-train-epochs",
    "3",
    "--save-strategy",
    "no",
    "--report-to",
    "none",
]


def command(name, *args):
    return [sys.executable, "-m", "elmo_transformers", name, *args]


def run(cmd, result, log):
    """Run `cmd` unless `result` exists; its output goes to `log`."""
    if os.path.exists(result):
        return
    print(" ".join(cmd), flush=True)
    with open(log, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True)


def perplexity(model, work, name):
    out = os.path.join(work, f"perplexity-{name}.json")
    run(
        command("perplexity", "--model", model, "--max-words", "200", "--output", out, f"{DATA}/test.jsonl"),
        out,
        out + ".log",
    )
    with open(out) as f:
        return json.load(f)[f"{DATA}/test.jsonl"]


def classify(model, work, name, seed):
    folder = os.path.join(work, f"classify-{name}-seed{seed}")
    result = os.path.join(folder, "eval_results.json")
    run(
        command(
            "finetune",
            "sequence-classification",
            "--model-name-or-path",
            model,
            "--train-file",
            f"{DATA}/train.jsonl",
            "--validation-file",
            f"{DATA}/test.jsonl",
            "--output-dir",
            folder,
            "--do-train",
            "--do-eval",
            "--seed",
            str(seed),
            *CLASSIFY,
        ),
        result,
        folder + ".log",
    )
    with open(result) as f:
        return json.load(f)["eval_accuracy"]


def adapt(base, work, seed):
    folder = os.path.join(work, f"adapted-seed{seed}")
    run(
        command(
            "pretrain",
            "--model-name-or-path",
            base,
            "--train-file",
            f"{DATA}/train.jsonl",
            "--output-dir",
            folder,
            "--do-train",
            "--seed",
            str(seed),
            *ADAPT,
        ),
        os.path.join(folder, "model.safetensors"),
        folder + ".log",
    )
    return folder


def mean_sd(values):
    return f"{statistics.mean(values):.4g} ± {statistics.stdev(values):.2g}" if len(values) > 1 else f"{values[0]:.4g}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="folder for the models, logs and results")
    parser.add_argument("--model", default=elmo_transformers.DEFAULT_MODEL, help="the model to adapt")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)

    results = {
        "before": {"perplexity": perplexity(args.model, args.work, "before"), "accuracy": []},
        "after": {"perplexity": [], "accuracy": []},
    }
    for seed in args.seeds:
        results["before"]["accuracy"].append(classify(args.model, args.work, "before", seed))
        adapted = adapt(args.model, args.work, seed)
        results["after"]["perplexity"].append(perplexity(adapted, args.work, f"after-seed{seed}"))
        results["after"]["accuracy"].append(classify(adapted, args.work, "after", seed))
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(results, f, indent=2)

    before, after = results["before"], results["after"]
    print(f"| model | test perplexity (fwd / bwd / avg) | accuracy, seeds {args.seeds} | mean ± sd |")
    print("| --- | --- | --- | --- |")
    p = before["perplexity"]
    print(
        f"| before | {p['forward_perplexity']:.1f} / {p['backward_perplexity']:.1f} / {p['perplexity']:.1f} | "
        f"{', '.join(f'{a:.4f}' for a in before['accuracy'])} | {mean_sd(before['accuracy'])} |"
    )
    ppl = [
        " / ".join(f"{q[k]:.1f}" for k in ("forward_perplexity", "backward_perplexity", "perplexity"))
        for q in after["perplexity"]
    ]
    print(
        f"| after | {'; '.join(ppl)} | {', '.join(f'{a:.4f}' for a in after['accuracy'])} | "
        f"{mean_sd(after['accuracy'])} |"
    )


if __name__ == "__main__":
    main()
