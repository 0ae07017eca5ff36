"""How the biLM's LSTM layers run fast on a CPU, kept apart from the model so that modeling_elmo.py reads as the paper.

- The GEMMs of one layer (input-to-gates, state-to-gates, projection) for both directions at once: batched float
  matmuls (`FloatGemms`) or torch's dynamic int8 linear on prepacked weights (`Int8Gemms`, made by the int8
  quantizer in quantization_elmo.py, which then drops the float weights it replaces).
- The input-to-gates products for a block of time steps at once (`config.lstm_gates_block_elements`).
- An in-place LSTM cell for inference (`inplace_lstm_cell`): a handful of element-wise torch kernels on the gate
  tensor the state GEMM has just written, no compiler. It gives the numbers of `modeling_elmo.lstm_cell`.
- One time step (`lstm_step`: gates, cell, projection, clip), which both forms of the layer run: the eager loop over
  a shrinking batch (`modeling_elmo.ElmoLstmLayer`) and `scan_lstm`, the same steps as one `scan` over the whole
  batch, which torch.export and ONNX keep as a loop in the graph for any batch and length.

Nothing here is compiled at run time, so no result depends on a compile cache or on the CPU that made one.
"""

import warnings

import torch

# ----- Float GEMMs ------------------------------------------------------------------------------------------------


class FloatGemms:
    """The layer's three GEMMs with its float weights, both directions in one batched matmul. The bias is added by
    the input-to-gates GEMM (its output buffer starts as the bias) and the input gates by the state GEMM."""

    def __init__(self, layer):
        self.layer = layer

    def input_gates(self, x):
        """x [2, n, steps, D], a block of steps -> x @ W_x + b, [2, n, steps, 4H]."""
        gates = torch.baddbmm(self.layer.bias, x.reshape(2, -1, x.shape[-1]), self.layer.input_weight)
        return gates.view(*x.shape[:-1], -1)

    def gates(self, input_gates, step, h):
        """The block's input gates at `step` for the first n = len(h[0]) sentences plus h [2, n, P] @ W_h: all gate
        pre-activations (i, f, g, o), [2, n, 4H]."""
        return torch.baddbmm(input_gates[:, : h.shape[1], step], h, self.layer.state_weight)

    def project(self, cell_output):
        return torch.bmm(cell_output, self.layer.projection_weight)


# ----- int8 GEMMs: torch's dynamic quantization (fbgemm on x86, qnnpack on ARM) -----------------------------------


def int8_engine_error():
    """Why this torch cannot run int8 GEMMs here (no quantized operators or engine), or None when it can."""
    if not hasattr(torch.ops, "quantized") or not all(
        hasattr(torch.ops.quantized, op) for op in ("linear_prepack", "linear_dynamic")
    ):
        return "this PyTorch build has no quantized dynamic linear (torch.ops.quantized.linear_dynamic)"
    engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
    if not engines:
        return "this PyTorch build has no quantized engine (torch.backends.quantized.supported_engines is empty)"
    if torch.backends.quantized.engine not in engines:
        return (f"the quantized engine {torch.backends.quantized.engine!r} is not one this PyTorch build supports "
                f"({engines}): set torch.backends.quantized.engine to one of them")
    return None


