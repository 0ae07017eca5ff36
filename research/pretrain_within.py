#!/usr/bin/env python
"""Run `elmo-transformers pretrain` for as many steps as fit in a wall-clock budget, with its cosine schedule ending
on the last step: a short probe run (same arguments, `--probe-steps` steps, into a scratch folder) measures the
seconds a step and the fixed cost (start-up, data, saving), then the real run gets `--max-steps` for what is left.

    python research/pretrain_within.py --minutes 8 --output-dir OUT -- --model-name-or-path elmo-en-small \
        --train-file train.txt.gz --do-train --per-device-train-batch-size 1024 ...

The arguments after `--` go to `pretrain` unchanged (give neither --output-dir nor --max-steps there). Prints the
probe's figures and the steps chosen, and writes them to OUT/budget.json.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time


def pretrain(arguments, output_dir, max_steps, overwrite=False):
    """Run the command (`overwrite`: into the probes' own scratch folder, which the first probe fills); returns its
    wall seconds and its train_runtime (the training loop alone)."""
    command = [
        sys.executable,
        "-m",
        "elmo_transformers",
        "pretrain",
        *arguments,
        "--output-dir",
        output_dir,
        "--max-steps",
        str(max_steps),
        *(["--overwrite-output-dir"] if overwrite else []),
    ]
    start = time.monotonic()
    subprocess.run(command, check=True)
    wall = time.monotonic() - start
    with open(os.path.join(output_dir, "train_results.json")) as f:
        return wall, json.load(f)["train_runtime"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, required=True, help="wall-clock budget for probe and run together")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--probe-steps", type=int, default=60)
    parser.add_argument("--margin", type=float, default=0.05, help="share of the real run's loop kept in reserve")
    parser.add_argument("pretrain_arguments", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    arguments = [a for a in args.pretrain_arguments if a != "--"]
    deadline = time.monotonic() + 60 * args.minutes

    probe_dir = tempfile.mkdtemp(prefix="pretrain-probe-")
    try:
        # Two probe lengths: the difference of their loop times is the time of the extra steps, free of the first
        # steps' warm-up; the longer probe's wall time minus its loop is the fixed cost.
        short_wall, short_loop = pretrain(arguments, probe_dir, args.probe_steps // 3, overwrite=True)
        probe_wall, probe_loop = pretrain(arguments, probe_dir, args.probe_steps, overwrite=True)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    seconds_a_step = (probe_loop - short_loop) / (args.probe_steps - args.probe_steps // 3)
    fixed = probe_wall - seconds_a_step * args.probe_steps  # start-up, data, the first steps' warm-up, saving
    left = deadline - time.monotonic() - fixed
    max_steps = max(1, math.floor(left * (1 - args.margin) / seconds_a_step))
    budget = {
        "seconds_a_step": round(seconds_a_step, 5),
        "fixed_seconds": round(fixed, 1),
        "seconds_left": round(left, 1),
        "max_steps": max_steps,
        "probe": {
            "short": [round(short_wall, 1), round(short_loop, 1)],
            "long": [round(probe_wall, 1), round(probe_loop, 1)],
        },
    }
    print("budget:", json.dumps(budget), flush=True)
    wall, loop = pretrain(arguments, args.output_dir, max_steps)
    budget["run"] = {"wall_seconds": round(wall, 1), "train_runtime": round(loop, 1)}
    with open(os.path.join(args.output_dir, "budget.json"), "w") as f:
        json.dump(budget, f, indent=2)
    print("run:", json.dumps(budget["run"]), flush=True)


if __name__ == "__main__":
    main()
