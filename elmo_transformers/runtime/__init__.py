"""What runs a loaded model, and what a loaded model says it can do (`traits`), so that callers ask instead of
testing its type: PyTorch's `ElmoModel` (in modeling_elmo.py) and an exported graph run by onnxruntime
(`runtime.onnx.OnnxElmoModel`); and the process a model runs in (`process_state`: its rank and default device).
Imports nothing heavy."""

import os
from dataclasses import dataclass

RUNTIMES = ("torch", "onnxruntime")  # what runs a model (model_source.load_model)


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


class SingleProcess:
    """accelerate's PartialState for one process on the CPU, without importing torch (an exported model's run)."""

    device, process_index, num_processes, is_main_process = "cpu", 0, 1, True

    def wait_for_everyone(self):
        pass


def process_state(model=None):
    """accelerate's state of this process (rank, world size, device). Without an accelerator accelerate must be
    told `cpu=True` to see the other processes of torchrun / accelerate launch (gloo); otherwise it picks the
    process's accelerator. For a `model` that does not run in torch, in a process not started by a launcher
    (WORLD_SIZE unset or 1): one process on the CPU, without importing torch."""
    if model is not None and traits(model).runtime != "torch" and os.environ.get("WORLD_SIZE", "1") == "1":
        return SingleProcess()
    import torch
    from accelerate import PartialState

    return PartialState(cpu=torch.accelerator.current_accelerator() is None)
