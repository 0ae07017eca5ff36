"""What runs a loaded model, and what a loaded model says it can do (`traits`), so that callers ask instead of
testing its type: PyTorch's `ElmoModel` (in modeling_elmo.py) and an exported graph run by onnxruntime
(`runtime.onnx.OnnxElmoModel`). Imports nothing heavy."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelTraits:
    """`runtime`: "torch" or "onnxruntime"; `dtype`: the compute dtype's name (float32, bfloat16, int8...);
    `stateful`: whether it can carry the LSTM state from one window of a text to the next (`lstm_state`);
    `tensors`: the tensor type its calls take and give ("pt" or "np", a tokenizer's `return_tensors`)."""

    runtime: str
    dtype: str
    stateful: bool
    tensors: str


def traits(model):
    """The `ModelTraits` of a loaded model: its own `traits` where it declares them (an exported graph), else those
    of a PyTorch ELMo model (stateful; int8 when quantized, else its parameters' dtype)."""
    declared = getattr(model, "traits", None)
    if declared is not None:
        return declared
    dtype = "int8" if getattr(model, "is_quantized", False) else str(model.dtype).removeprefix("torch.")
    return ModelTraits("torch", dtype, stateful=True, tensors="pt")
