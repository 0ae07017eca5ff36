"""What runs a loaded model, and what a loaded model says it can do (`traits`), so that callers ask instead of
testing its type: a PyTorch model (the inference core `bilm_elmo.ElmoModelCore`, or transformers' `ElmoModel`) and
an exported graph run by onnxruntime
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


@dataclass(frozen=True)
class SingleProcess:
    """accelerate's PartialState for a process that no launcher started, without importing accelerate: on `device`."""

    device: object = "cpu"
    process_index, num_processes, is_main_process = 0, 1, True

    def wait_for_everyone(self):
        pass


def process_state(model=None):
    """accelerate's state of this process (rank, world size, device). In a process not started by a launcher
    (WORLD_SIZE unset or 1), one process on the accelerator torch finds (cuda, mps, ...), else the CPU, without
    importing accelerate; the CPU, without importing torch either, for a `model` that does not run in torch. Under
    torchrun / accelerate launch, accelerate's PartialState; without an accelerator it must be told `cpu=True` to
    see the other processes (gloo)."""
    if os.environ.get("WORLD_SIZE", "1") == "1":
        if model is not None and traits(model).runtime != "torch":
            return SingleProcess()
        import torch

        accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
        return SingleProcess(accelerator or torch.device("cpu"))
    import torch
    from accelerate import PartialState

    return PartialState(cpu=torch.accelerator.current_accelerator() is None)
