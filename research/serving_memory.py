#!/usr/bin/env python
"""Memory of a serving process (docs/serving.md): an exported ONNX folder served by onnxruntime, without torch,
against the PyTorch model it was exported from, each in a fresh process that embeds the same batch; the onnxruntime
one runs in a Python where torch and this package are not installed (`site_packages_without_torch`).

    python research/serving_memory.py MODEL_FOLDER ONNX_FOLDER [ONNX_FOLDER ...] [--batch-size 32] [--calls 3]

Each process loads its model and tokenizer, makes `--calls` calls on `--batch-size` benchmark sentences (20-25
words, `benchmark.sentences`) and reports its peak RSS (`VmHWM`: interpreter, libraries, weights and the calls) and
its RSS after loading. The onnxruntime process runs with and without its CPU memory arena
(`SessionOptions.enable_cpu_mem_arena`) and reports whether torch was imported (it must not be). The installed size
of torch and of onnxruntime (their site-packages folders) is printed beside.
"""

import argparse
import inspect
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from importlib import metadata
from pathlib import Path

from benchmark import sentences, status_mb

REPO = Path(__file__).resolve().parents[1]

COMMON = """
import json, sys
batch = json.loads({batch!r})
""" + inspect.getsource(status_mb).replace("{", "{{").replace("}", "}}")

ONNXRUNTIME = (
    COMMON
    + """
import numpy as np, onnxruntime
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained({folder!r}, trust_remote_code=True)
options = onnxruntime.SessionOptions()
options.enable_cpu_mem_arena = {arena}
session = onnxruntime.InferenceSession({folder!r} + "/model.onnx", options)
loaded = status_mb("VmRSS")
for _ in range({calls}):
    enc = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="np")
    session.run(None, {{k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask")}})
print(json.dumps(dict(loaded_mb=loaded, peak_mb=status_mb("VmHWM"), torch_imported="torch" in sys.modules)))
"""
)

PYTORCH = (
    COMMON
    + """
import torch
from modeling_elmo import ElmoModel
from tokenization_elmo import ElmoTokenizer
tokenizer = ElmoTokenizer.from_pretrained({folder!r})
model = ElmoModel.from_pretrained({folder!r}).eval()
loaded = status_mb("VmRSS")
with torch.no_grad():
    for _ in range({calls}):
        enc = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        model(**enc, output_hidden_states=True)
print(json.dumps(dict(loaded_mb=loaded, peak_mb=status_mb("VmHWM"), torch_imported=True)))
"""
)


# What a Python without torch lacks: its folders and metadata (this package's own files come from its metadata).
WITHOUT_TORCH = ("torch", "torchgen", "functorch")


def site_packages_without_torch(folder):
    """Fill `folder` with links to this Python's site-packages except torch (`WITHOUT_TORCH`) and every top-level
    file or folder this package installed (the package, the model's root modules, an editable install's hooks):
    `python -S` with PYTHONPATH=folder is then a Python where neither is installed. Returns `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    own = {file.parts[0] for file in metadata.files("elmo-transformers") or ()}
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(WITHOUT_TORCH) and entry.name not in own and entry.suffix != ".pth":
            (folder / entry.name).symlink_to(entry)
    return folder


def measure(code, path, **values):
    """Run `code` (filled with `values`) in a fresh Python whose path is `path`; its JSON line."""
    python = [sys.executable, "-S"] if path != str(REPO) else [sys.executable]
    done = subprocess.run(
        [*python, "-c", code.format(**values)],
        capture_output=True,
        text=True,
        cwd="/",
        env={"PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def installed_mb(package):
    folder = Path(sysconfig.get_paths()["purelib"]) / package
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="the PyTorch model folder")
    parser.add_argument("onnx", nargs="+", help="folders made by `elmo-transformers export onnx` from it")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    options = dict(batch=json.dumps(sentences(args.batch_size, seed=0)), calls=args.calls)
    rows = [("PyTorch", measure(PYTORCH, str(REPO), folder=os.path.abspath(args.model), **options))]
    with tempfile.TemporaryDirectory() as shadow:
        path = str(site_packages_without_torch(shadow))
        rows += [
            (
                f"onnxruntime {folder} (memory arena {arena})",
                measure(ONNXRUNTIME, path, folder=os.path.abspath(folder), arena=arena, **options),
            )
            for folder in args.onnx
            for arena in (True, False)
        ]
    print(f"batch {args.batch_size}, {args.calls} calls")
    for name, row in rows:
        print(
            f"{name:60} peak RSS {row['peak_mb']:7.0f} MB  after loading {row['loaded_mb']:7.0f} MB  "
            f"torch imported: {row['torch_imported']}"
        )
    print(f"installed: torch {installed_mb('torch'):.0f} MB, onnxruntime {installed_mb('onnxruntime'):.0f} MB")


if __name__ == "__main__":
    main()
