"""How the biLM's LSTM layers run fast on a CPU, kept apart from the model so that bilm_elmo.py reads as the paper.

- The GEMMs of one layer (input-to-gates, state-to-gates, projection) for both directions at once: batched float
  matmuls (`FloatGemms`), oneDNN's linear on prepacked float weights (`OneDnnGemms`), or int8 linear on prepacked
  weights (made by `bilm_elmo`'s `quantize_lstm_int8`, which then drops the float weights it replaces): torch's
  dynamic quantized linear (`Int8Gemms`) or, on CPUs with AMX int8, oneDNN's (`OneDnnInt8Gemms`, with the char CNN's
  GEMMs in bf16, `Bf16Linear`): `ElmoInt8Config.kernel`, "auto" by default, the rule of `best_int8_kernel`. Which
  float kernel runs is `config.float_kernel`, "auto" by default: the rule of `best_float_kernel`, resolved once per
  process (`float_kernel`); the char CNN's GEMMs follow the same choice (`float_linear`).
- The input-to-gates products for a block of time steps at once (`config.lstm_gates_block_elements`).
- An in-place LSTM cell for inference (`inplace_lstm_cell`): a handful of element-wise torch kernels on the gate
  tensor the state GEMM has just written, no compiler. It gives the numbers of `bilm_elmo.lstm_cell`.
- One time step (`lstm_step`: gates, cell, projection, clip), which both forms of the layer run: the eager loop over
  a shrinking batch (`bilm_elmo.ElmoLstmLayer`) and `scan_lstm`, the same steps as one `scan` over the whole
  batch, which torch.export and ONNX keep as a loop in the graph for any batch and length.

Nothing here is compiled at run time, so no result depends on a compile cache or on the CPU that made one.
"""

import contextlib
import functools
import logging
import os
import platform
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import torch
import torch.nn.functional as F

try:  # loaded as remote code, the modules are one package
    from .basic_tokenization_elmo import warn_once
except ImportError:  # installed with pip, they are top-level modules
    from basic_tokenization_elmo import warn_once

logger = logging.getLogger(__name__)

# ----- Which float kernel: chosen once per process -------------------------------------------------------------------


def onednn_op_error(what, namespace, ops):
    """Why oneDNN's `what` (the `ops` of `torch.ops.<namespace>`, the first named) cannot run here, or None."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"oneDNN's {what} is used on x86-64 CPUs only, this is {platform.machine()}"
    if not all(hasattr(getattr(torch.ops, namespace), op) for op in ops):
        return f"this PyTorch build has no oneDNN {what} (torch.ops.{namespace}.{ops[0]})"
    if not torch.backends.mkldnn.is_available():
        return "this PyTorch build has no oneDNN (torch.backends.mkldnn.is_available() is False)"
    return None


@functools.cache
def onednn_error():
    """Why oneDNN's linear on prepacked weights cannot run here, or None when it can."""
    return onednn_op_error("float linear", "mkldnn", ("_linear_pointwise", "_reorder_linear_weight"))


@functools.cache
def best_float_kernel():
    """The rule behind `float_kernel="auto"`: oneDNN's linear on prepacked weights wherever it runs (x86-64 builds
    of torch with oneDNN), torch's own matmuls (MKL on x86) elsewhere. oneDNN ran faster than MKL, which takes a slow
    path on AMD CPUs, wherever it was measured (docs/speed.md); it is the library torch itself runs bf16 matmuls
    through, on Intel and AMD alike."""
    return "onednn" if onednn_error() is None else "aten"


def float_kernel(requested):
    """The kernel that runs `requested` (`config.float_kernel`, one of options_elmo.FLOAT_KERNELS): "auto" is
    `best_float_kernel()`. A kernel that cannot run here gives way to torch's own ("aten"), with a warning: it is a
    performance setting (the same numbers but for float rounding), and a folder saved with it loads anywhere."""
    if requested == "auto":
        return best_float_kernel()
    if requested == "onednn" and onednn_error() is not None:
        warn_once(
            f"onednn: {onednn_error()}",
            f"float_kernel='onednn' cannot run here ({onednn_error()}): torch's "
            "own matmuls ('aten') run instead, the same numbers but for float rounding; set float_kernel='auto' "
            "to choose the fastest kernel that runs",
            logger,
        )
        return "aten"
    return requested