def pack_int8(weight, bias=None):
    """`weight` [out, in] as int8 with one symmetric scale per output row, prepacked (with the float `bias`, added by
    the GEMM) for the quantized engine's dynamic linear."""
    weight = weight.detach().float().contiguous()
    scale = (weight.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny).double()
    zero_point = torch.zeros(len(scale), dtype=torch.long)
    with warnings.catch_warnings():  # torch 2.13 marks quantized tensors deprecated; its int8 GEMMs still take them
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        quantized = torch.quantize_per_channel(weight, scale, zero_point, 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(quantized, None if bias is None else bias.detach().float().contiguous())


def int8_linear(x, packed):
    """`F.linear` with prepacked int8 weights: the float32 input is quantized per call to 7 bits with one scale
    (`reduce_range`: AVX2/AVX-512 kernels without VNNI saturate 16-bit sums of full 8-bit products); float32 out."""
    return torch.ops.quantized.linear_dynamic(x, packed, True)


class Int8Gemms:
    """The layer's three GEMMs on int8 weights, one prepacked weight per direction; float32 in and out. Built from
    the float weights by `Int8Gemms.from_layer`; holds no float copy of them."""

    def __init__(self, input_weights, state_weights, projection_weights):
        self.input_weights, self.state_weights = input_weights, state_weights
        self.projection_weights = projection_weights

    @classmethod
    def from_layer(cls, layer):
        def pack(weight, bias=None):
            return [pack_int8(weight[d].t(), None if bias is None else bias[d, 0]) for d in range(2)]

        return cls(pack(layer.input_weight, layer.bias), pack(layer.state_weight), pack(layer.projection_weight))

    @staticmethod
    def _check(x):
        if x.dtype != torch.float32:
            raise RuntimeError(
                f"this model is quantized to int8, whose GEMMs run on float32 activations, but it is now {x.dtype}: "
                f"call model.to(torch.float32) to keep int8, or load it again without quantization_config to run it "
                f"in {x.dtype}"
            )

    def input_gates(self, x):
        """Per direction (not stacked: that would copy the whole block), [n, steps, 4H] each."""
        self._check(x)
        return [int8_linear(x[d], self.input_weights[d]) for d in range(2)]

    def gates(self, input_gates, step, h):
        n = h.shape[1]
        gates = torch.empty(2, n, input_gates[0].shape[-1], dtype=torch.float32, device=h.device)
        for d in range(2):
            torch.add(input_gates[d][:n, step], int8_linear(h[d], self.state_weights[d]), out=gates[d])
        return gates

    def project(self, cell_output):
        return torch.stack([int8_linear(cell_output[d], self.projection_weights[d]) for d in range(2)])


# ----- The in-place cell -------------------------------------------------------------------------------------------


def inplace_lstm_cell(gates, c, cell_clip):
    """`modeling_elmo.lstm_cell` for inference: the activations overwrite the gate pre-activations [2, n, 4H] (which
    are in the GEMMs' dtype, made float32 first when they are not), so the step costs a few element-wise passes
    and two new tensors (c and the cell output). No autograd (in-place updates)."""
    output_dtype = gates.dtype
    gates = gates.to(c.dtype).unflatten(-1, (4, -1))  # [2, n, 4, H]: i, f, g, o
    gates[..., :2, :].sigmoid_()
    gates[..., 3, :].sigmoid_()
    i, f, g, o = gates.unbind(-2)
    g.tanh_()
    c = torch.mul(f, c).addcmul_(i, g)
    if cell_clip is not None:
        c.clamp_(-cell_clip, cell_clip)
    return c, torch.tanh(c).mul_(o).to(output_dtype)


def gates_block_steps(config, batch):
    """Time steps whose input-to-gates products run as one GEMM: about `config.lstm_gates_block_elements` gate
    values (both directions), so that memory stays bounded for long inputs and large batches while each GEMM stays
    large enough to run fast."""
    return max(1, config.lstm_gates_block_elements // (2 * batch * 4 * config.lstm_dim))


# ----- One time step, and the layer as one loop in a graph ------------------------------------------------------


def lstm_step(gemms, input_gates, step, h, c, cell, config):
    """One time step of both directions from the state (h [2, n, P], c [2, n, H]): the gates (`input_gates` at
    `step`, see `gemms.gates`, plus h W_h), the `cell`, the projection and its clip. Returns the new (h, c)."""
    gates = gemms.gates(input_gates, step, h)
    c, cell_output = cell(gates, c, config.cell_clip)
    h = gemms.project(cell_output)
    if config.proj_clip is not None:
        h = h.clamp(-config.proj_clip, config.proj_clip)
    return h, c


def scan_lstm(gemms, inputs, batch_sizes, h, c, cell, config):
    """The layer's steps (`lstm_step`) as one `torch._higher_order_ops.scan`, for export: torch.export and ONNX keep
    it as a loop in the graph (ONNX `Scan`) for any batch and length, where the eager Python loop would be unrolled to
    the example's length. `batch_sizes` is a tensor [steps] (sentences still running at each step, longest first):
    every sentence runs every step, and one that has ended keeps its final state and outputs zeros, which is what the
    eager loop's shrinking batch gives. Returns the outputs [2, B, steps, P] and the final (h, c)."""
    from torch._higher_order_ops.scan import scan

    input_gates = gemms.input_gates(inputs)  # x W_x + b for all steps, as one GEMM: [2, B, steps, 4H]
    running = torch.arange(inputs.shape[1], device=inputs.device) < batch_sizes.unsqueeze(1)  # [steps, B]

    def step(state, xs):
        h, c = state
        step_gates, keep = xs
        new_h, new_c = lstm_step(gemms, step_gates.unsqueeze(2), 0, h, c, cell, config)
        keep = keep.view(1, -1, 1)
        state = (torch.where(keep, new_h, h), torch.where(keep, new_c, c))
        return state, torch.where(keep, new_h, torch.zeros_like(new_h))

    (h, c), outputs = scan(step, (h, c), (input_gates.movedim(2, 0), running))
    return outputs.movedim(0, 2), (h, c)
