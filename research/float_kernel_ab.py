#!/usr/bin/env python
"""One biLM layer of a published size (both directions, random weights), `float_kernel="aten"` against "onednn",
called in turn (A/B alternating, so that both see the same load on a shared machine): median ms of a `--steps`-step
call per thread count, batch size and dtype, and the largest difference between the two outputs.

    python research/float_kernel_ab.py --size Original --threads 1 2 --batch-sizes 32 1 --dtypes float32 bfloat16
"""

import argparse
import statistics
import time

import torch

from benchmark import SIZES, random_lstm_layer, cpu_name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="Original")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 1])
    parser.add_argument("--dtypes", nargs="+", choices=["float32", "bfloat16"], default=["float32", "bfloat16"])
    parser.add_argument("--steps", type=int, default=27)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from configuration_elmo import ElmoConfig

    print(
        f"One {args.size} biLM layer, both directions, {args.steps} steps, {cpu_name()}, torch {torch.__version__}, "
        f"median of {args.repeats} alternating calls"
    )
    print("| threads | batch | dtype | aten ms | onednn ms | aten / onednn | max abs diff |\n" + "|---" * 7 + "|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for batch in args.batch_sizes:
            for dtype in args.dtypes:
                dtype_ = getattr(torch, dtype)
                layers = {
                    kernel: random_lstm_layer(ElmoConfig(**SIZES[args.size], float_kernel=kernel), False).to(dtype_)
                    for kernel in ("aten", "onednn")
                }
                x = torch.randn(2, batch, args.steps, layers["aten"].input_weight.shape[1]).to(dtype_)
                times = {kernel: [] for kernel in layers}
                with torch.no_grad():
                    outputs = {kernel: layer(x, [batch] * args.steps)[0] for kernel, layer in layers.items()}
                    for _ in range(args.repeats):
                        for kernel, layer in layers.items():
                            start = time.perf_counter()
                            layer(x, [batch] * args.steps)
                            times[kernel].append(time.perf_counter() - start)
                ms = {kernel: statistics.median(t) * 1e3 for kernel, t in times.items()}
                diff = (outputs["aten"].float() - outputs["onednn"].float()).abs().max().item()
                print(
                    f"| {threads} | {batch} | {dtype} | {ms['aten']:.0f} | {ms['onednn']:.0f} | "
                    f"{ms['aten'] / ms['onednn']:.2f}x | {diff:.1e} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