def float_linear(kernel):
    """`F.linear` as the char CNN runs it with `kernel` ("aten" or "onednn", see `float_kernel`). oneDNN's linear
    has no backward, so it runs only where no gradient is wanted; its weights stay as they are ([out, in], not
    prepacked: at the char CNN's row counts that is as fast and costs no copy)."""
    return onednn_linear if kernel == "onednn" else F.linear


def onednn_linear(x, weight, bias=None):
    """`F.linear` through oneDNN's linear on `weight` as it is, where `onednn_runs`; `F.linear` elsewhere."""
    if not onednn_runs(x, wants_grad(x, weight, bias)):
        return F.linear(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight.contiguous(), bias, "none", [], "")


def wants_grad(*tensors):
    """Whether autograd records a computation on `tensors` (None ignored)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


@functools.cache
def onednn_bf16():
    """Whether oneDNN runs bf16 products on this CPU (AVX-512 or newer: an AVX2-only CPU such as an AMD Zen 3 has no
    oneDNN bf16 primitive, and torch's own matmuls run bf16 there)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def onednn_runs(x, grad):
    """Whether oneDNN's linear can take a product of `x` with weights, `grad` saying whether a gradient is wanted
    (`wants_grad`): float32, or bf16 where `onednn_bf16`, on the CPU; no gradient (it has no backward), no autocast
    (which casts torch's matmuls, not oneDNN's), not being exported (a graph holds torch's own ops)."""
    return (
        x.device.type == "cpu"
        and (x.dtype == torch.float32 or x.dtype == torch.bfloat16 and onednn_bf16())
        and not torch.is_autocast_enabled("cpu")
        and not torch.compiler.is_exporting()
        and not grad
    )


def float_gemms(layer, kernel):
    """The float GEMMs of `layer` for `kernel` ("aten" or "onednn", see `float_kernel`)."""
    return OneDnnGemms(layer) if kernel == "onednn" else FloatGemms(layer)


# ----- Float GEMMs ------------------------------------------------------------------------------------------------


class FloatGemms:
    """The layer's three GEMMs with its float weights, both directions in one batched matmul (torch's matmul: MKL on
    x86). The bias is added by the input-to-gates GEMM (its output buffer starts as the bias) and the input gates by
    the state GEMM. Differentiable, and what an exported graph holds (plain matmuls)."""

    def __init__(self, layer):
        self.layer = layer

    def for_call(self, fast):
        """The GEMMs a layer call runs: these, torch's own differentiable ops, whether or not `fast` kernels may
        run (see `onednn_runs`)."""
        return self

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


class OneDnnGemms:
    """The layer's three GEMMs through oneDNN's linear on prepacked weights, one call per direction, for inference
    on the CPU (`onednn_runs`; elsewhere the layer runs `FloatGemms`, what training and export run: oneDNN's linear
    has no backward). The prepacked weights (an extra copy of the LSTM weights, in oneDNN's layout for this CPU) are
    made in this process at first use; they are never saved, copied or pickled."""

    def __init__(self, layer):
        self.layer = layer
        self.plain = FloatGemms(layer)
        self._packed = None  # (PackedGemms, the key and weak references of the weights they were made from)

    def __getstate__(self):
        """Copies and pickles leave the prepacked weights out (oneDNN's opaque tensors have no storage to copy);
        they are made again at first use."""
        return dict(self.__dict__, _packed=None)

    def for_call(self, fast):
        """The GEMMs a layer call runs: prepacked ones where `fast` kernels may run, else `FloatGemms`. The prepacked
        weights are made again unless they were made from the very same weight tensors (weak references: a new
        tensor at a freed one's address is not taken for it) with the same storage and in-place version, and no call
        that may train ran since and no weight held a gradient then: an optimizer step can change weights in place
        without bumping their version (fused AdamW does), so weights that may be trained are packed for one call
        only. Each call gets whole prepacked weights of its own and the cache is replaced in one assignment, so
        threads sharing a model (a web server's) never see weights half made."""
        if not fast:
            self._packed = None
            return self.plain
        layer = self.layer
        sources = (layer.input_weight, layer.state_weight, layer.projection_weight, layer.bias)
        key = [(w.data_ptr(), w._version) for w in sources]
        cached = self._packed
        if cached is not None and key == cached[1] and all(ref() is w for ref, w in zip(cached[2], sources)):
            gemms = cached[0]
        else:
            gemms = PackedGemms(layer)
        trainable = any(w.grad is not None for w in sources)
        self._packed = None if trainable else (gemms, key, [weakref.ref(w) for w in sources])
        return gemms


def pack_weights(pack, layer):
    """`pack(weight [out, in], bias or None)` of the layer's six GEMM weights (input with the bias, state,
    projection; each direction), as (input, state, projection) lists of two. They are packed side by side, a thread
    for each CPU torch uses: packing (a transposed copy, then the kernel's layout) runs on one thread a weight, and
    the first call waits for all six. Each thread takes torch's count first: a new thread's OpenMP teams are
    otherwise as large as OMP_NUM_THREADS says (torch caps its own threads only), and tens of thousands crash it."""
    weights = [
        (weight[d].detach().t(), None if bias is None else bias[d, 0].detach())
        for weight, bias in (
            (layer.input_weight, layer.bias),
            (layer.state_weight, None),
            (layer.projection_weight, None),
        )
        for d in range(2)
    ]
    threads = torch.get_num_threads()
    with ThreadPoolExecutor(max_workers=threads, initializer=torch.set_num_threads, initargs=(threads,)) as pool:
        packed = list(pool.map(lambda weight_bias: pack(*weight_bias), weights))
    return packed[0:2], packed[2:4], packed[4:6]


class PackedGemms:
    """A layer's float weights prepacked for oneDNN's linear on this CPU, made by `OneDnnGemms.for_call`, never
    changed after."""

    def __init__(self, layer):
        self.input_weights, self.state_weights, self.projection_weights = pack_weights(
            lambda weight, bias: torch.ops.mkldnn._reorder_linear_weight(weight.contiguous()), layer
        )
        self.biases = [layer.bias[d, 0].detach() for d in range(2)]

    def input_gates(self, x):
        """Per direction (not stacked: that would copy the whole block) and time-major, [steps, n, 4H] each, so
        that the gates of one step are contiguous rows."""
        return [
            torch.ops.mkldnn._linear_pointwise(
                x[d].transpose(0, 1).contiguous(), self.input_weights[d], self.biases[d], "none", [], ""
            )
            for d in range(2)
        ]

    def gates(self, input_gates, step, h):
        n = h.shape[1]
        return torch.stack(
            [
                torch.ops.mkldnn._linear_pointwise.binary(
                    h[d], input_gates[d][step, :n], self.state_weights[d], None, "add"
                )
                for d in range(2)
            ]
        )

    def project(self, cell_output):
        return torch.stack(
            [
                torch.ops.mkldnn._linear_pointwise(cell_output[d], self.projection_weights[d], None, "none", [], "")
                for d in range(2)
            ]
        )


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
        return (
            f"the quantized engine {torch.backends.quantized.engine!r} is not one this PyTorch build supports "
            f"({engines}): set torch.backends.quantized.engine to one of them"
        )
    return None


@contextlib.contextmanager
def quantized_tensors_quiet():
    """torch 2.13 marks quantized tensors deprecated; its int8 GEMMs still take them. Warning filters are the
    process's, not a thread's: a caller that packs in threads enters this around them, so their own entries and exits
    cannot leave the filters changed."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        yield


def pack_int8(weight, bias=None):
    """`weight` [out, in] as int8 with one symmetric scale per output row, prepacked (with the float `bias`, added by
    the GEMM) for the quantized engine's dynamic linear."""
    weight = weight.detach().float().contiguous()
    scale = (weight.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny).double()
    zero_point = torch.zeros(len(scale), dtype=torch.long)
    with quantized_tensors_quiet():
        quantized = torch.quantize_per_channel(weight, scale, zero_point, 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(quantized, None if bias is None else bias.detach().float().contiguous())


def int8_linear(x, packed):
    """`F.linear` with prepacked int8 weights: the float32 input is quantized per call to 7 bits with one scale
    (`reduce_range`: AVX2/AVX-512 kernels without VNNI saturate 16-bit sums of full 8-bit products); float32 out."""
    return torch.ops.quantized.linear_dynamic(x, packed, True)


# ----- int8 GEMMs through oneDNN: AMX's int8 tiles ----------------------------------------------------------------


def cpu_has(feature):
    """Whether this CPU has `feature` as torch's cpuinfo names it ("amx_int8", "avx512_vnni", ...)."""
    capability = getattr(torch._C._cpu, "_get_cpu_capability", dict)()
    return bool(capability.get(feature))


def onednn_may_use_amx():
    """Whether oneDNN may run AMX here: `ONEDNN_MAX_CPU_ISA` (or `DNNL_MAX_CPU_ISA`) caps the instruction sets it
    dispatches to, as the fidelity tests do to run the older kernel sets on a newer CPU."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "ALL")).upper()
    return cap in ("ALL", "DEFAULT", "") or "AMX" in cap


@functools.cache
def onednn_int8_error():
    """Why oneDNN's int8 linear on prepacked weights (`torch.ops.onednn.qlinear_pointwise`) does not run here, or
    None when it does. It is used on AMX's int8 tiles only: oneDNN's other int8 kernels (AVX2, AVX-512 without VNNI)
    can saturate 16-bit sums of full 8-bit products, and fbgemm's were not measured against them."""
    error = onednn_op_error("int8 linear", "onednn", ("qlinear_pointwise", "qlinear_prepack"))
    if error is not None:
        return error
    if not cpu_has("amx_int8"):
        return "this CPU has no AMX int8 (amx_int8), which oneDNN's int8 linear is used on"
    if not onednn_may_use_amx():
        return "ONEDNN_MAX_CPU_ISA keeps oneDNN from AMX, which its int8 linear is used on"
    return None


@functools.cache
def best_int8_kernel():
    """The rule behind `ElmoInt8Config(kernel="auto")`: oneDNN's int8 linear where it runs (a CPU with AMX int8 that
    oneDNN may use, see `onednn_int8_error`), torch's dynamic quantized linear ("quantized": fbgemm on x86, at most
    VNNI; qnnpack on ARM) elsewhere. With AMX, oneDNN's int8 GEMMs of the LSTM's shapes ran well ahead of fbgemm's
    (docs/speed.md)."""
    return "onednn" if onednn_int8_error() is None else "quantized"


def int8_kernel(requested):
    """The kernel that runs `requested` (`ElmoInt8Config.kernel`, one of INT8_KERNELS): "auto" is
    `best_int8_kernel()`. "onednn" where it cannot run gives way to "quantized", with a warning."""
    if requested == "auto":
        return best_int8_kernel()
    if requested == "onednn" and onednn_int8_error() is not None:
        warn_once(
            f"onednn int8: {onednn_int8_error()}",
            f"ElmoInt8Config(kernel='onednn') cannot run here ({onednn_int8_error()}): torch's dynamic quantized "
            "linear ('quantized') runs instead; set kernel='auto' to choose the fastest kernel that runs",
            logger,
        )
        return "quantized"
    return requested


INT8_KERNELS = ("auto", "quantized", "onednn")


class OneDnnInt8Weight:
    """One int8 weight [out, in] for oneDNN's int8 linear: the int8 values with one symmetric scale per output row,
    the float bias the GEMM adds, and the same values prepacked in oneDNN's layout for this CPU (AMX tiles), made
    here and again after a copy or unpickling (oneDNN's opaque tensors have no storage to copy), so that nothing made
    on one CPU is used on another."""

    def __init__(self, int8, scale, bias):
        self.int8, self.scale, self.bias = int8, scale, bias
        self.zero_point = torch.zeros(len(scale), dtype=torch.int32)
        self.packed = torch.ops.onednn.qlinear_prepack(int8, None)

    def __getstate__(self):
        return {"int8": self.int8, "scale": self.scale, "bias": self.bias}

    def __setstate__(self, state):
        self.__init__(**state)


def pack_onednn_int8(weight, bias=None):
    """`weight` [out, in] as int8 with one symmetric scale per output row, prepacked for oneDNN's int8 linear, with
    the float `bias` the GEMM adds."""
    weight = weight.detach().to(torch.float32, memory_format=torch.contiguous_format, copy=True)  # ours to change
    scale = (weight.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
    int8 = weight.div_(scale[:, None]).round_().to(torch.int8)
    return OneDnnInt8Weight(int8, scale, None if bias is None else bias.detach().float().contiguous())


def quantize_activations(x):
    """float32 `x` as contiguous int8 with one symmetric scale for the call (a tensor, so nothing waits for its
    value): full 8 bits, which AMX's int8 tiles sum in 32 bits."""
    scale = x.abs().amax().clamp_(min=torch.finfo(torch.float32).tiny).div_(127)
    return torch.div(x, scale).round_().to(torch.int8).contiguous(), scale


ONEDNN_INT8_ROWS = 256  # rows of one call of oneDNN's AMX int8 linear, which slowed down past them (docs/speed.md)
# A call of fewer rows is padded with zero rows to this many: at some weight shapes (the default model's projection,
# 1,024 -> 128) one or two rows took milliseconds, the time growing with the weight's size (docs/speed.md).
ONEDNN_INT8_MIN_ROWS = 4


def onednn_int8_linear(x, packed, add_to=None):
    """`F.linear` through oneDNN's int8 linear on `packed` (`pack_onednn_int8`), `x` quantized once (one scale) and
    multiplied in calls of `ONEDNN_INT8_MIN_ROWS` to `ONEDNN_INT8_ROWS` rows, as even as can be; float32 out. With
    `add_to` (float32 rows of the output's shape, contiguous), the product is summed into it in place by the GEMM
    (oneDNN's sum post-op) and it is returned."""
    quantized, scale = quantize_activations(x)
    rows = quantized.view(-1, quantized.shape[-1])
    n = len(rows)
    sums = None if add_to is None else add_to.view(-1, add_to.shape[-1])
    if n < ONEDNN_INT8_MIN_ROWS:  # zero rows padded on, their products dropped
        rows = F.pad(rows, (0, 0, 0, ONEDNN_INT8_MIN_ROWS - n))
        sums = None if sums is None else F.pad(sums, (0, 0, 0, ONEDNN_INT8_MIN_ROWS - n))
    size = -(-len(rows) // -(-len(rows) // ONEDNN_INT8_ROWS))  # rows a call: no call is left a few rows
    zero = torch.zeros((), dtype=torch.int32)
    products = []
    for start in range(0, len(rows), size):
        part = rows[start : start + size]
        if sums is None:
            products.append(torch.ops.onednn.qlinear_pointwise.tensor(
                part, scale, zero, packed.packed, packed.scale, packed.zero_point, packed.bias,
                1.0, 0, torch.float32, "none", [], "",
            ))  # fmt: skip
        else:
            torch.ops.onednn.qlinear_pointwise.binary_tensor(
                part, scale, zero, packed.packed, packed.scale, packed.zero_point,
                sums[start : start + size], packed.bias, 1.0, 0, torch.float32, 1.0, 0, "sum", 1.0, "none", [], "",
            )  # fmt: skip
    if add_to is not None:
        if n < ONEDNN_INT8_MIN_ROWS:
            add_to.view(-1, add_to.shape[-1]).copy_(sums[:n])
        return add_to
    return (products[0] if len(products) == 1 else torch.cat(products))[:n].view(*x.shape[:-1], -1)


class Int8Gemms:
    """The layer's three GEMMs on int8 weights, one prepacked weight per direction; float32 in and out. Built from
    the float weights by `Int8Gemms.from_layer`; holds no float copy of them. This class runs torch's dynamic
    quantized linear (`kernel="quantized"`), `OneDnnInt8Gemms` oneDNN's (`"onednn"`): `int8_gemms` picks."""

    pack = staticmethod(pack_int8)

    def __init__(self, input_weights, state_weights, projection_weights):
        self.input_weights, self.state_weights = input_weights, state_weights
        self.projection_weights = projection_weights

    def for_call(self, fast):
        """int8 has no other form: it never trains, and export quantizes the float graph itself."""
        return self

    @classmethod
    def from_layer(cls, layer):
        with quantized_tensors_quiet():
            return cls(*pack_weights(cls.pack, layer))

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


class OneDnnInt8Gemms(Int8Gemms):
    """`Int8Gemms` through oneDNN's int8 linear (`onednn_int8_linear`): AMX's int8 tiles on CPUs that have them,
    full 8-bit activations with one symmetric scale per call. The input gates are kept time-major per direction, so
    that each step's state GEMM sums its product into its step's rows in place (oneDNN's sum post-op); the two
    directions' gates stay apart (`gates`), as the cell takes them."""

    pack = staticmethod(pack_onednn_int8)

    def input_gates(self, x):
        """Per direction, each step's [n, 4H] rows (views of calls of about `ONEDNN_INT8_ROWS` rows, time-major).
        The calls hold whole steps: one call of the block, cut into even parts by `onednn_int8_linear`, ran slower."""
        self._check(x)
        n, steps = x.shape[1], x.shape[2]
        chunk = max(1, ONEDNN_INT8_ROWS // max(n, 1))  # steps a call
        return [
            [
                step_gates
                for t in range(0, steps, chunk)
                for step_gates in onednn_int8_linear(x[d, :, t : t + chunk].transpose(0, 1), self.input_weights[d])
            ]
            for d in range(2)
        ]

    def gates(self, input_gates, step, h):
        """A list of each direction's gates [n, 4H]: its step's input gates with the state GEMM summed into them in
        place. Stacking the two would copy them; `inplace_lstm_cell` takes them apart."""
        n = h.shape[1]
        return [onednn_int8_linear(h[d], self.state_weights[d], add_to=input_gates[d][step][:n]) for d in range(2)]

    def project(self, cell_output):
        return torch.stack([onednn_int8_linear(cell_output[d], self.projection_weights[d]) for d in range(2)])


class Bf16Linear:
    """`F.linear` computed in bf16 (torch's bf16 matmul, which runs oneDNN) on float32 weights, float32 out but for a
    convolution's scores (below): the char CNN's GEMMs under int8 where the int8 kernel is oneDNN's (AMX, whose bf16
    tiles run them several times faster than float32; in float32 the char CNN took about as long as the int8 LSTM,
    and the LSTM's input stays float32). The same arithmetic with or without
    autograd; an int8 model never trains, so no gradient reaches the weights through their bf16 copies. The bf16 copy
    of a parameter is made at first use and again whenever it changes (another tensor, or changed in place); other
    weights (the convolutions', reshaped per call) are cast per call; nothing is saved."""

    def __init__(self):
        self._copies = {}  # id(parameter) -> (weak reference, in-place version, bf16 copy)

    def __getstate__(self):
        """Copies and pickles leave the bf16 copies out (they are made again at first use)."""
        return {"_copies": {}}

    def _bf16(self, weight):
        if not isinstance(weight, torch.nn.Parameter):
            return weight.detach().to(torch.bfloat16)
        cached = self._copies.get(id(weight))
        if cached is None or cached[0]() is not weight or cached[1] != weight._version:
            cached = (weakref.ref(weight), weight._version, weight.detach().to(torch.bfloat16).contiguous())
            self._copies[id(weight)] = cached
        return cached[2]

    def __call__(self, x, weight, bias=None):
        if weight.dtype != torch.float32:  # a model cast to another dtype: its own (the int8 LSTM then says what to do)
            return F.linear(x, weight, bias)
        bias = None if bias is None else bias.detach().to(torch.bfloat16)
        out = F.linear(x.to(torch.bfloat16), self._bf16(weight), bias)
        # A convolution's scores (its weight is reshaped per call, not a parameter) stay bf16: the max over positions
        # picks the same values, and casting all [words, positions, filters] of them back would cost more than the
        # GEMM saves. The highway and the projection return float32.
        return out.float() if isinstance(weight, torch.nn.Parameter) else out


def int8_gemms(layer, kernel):
    """The int8 GEMMs of `layer` for `kernel` ("quantized" or "onednn", see `int8_kernel`), packed from its float
    weights."""
    return (OneDnnInt8Gemms if kernel == "onednn" else Int8Gemms).from_layer(layer)


# ----- The in-place cell -------------------------------------------------------------------------------------------


def inplace_lstm_cell(gates, c, cell_clip):
    """`bilm_elmo.lstm_cell` for inference: the activations overwrite the gate pre-activations [2, n, 4H] (which
    are in the GEMMs' dtype, made float32 first when they are not), so the step costs a few element-wise passes
    and two new tensors (c and the cell output). `gates` may also be a list of the two directions' [n, 4H] (oneDNN
    int8's, see `OneDnnInt8Gemms.gates`); the cell output is then such a list too. No autograd (in-place updates)."""
    new_c = torch.empty_like(c)
    if isinstance(gates, list):
        return new_c, [_inplace_cell(g, c[d], cell_clip, new_c[d]) for d, g in enumerate(gates)]
    return new_c, _inplace_cell(gates, c, cell_clip, new_c)


def _inplace_cell(gates, c, cell_clip, new_c):
    """The cell on gates [..., 4H] and c [..., H]: writes the new c into `new_c`, returns the cell output."""
    output_dtype = gates.dtype
    gates = gates.to(c.dtype).unflatten(-1, (4, -1))  # [..., 4, H]: i, f, g, o
    gates[..., :2, :].sigmoid_()
    gates[..., 3, :].sigmoid_()
    i, f, g, o = gates.unbind(-2)
    g.tanh_()
    torch.mul(f, c, out=new_c).addcmul_(i, g)
    if cell_clip is not None:
        new_c.clamp_(-cell_clip, cell_clip)
    return torch.tanh(new_c).mul_(o).to(output_dtype)


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


def export_gemms(layer):
    """The GEMMs of `layer` that an exported graph holds: torch's matmuls (or the int8 ones) on its weights, detached:
    ONNX cannot take the scan's loop apart while its weights require gradients, as a freshly loaded model's do."""
    if isinstance(layer.gemms, Int8Gemms):
        return layer.gemms.for_call(False)
    return FloatGemms(SimpleNamespace(**{name: p.detach() for name, p in layer.named_parameters(recurse=False)}))


def scan_lstm(gemms, inputs, batch_sizes, h, c, cell, config):
    """The layer's steps (`lstm_step`) as one `torch._higher_order_ops.scan`, for export: torch.export and ONNX keep
    it as a loop in the graph (ONNX `Scan`) for any batch and length, where the eager Python loop would be unrolled to
    the example's length. `batch_sizes` is a tensor [steps] (sentences still running at each step, longest first):
    every sentence runs every step, and one that has ended keeps its final state and outputs zeros, which is what the
    eager loop's shrinking batch gives. Returns the outputs [2, B, steps, P] and the final (h, c)."""
    from torch._higher_order_ops.scan import scan  # private, and why: docs/serving.md (The graph)

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
