"""Start-up, whole process: one line through `embed` and through `ElmoEmbedder()` on the shipped default model (or
--model), beside `python -c "import torch"` on the same machine, each the median of --repeats runs (alternating, so
that every command sees the same load); then where one `ElmoEmbedder` process's time goes.

    python research/startup.py [--model DIR] [--repeats 3] [--device cpu]

Prints a Markdown table (seconds, and the difference to `import torch`) and the split, with the CPU named.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPLIT = """
import sys, time
start = time.perf_counter()
import torch
torch_done = time.perf_counter()
from elmo_transformers import ElmoEmbedder
embedder = ElmoEmbedder(sys.argv[1], device=sys.argv[2])
loaded = time.perf_counter()
embedder.embed_sentence("the cat sat on the mat .".split())
done = time.perf_counter()
print(torch_done - start, loaded - torch_done, done - loaded, sorted({'transformers'} & set(sys.modules)))
"""


def seconds(command):
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def cpu_name():
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown CPU")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        line = Path(folder) / "one.txt"
        line.write_text("the cat sat on the mat .\n", encoding="utf-8")
        python = sys.executable
        commands = {
            'python -c "import torch"': [python, "-c", "import torch"],
            "embed one line (--top)": [
                python,
                "-m",
                "elmo_transformers",
                "embed",
                str(line),
                f"{folder}/o.hdf5",
                "--model",
                args.model,
                "--top",
                "--overwrite",
                "--quiet",
                "--device",
                args.device,
            ],
            "ElmoEmbedder() one sentence": [
                python,
                "-c",
                "import sys\nfrom elmo_transformers import ElmoEmbedder\n"
                "ElmoEmbedder(sys.argv[1], device=sys.argv[2]).embed_sentence("
                "'the cat sat'.split())",
                args.model,
                args.device,
            ],
        }
        for command in commands.values():  # warm: byte code compiled, files in the page cache
            seconds(command)
        timings = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, command in commands.items():
                timings[name].append(seconds(command))
        split = subprocess.run(
            [python, "-c", SPLIT, args.model, args.device], capture_output=True, text=True, check=True
        ).stdout.split(maxsplit=3)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    base = medians['python -c "import torch"']
    print(
        f"Start-up, whole process, median of {args.repeats} (after one warm-up), {cpu_name()}, {os.cpu_count()} "
        f"CPUs, device {args.device}, model {args.model}:"
    )
    print("| command | seconds | minus `import torch` |\n|---|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:.2f} | {value - base:+.2f} |")
    print(
        f"One ElmoEmbedder process: import torch {float(split[0]):.2f} s, import the package and load the model "
        f"{float(split[1]):.2f} s, the first sentence {float(split[2]):.2f} s; transformers imported: {split[3]}"
    )


if __name__ == "__main__":
    main()
