#!/usr/bin/env python
"""Inference speed of ElmoModel on a GPU: the Original size (random weights, the published shape)
in float32 and bf16 at batch 1 and 32, on benchmark.py's sentences of 20-25 words; median of `--repeats` timed calls
after two warm-ups, each call ended by a device synchronisation. Prints one table in tokens/s.

    python research/gpu_figures.py [--sizes Original Small] [--repeats 5]
"""

import argparse

import torch

from benchmark import SIZES, median_seconds, sentences
from configuration_elmo import ElmoConfig
from modeling_elmo import ElmoModel
from tokenization_elmo import ElmoTokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", nargs="+", default=["Original"], choices=sorted(SIZES))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device = torch.accelerator.current_accelerator() or torch.device("cpu")
    print(f"device: {torch.cuda.get_device_name() if device.type == 'cuda' else device}, torch {torch.__version__}")
    tokenizer = ElmoTokenizer()
    print("| size | batch | float32 tok/s | bf16 tok/s |\n| --- | --- | --- | --- |")
    for size in args.sizes:
        torch.manual_seed(0)
        model = ElmoModel(ElmoConfig(**SIZES[size])).to(device).eval()
        for batch_size in args.batch_sizes:
            words = sentences(batch_size)
            batch = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt").to(device)
            tokens = sum(map(len, words))
            row = []
            for dtype in (torch.float32, torch.bfloat16):
                model.to(dtype)

                def call():
                    with torch.inference_mode():
                        model(**batch)
                    if device.type != "cpu":
                        torch.accelerator.synchronize()

                row.append(f"{tokens / median_seconds(call, args.repeats, warmups=2):,.0f}")
            model.float()
            print(f"| {size} | {batch_size} | {' | '.join(row)} |", flush=True)


if __name__ == "__main__":
    main()
