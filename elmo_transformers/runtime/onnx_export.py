"""The exporter: an ELMo model as the ONNX graph onnxruntime serves without PyTorch. A loaded float32 model is traced
into a folder, written whole or not at all (`export_onnx`, what `elmo-transformers export onnx` runs, as optimum's
`onnx_export_from_model` takes a loaded model), and the exports made on first use for runtime="onnxruntime"
(`runtime.cache`) write theirs the same way (`write_export`).

The folder holds `model.onnx`, `config.json`, the tokenizer's files with `tokenization_elmo.py` (which needs no torch)
and a README.md card. The graph is what `ElmoModel` computes, traced by `torch.onnx.export(..., dynamo=True)`; its
inputs, outputs, dynamic axes and metadata are those of `runtime.onnx_config.ElmoOnnxConfig` (the one description
the card is also written from). The LSTM is one loop (ONNX `Scan`, `kernels_elmo.scan_lstm`), not unrolled, and every
call starts from a zero state. A language model's biLM is exported; its word softmax is not.

`int8` quantizes the weights of the LSTM's GEMMs (see `quantize_int8`); the graph's metadata names its dtype and the
config fields it was made from. `runtime.onnx.OnnxElmoModel` runs such a folder.
"""

import contextlib
import importlib.metadata
import json
import logging
import os
import re
import warnings

import torch

from ..errors import UserError
from ..output_paths import check_output, write_folder_atomically
from .onnx import check_onnx_installed
from .onnx_config import CONFIG_KEY, DTYPE_KEY, DTYPES, ElmoOnnxConfig

PACKAGES = ("onnx", "onnxscript", "onnxruntime")
# Weights above this many bytes go to model.onnx.data beside the graph: one ONNX (protobuf) file cannot exceed 2 GiB.
EXTERNAL_DATA_BYTES = 1 << 30
# The example the graph is traced on: two sentences of different lengths (batch and words are then dynamic).
EXAMPLE = [["ELMo", "leaves", "PyTorch", "."], ["Hello"]]


def export_onnx(model, tokenizer, output, dtype="float32", overwrite=False, source=None):
    """Export `model` (a float32 ElmoModel or ElmoForLanguageModeling, e.g. `model_source.load_model(folder,
    ElmoModel, dtype="float32")`, with its `tokenizer`) in `dtype` (float32, or int8 LSTM weights) into the folder
    `output`, written whole or not at all (`overwrite=True` replaces only an earlier export or conversion:
    `output_paths.check_output`); returns its absolute path. `source` is how the card names the model (default: its
    `name_or_path`)."""
    if dtype not in DTYPES:
        raise UserError(f"dtype {dtype!r:.50}: the ONNX export offers {', '.join(DTYPES)}", dtype, argument="dtype")
    check_onnx_installed(PACKAGES, "exporting to ONNX")
    source = str(source or getattr(model, "name_or_path", "") or "an ELMo model")
    output = check_output(output, overwrite, [getattr(model, "name_or_path", None)])
    return write_folder_atomically(
        lambda staging: write_export(model, tokenizer, staging, dtype, source), output, overwrite
    )


