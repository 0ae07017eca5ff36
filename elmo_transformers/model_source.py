"""The one way a model loads: `load_model`, used by every command and API (embed, ElmoEmbedder, perplexity, the demo
and its page, export, the export cache, training): every kind of ELMo folder (PyTorch weights or an exported ONNX
graph; a biLM, a language model or a task head) in every dtype and runtime, with the checks between its parts
(config, weights, tokenizer; a graph against its config). The folder is found, checked and read by
`model_folder.open_model` (a command opens its model once and passes the `ModelFolder` down), and its files are read
by the ModelFolder's methods. Inference loads without transformers (`bilm_elmo`'s cores and
`basic_tokenization_elmo.ElmoBasicTokenizer`): it starts as fast as torch itself, and an exported folder imports
neither torch nor transformers."""

from .errors import ModelError, UserError
from .model_folder import loading, open_model
from .runtime import RUNTIMES, process_state


def check_tokenizer(config, tokenizer):
    """Raise ValueError unless `tokenizer` makes the input rows the model of `config` reads: a tokenizer whose
    max_characters_per_token differs from the model's loads, and fails only in the first forward pass."""
    made, read = getattr(tokenizer, "input_width", None), getattr(config, "input_width", None)  # None: not ELMo's
    if made != read:
        raise ValueError(
            f"its tokenizer makes {made} ids a word (max_characters_per_token "
            f"{getattr(tokenizer, 'max_characters_per_token', None)} in tokenizer_config.json), the model reads {read} "
            f"(max_characters_per_token {getattr(config, 'max_characters_per_token', None)} in config.json): restore "
            "the tokenizer files saved with the model"
        )


def torch_device(name):
    """`name` (a str or torch.device) as a device this torch can use (a tensor is put there and holds data), else a
    one-line UserError: a name torch does not know ("banana"), an accelerator this build or machine lacks ("cuda"
    with a CPU-only torch), the meta device (tensors without data: nothing can be computed there)."""
    import torch

    from .errors import first_line

    try:
        device = torch.device(name)
        torch.empty(0, device=device)
        reason = "the meta device holds no data, so no model runs there" if device.type == "meta" else None
    except (RuntimeError, AssertionError, ValueError, NotImplementedError) as e:
        reason = first_line(e).split(". ")[0]  # (an unbuilt backend lists every dispatch key after it)
    if reason is not None:
        accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
        available = ["cpu", *([accelerator.type] if accelerator else [])]
        raise UserError(
            f"device {name}: not usable here as a torch device ({reason}); devices available: {', '.join(available)}",
            name,
            argument="device",
        )
    return device


def dtype_name(dtype):
    """ "float32" for torch.float32 or "float32"; None stays None."""
    return None if dtype is None else str(dtype).removeprefix("torch.")


