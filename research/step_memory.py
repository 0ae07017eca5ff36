"""Is one LSTM step bound by per-step overhead or by reading the weights? One biLM layer of the Original size
(random weights), one thread, CPU time of this thread (`time.thread_time`, best of k: other jobs on a shared
machine disturb it far less than wall time). Prints, per dtype and batch size, each piece of a step (the input
GEMM's share of its block, the state GEMMs with the input gates, the cell, the projection GEMMs) with its weights
in the cache (the piece repeated alone) and with the cache flushed before each call (as in the recurrence, where
a layer's per-step int8 weights, 21 MB, and the other layer's do not stay in the last-level cache), next to the
whole step as `ElmoLstmLayer` runs it. One thread only: `thread_time` counts this thread, not torch's other ones.

    python research/step_memory.py [--batch-sizes 1 32]
"""

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from configuration_elmo import ElmoConfig  # noqa: E402
from benchmark import copy_gates, random_lstm_layer  # noqa: E402  (research/ is this script's folder)
from kernels_elmo import inplace_lstm_cell  # noqa: E402

FLUSH = torch.ones(128 * 2**20 // 4)  # larger than the last-level cache


def best_ms(fn, flush, repeats=15):
    fn()
    times = []
    for _ in range(repeats):
        if flush:
            FLUSH.add_(1)
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return min(times) * 1e3


@torch.no_grad()
def profile(int8, batch, steps=20):
    config = ElmoConfig(lstm_dim=4096, projection_dim=512, n_highway=2, cell_clip=3.0, proj_clip=3.0)
    layer = random_lstm_layer(config, int8)
    gemms, P, H = layer.gemms, config.projection_dim, config.lstm_dim
    x, h, c = torch.randn(2, batch, steps, P), torch.randn(2, batch, P) * 0.1, torch.randn(2, batch, H) * 0.1
    input_gates, cell_output = gemms.input_gates(x), torch.randn(2, batch, H) * 0.1
    gates = gemms.gates(input_gates, 0, h)
    pieces = {
        "input GEMM share": lambda: gemms.input_gates(x),
        "state GEMMs": lambda: gemms.gates(input_gates, 0, h),
        "cell": lambda: inplace_lstm_cell(copy_gates(gates), c, config.cell_clip),
        "projection GEMMs": lambda: gemms.project(cell_output),
    }
    rows = {}
    for flush in (False, True):
        times = {name: best_ms(fn, flush) for name, fn in pieces.items()}
        times["input GEMM share"] /= steps
        rows["flushed" if flush else "warm"] = times
    whole = best_ms(lambda: layer(x, [batch] * steps), False, repeats=7) / steps
    return rows, whole


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("one thread; ms per step of one layer, both directions")
    for int8 in (False, True):
        for batch in args.batch_sizes:
            rows, whole = profile(int8, batch)
            name = f"{'int8' if int8 else 'fp32'} batch {batch}"
            for cache, times in rows.items():
                pieces = " ".join(f"{piece} {ms:.3f}" for piece, ms in times.items())
                print(f"{name} cache {cache}: {pieces}; sum {sum(times.values()):.3f}")
            print(f"{name} whole step as the layer runs it: {whole:.3f}")


if __name__ == "__main__":
    main()
