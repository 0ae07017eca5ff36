#!/usr/bin/env python
"""Embed a text file with ELMo into HDF5, in the layout of AllenNLP's `allennlp elmo` command.

    python scripts/embed_file.py INPUT OUTPUT.hdf5 --model DIR_OR_REPO (--all | --top | --average)

INPUT holds one whitespace-tokenized sentence per line (`-` reads stdin). OUTPUT gets one float32 dataset per line,
keyed by its line number `str(i)` (from 0): all biLM layers `(n_layers + 1, words, 2P)` with --all, the top layer
`(words, 2P)` with --top, the plain mean of the layers `(words, 2P)` with --average; and `sentence_to_index`, a
one-element string dataset holding the JSON map {stripped line: key}. A blank line keeps its key with an empty
`(.., 0, 2P)` dataset (AllenNLP refuses such files).

Nothing is lost on interruption: each finished batch is written atomically into OUTPUT.partial/, OUTPUT appears
(by a rename) only once every line is done, and `--resume` continues an interrupted run without recomputing.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys

import h5py
import numpy as np
import torch
from tqdm import tqdm
from transformers import AutoModel, AutoTokenizer

MODES = ("all", "top", "average")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def read_sentences(path):
    """Stripped lines of `path` (`-`: stdin), as AllenNLP reads them."""
    try:
        with open(sys.stdin.fileno() if path == "-" else path, encoding="utf-8", closefd=path != "-") as f:
            return [line.strip() for line in f]
    except UnicodeDecodeError as e:
        raise SystemExit(f"error: {path} is not UTF-8 text ({e})")


def length_batches(sentences, batch_size):
    """Line numbers grouped into batches of similar length (less padding); the same input gives the same batches."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].split()))
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]


@torch.no_grad()
def embed_batch(model, tokenizer, sentences, mode):
    """float32 arrays of the given sentences in the chosen layout, one per sentence (unpadded)."""
    enc = tokenizer([s.split() for s in sentences], is_split_into_words=True, padding=True, return_tensors="pt")
    out = model(**enc.to(model.device), output_hidden_states=True)
    layers = torch.stack(out.hidden_states).float()  # [L + 1, B, T, 2P]
    if mode == "top":
        layers = layers[-1]
    elif mode == "average":
        layers = layers.mean(dim=0)
    layers = layers.cpu().numpy()
    lengths = out.mask.sum(dim=1).tolist()
    return [layers[..., i, :n, :] for i, n in enumerate(lengths)]


class PartialRun:
    """OUTPUT.partial/: `run.json` (what is being computed) and one `shard-*.npz` per finished batch, each written
    to a temporary name and renamed, so a killed process leaves only whole shards."""

    def __init__(self, output):
        self.folder = output + ".partial"

    def exists(self):
        """Shards are written only after run.json, so a folder without it holds nothing to resume."""
        return os.path.isfile(os.path.join(self.folder, "run.json"))

    def start(self, settings):
        os.makedirs(self.folder, exist_ok=True)
        self._write("run.json", lambda f: f.write(json.dumps(settings, indent=1).encode()))

    def check(self, settings):
        """Refuse to resume a run whose input or settings differ, naming the difference."""
        with open(os.path.join(self.folder, "run.json")) as f:
            saved = json.load(f)
        for key, value in settings.items():
            if saved.get(key) != value:
                raise SystemExit(
                    f"error: cannot resume {self.folder}: it was started with {key}={saved.get(key)!r}, "
                    f"now {key}={value!r} (delete the folder to start over)"
                )

    def shards(self):
        return sorted(
            os.path.join(self.folder, name)
            for name in os.listdir(self.folder)
            if name.startswith("shard-") and name.endswith(".npz")
        )

    def done(self):
        """Line numbers already computed."""
        done = set()
        for path in self.shards():
            with np.load(path) as shard:
                done.update(int(key) for key in shard.files)
        return done

    def add(self, arrays):
        """Store a finished batch: {line number: array}."""
        name = f"shard-{min(arrays):09d}.npz"  # batches are disjoint: their first line names them
        self._write(name, lambda f: np.savez(f, **{str(i): a for i, a in arrays.items()}))

    def _write(self, name, write):
        path = os.path.join(self.folder, name)
        with open(path + ".tmp", "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)

    def finish(self, output, sentences):
        """Assemble the shards into OUTPUT (written inside the partial folder, then renamed into place)."""
        staging = os.path.join(self.folder, "assembling.hdf5")
        with h5py.File(staging, "w") as fout:
            for path in self.shards():
                with np.load(path) as shard:
                    for key in shard.files:
                        fout.create_dataset(key, data=shard[key].astype(np.float32))
            missing = [str(i) for i in range(len(sentences)) if str(i) not in fout]
            if missing:
                raise SystemExit(f"error: {self.folder} lacks lines {missing[:10]}... (rerun with --resume)")
            index = fout.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
            index[0] = json.dumps({sentence: str(i) for i, sentence in enumerate(sentences)})
        os.replace(staging, output)
        shutil.rmtree(self.folder)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="text file, one whitespace-tokenized sentence per line (- for stdin)")
    parser.add_argument("output", help="HDF5 file to write")
    parser.add_argument("--model", required=True, help="converted ELMo folder or Hub repo id")
    mode = parser.add_mutually_exclusive_group(required=True)
    for name, help_text in [
        ("all", "all biLM layers: (n_layers + 1, words, 2P) per line"),
        ("top", "the top layer: (words, 2P) per line"),
        ("average", "the plain mean of the layers: (words, 2P) per line"),
    ]:
        mode.add_argument(f"--{name}", dest="mode", action="store_const", const=name, help=help_text)
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default 64)")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="compute dtype (outputs are float32)")
    parser.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--resume", action="store_true", help="continue the interrupted run in OUTPUT.partial/")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")

    output = os.path.abspath(args.output)
    run = PartialRun(output)
    if os.path.exists(output) and not args.overwrite:
        raise SystemExit(f"error: {output} exists (pass --overwrite to replace it)")
    if run.exists() and not args.resume:
        raise SystemExit(f"error: {run.folder} holds an interrupted run: pass --resume to continue it, or delete it")

    sentences = read_sentences(args.input)
    settings = {
        "input_sha256": hashlib.sha256("\n".join(sentences).encode()).hexdigest(),
        "mode": args.mode,
        "model": os.path.abspath(args.model) if os.path.isdir(args.model) else args.model,
        "dtype": args.dtype,
    }
    if run.exists():
        run.check(settings)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    model = AutoModel.from_pretrained(args.model, trust_remote_code=True, dtype=DTYPES[args.dtype]).to(device).eval()
    if not run.exists():  # only once the model loads, so that a bad --model leaves nothing behind
        run.start(settings)
    done = run.done()

    batches = [[i for i in batch if i not in done] for batch in length_batches(sentences, args.batch_size)]
    progress = tqdm(total=len(sentences), initial=len(done), unit="line", desc="embedding")
    try:
        for batch in filter(None, batches):
            arrays = embed_batch(model, tokenizer, [sentences[i] for i in batch], args.mode)
            run.add(dict(zip(batch, arrays)))
            progress.update(len(batch))
    except KeyboardInterrupt:
        progress.close()
        print(f"\ninterrupted: finished lines are kept in {run.folder}; rerun with --resume", file=sys.stderr)
        return 130
    progress.close()
    run.finish(output, sentences)
    print(f"wrote {len(sentences)} lines ({args.mode}) -> {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