def load_model(
    name,
    model_class=None,
    *,
    language_model=False,
    config=None,
    dtype=None,
    quantization_config=None,
    device=None,
    runtime=None,
    threads=None,
):
    """(model, tokenizer) of the ELMo model `name` (a folder, Hub repo id or `open_model`'s ModelFolder), in one
    line (`ModelError`, `UserError`) when it cannot be used:

    - a PyTorch folder, `model_class` None, `runtime` None or "torch": the inference core, without transformers:
      `bilm_elmo.ElmoModelCore` (the biLM of any ELMo head; a missing scalar mix starts as the plain average of the
      layers), or with `language_model` its `ElmoLanguageModelCore`, whose vocabulary is checked against its
      softmax; with `basic_tokenization_elmo.ElmoBasicTokenizer`;
    - `model_class` one of transformers' classes (`ElmoModel`, `ElmoForLanguageModeling`, a head): its
      `from_pretrained`, with the folder's config updated by `config` (a dict: a head's labels, training settings),
      and transformers' `ElmoTokenizer`;
    - either on `device` (default: the CPU; "auto": the accelerator accelerate picks for this process,
      `runtime.process_state`, else the CPU), in `dtype` (a torch dtype or its name; default: config.json's, else
      the weights'; "int8", or `quantization_config=ElmoInt8Config()`, loads int8 LSTM weights, CPU only, where
      "auto" is the CPU), in eval mode;
    - a folder `export onnx` wrote: `runtime.onnx.OnnxElmoModel` on the CPU (also for device "auto"), in the dtype
      it was exported in (another is refused), on `threads` CPU threads (default: as many as torch), its graph
      checked against its config.json; no torch is imported;
    - a PyTorch folder with `runtime="onnxruntime"`: its export, made on first use in the Hugging Face cache
      (`runtime.cache.cached_export`, keyed by the model's fingerprint) and reused; "int8" picks the int8 graph.

    The tokenizer is checked to make the input rows the model reads."""
    source = open_model(name)
    dtype = dtype_name(dtype)
    if quantization_config is not None:
        if dtype not in (None, "int8"):
            raise UserError(
                f"dtype {dtype}: quantization_config loads int8 weights; give one of them", dtype, argument="dtype"
            )
        dtype = "int8"
    if runtime not in (None, *RUNTIMES):
        raise UserError(
            f"runtime {runtime!r:.50}: not a runtime; choose {' or '.join(RUNTIMES)}", runtime, argument="runtime"
        )
    if model_class is not None and (language_model or runtime == "onnxruntime" or source.is_export):
        raise UserError(
            f"{model_class.__name__} loads a PyTorch folder with transformers: leave out the language "
            "model, the runtime and exported folders",
            model_class.__name__,
        )
    if dtype == "int8" and device not in (None, "auto") and str(device).split(":")[0] != "cpu":
        raise UserError(
            f"device {device}: int8 inference runs on the CPU only: leave the device out, or compute in bfloat16 "
            "on an accelerator",
            str(device),
            argument="device",
        )
    if device == "auto":  # an export, onnxruntime and int8 run on the CPU
        exported = source.is_export or runtime == "onnxruntime" or dtype == "int8"
        device = None if exported else process_state().device
    elif device is not None and not (source.is_export or runtime == "onnxruntime"):
        device = torch_device(device)
    if source.is_export:
        if runtime == "torch":
            raise ModelError(
                f"{source.name} is an exported ONNX model (model.onnx, no PyTorch weights): it runs in "
                "onnxruntime; leave the runtime out, or give the PyTorch folder it was exported from",
                source.name,
            )
        if language_model:
            raise ModelError(
                f"{source.name} is an exported ONNX model: its graph holds the biLM, not the language "
                "model's softmax; give the PyTorch language-model folder",
                source.name,
            )
        return _load_export(source, dtype, device, threads)
    if runtime == "onnxruntime":
        if language_model:
            raise UserError(
                "runtime onnxruntime runs the biLM, not the language model's softmax: leave the runtime out",
                "onnxruntime",
                argument="runtime",
            )
        from .runtime.cache import cached_export

        def load_float32():  # what the cache exports, loaded only when there is something to export
            from modeling_elmo import ElmoModel

            return _load_torch(source, ElmoModel, False, None, "float32", None, None)

        export = cached_export(source, dtype or "float32", load_float32)
        return _load_export(export, dtype or "float32", device, threads, name=source.name)
    return _load_torch(source, model_class, language_model, config, dtype, quantization_config, device)


def _load_export(source, dtype, device, threads, name=None):
    """An exported ModelFolder in onnxruntime with its tokenizer; errors name the model as `name` (default: as
    `source` was named)."""
    from .runtime.onnx import OnnxElmoModel

    model = OnnxElmoModel(source, dtype, device, threads)
    with loading(name or source.name):
        tokenizer = source.basic_tokenizer()
        check_tokenizer(model.config, tokenizer)
    return model, tokenizer


