#!/usr/bin/env python
"""One LSTM step's int8 state GEMV ([1, 512] x [512, 16384], the Original size at batch 1), timed as the exported
int8 graph runs it and as PyTorch's int8 path does (docs/speed.md, onnxruntime int8 at batch 1).

    python research/onnx_int8_gemv.py [--threads 2]

onnxruntime: `DynamicQuantizeLinear` + `MatMulInteger` + rescale as the body of a `Scan` of 20 steps, the int8
weights initializers of the outer graph (as in the export), with 1, 2 or 4 such weights used in turn each step (a
layer's steps cycle their state and projection weights). Three rescales, timed alternately: one weight scale; one
per output column multiplied into the activation's scale first (the export's order, which onnxruntime fuses into
`DynamicQuantizeMatMul`); one per column applied after the activation's scale (left unfused: `MatMulInteger` on
its prepacked weight). PyTorch: `quantized.linear_dynamic` on a prepacked weight with per-column scales, called
repeatedly. Medians, ms per GEMV.
"""

import argparse

import numpy as np
import onnxruntime
import torch
from benchmark import median_seconds
from onnx import TensorProto, helper, numpy_helper

K, N, STEPS = 512, 16384, 20


RESCALES = {
    "one weight scale": False,
    "per column, scales multiplied first": True,
    "per column, after the activation's scale": True,
}


def scan_session(n_weights, rescale, threads, rng):
    """A Scan whose body multiplies the step's [1, K] input by each of `n_weights` int8 weights."""
    per_column = RESCALES[rescale]
    initializers, body, outputs = [], [], []
    for i in range(n_weights):
        initializers.append(numpy_helper.from_array(rng.integers(-63, 64, (K, N)).astype(np.int8), f"w{i}"))
        scale = (rng.random(N if per_column else 1) * 1e-2 + 1e-3).astype(np.float32)
        initializers.append(numpy_helper.from_array(scale, f"w_scale{i}"))
        body += [
            helper.make_node("DynamicQuantizeLinear", ["x"], [f"q{i}", f"x_scale{i}", f"x_zero{i}"]),
            helper.make_node("MatMulInteger", [f"q{i}", f"w{i}", f"x_zero{i}"], [f"int32_{i}"]),
            helper.make_node("Cast", [f"int32_{i}"], [f"float{i}"], to=TensorProto.FLOAT),
        ]
        if rescale == "per column, after the activation's scale":
            body += [
                helper.make_node("Mul", [f"float{i}", f"x_scale{i}"], [f"scaled{i}"]),
                helper.make_node("Mul", [f"scaled{i}", f"w_scale{i}"], [f"y{i}"]),
            ]
        else:
            body += [
                helper.make_node("Mul", [f"x_scale{i}", f"w_scale{i}"], [f"scale{i}"]),
                helper.make_node("Mul", [f"float{i}", f"scale{i}"], [f"y{i}"]),
            ]
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1, N]))
    body.append(helper.make_node("Identity", ["state"], ["state_out"]))
    value_info = helper.make_tensor_value_info
    body_graph = helper.make_graph(
        body,
        "step",
        [value_info("state", TensorProto.FLOAT, [1]), value_info("x", TensorProto.FLOAT, [1, K])],
        [value_info("state_out", TensorProto.FLOAT, [1]), *outputs],
    )
    scan = helper.make_node(
        "Scan", ["state0", "xs"], ["final", *(f"ys{i}" for i in range(n_weights))], body=body_graph, num_scan_inputs=1
    )
    graph = helper.make_graph(
        [scan],
        "gemv",
        [value_info("state0", TensorProto.FLOAT, [1]), value_info("xs", TensorProto.FLOAT, [STEPS, 1, K])],
        [
            value_info("final", TensorProto.FLOAT, [1]),
            *(value_info(f"ys{i}", TensorProto.FLOAT, [STEPS, 1, N]) for i in range(n_weights)),
        ],
        initializers,
    )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    inputs = {"state0": np.zeros(1, np.float32), "xs": rng.standard_normal((STEPS, 1, K)).astype(np.float32)}
    print(f"[1, {K}] x [{K}, {N}] int8 GEMV, {args.threads} threads, median ms per GEMV")
    for n_weights in (1, 2, 4):
        sessions = {rescale: scan_session(n_weights, rescale, args.threads, rng) for rescale in RESCALES}
        times = {rescale: [] for rescale in RESCALES}
        for _ in range(3):  # alternating, so that all see the same load
            for rescale, session in sessions.items():
                seconds = median_seconds(lambda: session.run(None, inputs), 30, warmups=3)
                times[rescale].append(seconds * 1e3 / STEPS / n_weights)
        for rescale, ms in times.items():
            print(
                f"onnxruntime, Scan body, {rescale:41}, {n_weights} weight(s) of {K * N / 1e6:.1f} MB in turn: "
                f"{sorted(ms)[1]:.3f}"
            )
    torch.set_num_threads(args.threads)
    weight = torch.randint(-63, 64, (N, K), dtype=torch.float32)
    scales, zero_points = torch.full((N,), 1e-2, dtype=torch.double), torch.zeros(N, dtype=torch.long)
    packed = torch.ops.quantized.linear_prepack(
        torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8), None
    )
    x = torch.from_numpy(inputs["xs"][0])
    ms = median_seconds(lambda: torch.ops.quantized.linear_dynamic(x, packed, True), 200, warmups=3) * 1e3
    print(f"torch quantized.linear_dynamic, one scale per column, 1 weight: {ms:.3f}")


if __name__ == "__main__":
    main()