def write_export(model, tokenizer, staging, dtype, source):
    """Write the export of `model` (a loaded float32 ElmoModel or ElmoForLanguageModeling, with its `tokenizer`)
    in `dtype` (float32 or int8) into the folder `staging`; `source` is how the card names the model."""
    path = os.path.join(staging, "model.onnx")
    contract = ElmoOnnxConfig(model.config)
    opset = export_graph(model, tokenizer, path, contract)
    if dtype == "int8":
        quantize_int8(path)
    tokenizer.save_pretrained(staging)
    config = model.config.to_dict()
    config.pop("auto_map", None)  # no PyTorch weights here: the Auto classes would load none
    config.pop("_name_or_path", None)
    config["architectures"] = ["ElmoModel"]
    with open(os.path.join(staging, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    is_lm = "ElmoForLanguageModeling" in (model.config.architectures or [])
    with open(os.path.join(staging, "README.md"), "w", encoding="utf-8") as f:
        f.write(model_card(model.config, contract, source, dtype, opset, is_lm))


class ElmoGraph(torch.nn.Module):
    """What the graph computes: `ElmoModel.forward`'s ELMo vectors and its biLM layers, stacked."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids, attention_mask=attention_mask, output_hidden_states=True, return_dict=True)
        return out.last_hidden_state, torch.stack(out.hidden_states)


@contextlib.contextmanager
def exporter_quiet():
    """Silence what torch's exporter says that is not the user's concern, and only that: its registration's
    "torchvision is not installed" (its operators are not ELMo's), and its notes on names and deprecations; the
    logger level and the warning filters are restored afterwards, also when the export fails."""
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            for module in (r"torch\.onnx", r"torch\.export", r"onnxscript", r"torch\._export"):
                warnings.filterwarnings("ignore", module=module)
            # torch's pytree, on the exported program's tree specs (raised where copyreg rebuilds them)
            warnings.filterwarnings("ignore", r".*isinstance\(treespec, LeafSpec\)", FutureWarning)
            yield
    finally:
        registration.setLevel(level)


def export_graph(model, tokenizer, path, contract):
    """Trace `model` (float32, eval) into the ONNX file `path` as `contract` (an ElmoOnnxConfig) describes it;
    returns the opset."""
    example = tokenizer(EXAMPLE, is_split_into_words=True, padding=True, return_tensors="pt")
    inputs = tuple(example[name] for name in contract.inputs)
    axes = {
        name: {axis: torch.export.Dim(label) for axis, label in dims.items()}
        for name, dims in contract.dynamic_axes(contract.inputs).items()
    }
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    with torch.no_grad(), exporter_quiet():
        program = torch.onnx.export(
            ElmoGraph(model).eval(),
            inputs,
            input_names=list(contract.inputs),
            output_names=list(contract.outputs),
            dynamo=True,
            dynamic_shapes=axes,
            verbose=False,
        )
        program.model.metadata_props[DTYPE_KEY] = "float32"
        program.model.metadata_props[CONFIG_KEY] = contract.graph_fields()
        program.save(path, external_data=weight_bytes > EXTERNAL_DATA_BYTES)
    return next(o.version for o in program.model_proto.opset_import if o.domain in ("", "ai.onnx"))


# The LSTM's GEMM weights (input, state and projection, both directions stacked: [2, K, N]), most of the arithmetic.
LSTM_WEIGHT = re.compile(r"bilm\.layers\.\d+\.(input|state|projection)_weight$")
# Weights are 7-bit signed integers (|q| <= 63), one scale per direction and output column: a uint8
# activation times such a weight, summed in pairs, fits the 16-bit intermediate sums of x86 int8 kernels without VNNI
# (AVX2, AVX-512), so the numbers do not depend on the CPU. Activations are uint8, one scale per call.
WEIGHT_LEVELS = 63


def quantize_int8(path):
    """Rewrite the ONNX file `path` so that the LSTM's GEMMs run in int8: each `MatMul` by an LSTM weight becomes,
    per direction, `DynamicQuantizeLinear` of its input, `MatMulInteger` by that direction's 2-D int8 weight (which
    onnxruntime packs once, as it does not a batched 3-D one) and a float rescale; also inside the Scan loops. Not
    onnxruntime's `quantize_dynamic`: it also quantizes the char CNN (changing the context-free layer) and keeps 8-bit
    weights, whose products can saturate on CPUs without VNNI (see WEIGHT_LEVELS)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    graph = model.graph
    weights = {init.name: init for init in graph.initializer if LSTM_WEIGHT.search(init.name)}
    for name, init in weights.items():
        weight = numpy_helper.to_array(init).astype(np.float32)  # [2, K, N]
        scale = np.maximum(np.abs(weight).max(axis=1), np.finfo(np.float32).tiny) / WEIGHT_LEVELS  # [2, N]
        quantized = np.clip(np.rint(weight / scale[:, None]), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int8)
        graph.initializer.remove(init)
        for d in range(2):
            graph.initializer.extend(
                [
                    numpy_helper.from_array(quantized[d], f"{name}.int8.{d}"),
                    numpy_helper.from_array(scale[d], f"{name}.scale.{d}"),
                ]
            )
    graph.initializer.extend(
        [numpy_helper.from_array(np.array(d, np.int64), f"int8.direction.{d}") for d in range(2)]
        + [numpy_helper.from_array(np.array([0], np.int64), "int8.axis0")]
    )

    def direction_gemm(x, weight, out, d):
        """x[d] @ int8 weight d, rescaled: out [1, n, N]."""
        p = f"{out}.{d}"
        return [
            helper.make_node("Gather", [x, f"int8.direction.{d}"], [f"{p}.x"], axis=0),
            helper.make_node("DynamicQuantizeLinear", [f"{p}.x"], [f"{p}.q", f"{p}.x_scale", f"{p}.x_zero"]),
            helper.make_node("MatMulInteger", [f"{p}.q", f"{weight}.int8.{d}", f"{p}.x_zero"], [f"{p}.int32"]),
            helper.make_node("Cast", [f"{p}.int32"], [f"{p}.float"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", [f"{p}.x_scale", f"{weight}.scale.{d}"], [f"{p}.scale"]),
            helper.make_node("Mul", [f"{p}.float", f"{p}.scale"], [f"{p}.y"]),
            helper.make_node("Unsqueeze", [f"{p}.y", "int8.axis0"], [f"{p}.out"]),
        ]

    def rewrite(graph):
        nodes = []
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    rewrite(attribute.g)
            if node.op_type != "MatMul" or node.input[1] not in weights:
                nodes.append(node)
                continue
            (x, weight), out = node.input, node.output[0]
            nodes += direction_gemm(x, weight, out, 0) + direction_gemm(x, weight, out, 1)
            nodes.append(helper.make_node("Concat", [f"{out}.0.out", f"{out}.1.out"], [out], axis=0))
        graph.ClearField("node")
        graph.node.extend(nodes)

    rewrite(graph)
    next(entry for entry in model.metadata_props if entry.key == DTYPE_KEY).value = "int8"
    onnx.checker.check_model(model)
    onnx.save(model, path)


def model_card(config, contract, source, dtype, opset, is_lm):
    """The folder's README.md: what the graph takes and gives, how it was made, and how to serve it."""
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("elmo-transformers", "torch", "onnx", "onnxscript")
    )
    lm = (
        "\nThis is the biLM of a language model: the word softmax is not exported (the graph gives the "
        "biLM's layers and ELMo vectors, not word probabilities).\n"
        if is_lm
        else ""
    )
    weights = (
        "int8 weights for the LSTM's GEMMs (float32 activations), within the project's int8 rule (cosine to "
        "float32: median >= 0.999, 1st percentile >= 0.99)"
        if dtype == "int8"
        else "float32"
    )
    return f"""---
library_name: onnx
tags:
- elmo
- onnx
---

# ELMo as ONNX ({dtype})

ELMo (Peters et al., 2018, *Deep contextualized word representations*): the biLM (char CNN, highway, projection,
{config.n_layers} bidirectional LSTM layers of {config.lstm_dim} cells projected to {config.projection_dim}) and its
scalar mix, as one ONNX graph (opset {opset}, {weights}) that onnxruntime runs without PyTorch.
{lm}
Made by elmo-transformers' ONNX export in {dtype} (`elmo-transformers export onnx --dtype {dtype}`, or on first use
with `runtime="onnxruntime"`) from `{source}` ({versions}), with
`torch.onnx.export(..., dynamo=True)`; the LSTM is a loop in the graph (`Scan`), so any batch and length run.

{contract.describe()}
Zeros at padding. Every call starts from a zero LSTM state (stateless). Inputs of another rank or dtype are refused
by onnxruntime itself (`INVALID_ARGUMENT`); the values are not checked (char ids beyond the table, padding in the
middle of a sentence give undefined results).

## Usage

```python
import numpy as np
import onnxruntime
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder", trust_remote_code=True)
session = onnxruntime.InferenceSession("path/to/this/folder/model.onnx")
batch = tokenizer([["Hello", "world", "!"], ["ELMo"]], is_split_into_words=True, padding=True,
                  return_tensors="np")
vectors, layers = session.run(None, {{name: batch[name].astype(np.int64)
                                     for name in ("input_ids", "attention_mask")}})
```
"""
