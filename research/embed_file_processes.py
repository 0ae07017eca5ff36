"""embed_file wall time: N processes x 1 thread (torchrun) against 1 process x N threads, same input and model.

    python research/embed_file_processes.py INPUT --model DIR [--lines 150] [--processes 2] [--repeats 3]

Runs alternate between the two set-ups; prints the median wall time of each (model loading included), their ratio,
the CPU, and the largest difference between the two outputs.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np


def cpu_name():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def run(command, threads, output):
    if os.path.exists(output):
        os.remove(output)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1")
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("--model", required=True)
    parser.add_argument("--lines", type=int, default=150, help="first lines of INPUT to embed")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "input.txt")
        with open(args.input, encoding="utf-8") as f, open(source, "w", encoding="utf-8") as out:
            lines = [next(f) for _ in range(args.lines)]
            out.writelines(lines)
        words = sum(len(line.split()) for line in lines)
        flags = ["--model", args.model, "--top", "--batch-size", str(args.batch_size)]
        one_output, many_output = os.path.join(folder, "one.hdf5"), os.path.join(folder, "many.hdf5")
        one = [sys.executable, "-m", "elmo_transformers", "embed", source, one_output, *flags]
        many = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(args.processes),
            "-m",
            "elmo_transformers",
            "embed",
            source,
            many_output,
            *flags,
        ]
        times = {"one": [], "many": []}
        for _ in range(args.repeats):
            times["one"].append(run(one, args.processes, one_output))
            times["many"].append(run(many, 1, many_output))
        with h5py.File(one_output) as a, h5py.File(many_output) as b:
            diff = max(float(np.abs(a[k][...] - b[k][...]).max(initial=0)) for k in a if k != "sentence_to_index")
        median = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); {args.lines} lines, {words} words, --top, "
            f"batch {args.batch_size}, {args.repeats} repeats, medians (model loading included)"
        )
        print(
            f"1 process x {args.processes} threads: {median['one']:.1f} s  {words / median['one']:.0f} words/s  "
            f"(runs: {', '.join(f'{t:.1f}' for t in times['one'])})"
        )
        print(
            f"{args.processes} processes x 1 thread: {median['many']:.1f} s  {words / median['many']:.0f} words/s  "
            f"(runs: {', '.join(f'{t:.1f}' for t in times['many'])})"
        )
        print(
            f"speed-up of {args.processes} x 1 over 1 x {args.processes}: {median['one'] / median['many']:.2f}x; "
            f"max abs difference of the outputs: {diff:.2e}"
        )


if __name__ == "__main__":
    main()
