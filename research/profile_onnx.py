#!/usr/bin/env python
"""Where an exported ELMo graph spends its time under onnxruntime: its profile, each operator summed by input
shapes, per call (the LSTM's Scan loops show as their steps' GEMMs, `[2, batch, ...] x [2, ..., ...]`, one per time
step and layer; the char CNN as the ops over `[batch x words, ...]`).

    python research/profile_onnx.py research/cache/Original/onnx-float32 --batch-size 32

The sentences are research/benchmark.py's (20-25 words of a Zipfian vocabulary); one warm-up call, then `--repeats`
profiled calls, `--threads` intra-op threads.
"""

import argparse
import json
import os
import tempfile
from collections import defaultdict

import onnxruntime
from benchmark import sentences
from transformers import AutoTokenizer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="a folder written by `elmo-transformers export onnx`")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--top", type=int, default=15, help="rows of the table")
    args = parser.parse_args(argv)

    tokenizer = AutoTokenizer.from_pretrained(args.folder, trust_remote_code=True)
    enc = tokenizer(sentences(args.batch_size), is_split_into_words=True, padding=True, return_tensors="np")
    inputs = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    session = onnxruntime.InferenceSession(
        os.path.join(args.folder, "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    session.run(None, inputs)  # warm-up, not profiled
    with tempfile.TemporaryDirectory() as tmp:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "profile")
        session = onnxruntime.InferenceSession(
            os.path.join(args.folder, "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        for _ in range(args.repeats):
            session.run(None, inputs)
        with open(session.end_profiling(), encoding="utf-8") as f:
            events = json.load(f)

    calls = [e["dur"] for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    kernels = defaultdict(lambda: [0, 0])  # (operator, input shapes) -> [microseconds, count]
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["args"]["op_name"] != "Scan":
            shapes = " x ".join(str(next(iter(s.values()))) for s in e["args"]["input_type_shape"])
            kernels[e["args"]["op_name"], shapes][0] += e["dur"]
            kernels[e["args"]["op_name"], shapes][1] += 1
    per_call = sorted(calls)[len(calls) // 2] / 1000
    words = int(enc["attention_mask"].sum())
    print(
        f"{args.folder}: batch {args.batch_size}, {words} words in {enc['input_ids'].shape[1]} positions a "
        f"sentence, {args.threads} threads: {per_call:.0f} ms a call (median of {len(calls)} profiled calls)"
    )
    print("| operator | input shapes | ms a call | times a call | share of the call |\n|---|---|---|---|---|")
    for (op, shapes), (us, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[: args.top]:
        ms = us / 1000 / len(calls)
        print(f"| {op} | {shapes} | {ms:.0f} | {count // len(calls)} | {ms / per_call:.0%} |")


if __name__ == "__main__":
    main()