def torch_dtype(dtype, source):
    """The torch dtype of `dtype` (a name; None: config.json's `dtype`, else the weights' own), refusing a name that
    is not a torch dtype."""
    import torch

    if dtype is None:
        dtype = source.config.get("dtype") or source.config.get("torch_dtype")
        if dtype in (None, "auto"):
            return None
    value = getattr(torch, dtype, None) if isinstance(dtype, str) else None
    if not isinstance(value, torch.dtype):
        raise UserError(
            f"dtype {dtype!r:.50}: not a torch dtype (float32, bfloat16, float16) nor int8", dtype, argument="dtype"
        )
    return value


def _load_torch(source, model_class, language_model, config, dtype, quantization_config, device):
    import torch

    if language_model and not source.is_language_model:
        raise ModelError(
            f"{source.name}: it has no language-model softmax (no lm_vocab_size in its config.json): "
            "give a language-model folder",
            source.name,
        )
    int8 = dtype == "int8"
    if int8:
        from kernels_elmo import int8_engine_error

        if int8_engine_error() is not None:
            raise UserError(f"int8 inference cannot run here: {int8_engine_error()}", "int8")
    with loading(source.name):
        options = source.options()  # config.json's fields checked first (its dtype too), without transformers
        value = torch.float32 if int8 else torch_dtype(dtype, source)
        if model_class is None:
            model, tokenizer = _load_core(source, options, language_model, value)
            if int8:
                from bilm_elmo import quantize_lstm_int8

                quantize_lstm_int8(model)
        else:
            model, tokenizer = _load_pretrained(source, model_class, config, value, int8, quantization_config)
        check_tokenizer(model.config, tokenizer)
        if hasattr(model, "check_vocabulary"):  # a language model
            model.check_vocabulary(tokenizer)
    if device is not None:
        model = model.to(device)
    return model.eval(), tokenizer


def _load_core(source, options, language_model, dtype):
    """The inference core of a PyTorch folder (`bilm_elmo`), given the saved tensors themselves (`assign`: no copy);
    a scalar mix the folder lacks keeps its start (the plain average of the layers)."""
    import torch

    from bilm_elmo import ElmoLanguageModelCore, ElmoModelCore

    model = (ElmoLanguageModelCore if language_model else ElmoModelCore)(options)
    weights = source.state_dict()
    dtype = dtype or next((t.dtype for t in weights.values() if t.is_floating_point()), torch.float32)
    if not language_model and not any(key.startswith("bilm.") for key in weights):  # a head's or an LM's biLM
        weights = {key.removeprefix("elmo."): tensor for key, tensor in weights.items() if key.startswith("elmo.")}
    expected = model.state_dict().keys()
    lacking = sorted(key for key in expected if key not in weights and "scalar_mixes." not in key)
    if lacking:
        raise ModelError(
            f"{source.name} lacks the biLM weights {lacking[:3]}...: not a converted or trained ELMo", source.name
        )
    model.load_state_dict(
        {key: weights[key].to(dtype) for key in expected if key in weights}, strict=False, assign=True
    )
    return model.to(dtype), source.basic_tokenizer()


def _load_pretrained(source, model_class, config, dtype, int8, quantization_config):
    """transformers' `model_class.from_pretrained` of the folder, and its ElmoTokenizer."""
    kwargs = {}
    if int8:
        if quantization_config is None:
            from quantization_elmo import ElmoInt8Config

            quantization_config = ElmoInt8Config()
        kwargs["quantization_config"] = quantization_config
    elif dtype is not None:
        kwargs["dtype"] = dtype
    model, info = source.pretrained(model_class, source.elmo_config(**(config or {})), **kwargs)
    missing = sorted(key for key in info["missing_keys"] if "bilm." in key)
    if missing:
        raise ModelError(
            f"{source.name} lacks the biLM weights {missing[:3]}...: not a converted or trained ELMo", source.name
        )
    return model, source.tokenizer()
