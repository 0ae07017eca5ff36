"""The one way a model loads: `load_model`, used by every command and API (embed, ElmoEmbedder, perplexity, demo,
export, training): every kind of ELMo folder (PyTorch weights or an exported ONNX graph; a biLM or a language model)
in every dtype and runtime, with the checks between its parts (config, weights, tokenizer; a graph against its
config). The folder itself is found, checked and read once by `model_folder.open_model`; a command opens its model
once and passes the `ModelFolder` down. Imports torch only for a model that runs in PyTorch."""

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


def dtype_name(dtype):
    """"float32" for torch.float32 or "float32"; None stays None."""
    return None if dtype is None else str(dtype).removeprefix("torch.")


def load_model(name, *, language_model=False, dtype=None, quantization_config=None, device=None, runtime=None):
    """(model, tokenizer) of the ELMo model `name` (a folder, Hub repo id or `open_model`'s ModelFolder), in one
    line (`ModelError`, `UserError`) when it cannot be used:

    - a PyTorch folder, `runtime` None or "torch": `ElmoModel` (the biLM of any ELMo head; a missing scalar mix
      starts as the plain average of the layers), or with `language_model` its `ElmoForLanguageModeling`, whose
      vocabulary is checked against its softmax; on `device` (default: the CPU; "auto": the accelerator accelerate
      picks for this process, `runtime.process_state`, else the CPU), in `dtype` (a torch dtype or its name; "int8",
      or `quantization_config=ElmoInt8Config()`, loads int8 LSTM weights, CPU only, where "auto" is the CPU); in
      eval mode;
    - a folder `export onnx` wrote: `runtime.onnx.OnnxElmoModel` on the CPU (also for device "auto"), in the dtype
      it was exported in (another is refused), its graph checked against its config.json; no torch is imported;
    - a PyTorch folder with `runtime="onnxruntime"`: its export, made on first use in the Hugging Face cache
      (`runtime.cache.cached_export`, keyed by the weights' hash) and reused; "int8" picks the int8 graph.

    The tokenizer is the folder's `ElmoTokenizer`, checked to make the input rows the model reads."""
    source = open_model(name)
    dtype = dtype_name(dtype)
    if quantization_config is not None:
        if dtype not in (None, "int8"):
            raise UserError(f"{{dtype}} {dtype}: quantization_config loads int8 weights; give one of them",
                            dtype, arguments=["dtype"])
        dtype = "int8"
    if runtime not in (None, *RUNTIMES):
        raise UserError(f"{{runtime}} {runtime!r:.50}: not a runtime; choose {' or '.join(RUNTIMES)}", runtime,
                        arguments=["runtime"])
    if device == "auto":  # an export, onnxruntime and int8 run on the CPU
        exported = source.is_export or runtime == "onnxruntime" or dtype == "int8"
        device = None if exported else process_state().device
    if source.is_export:
        if runtime == "torch":
            raise ModelError(f"{source.name} is an exported ONNX model (model.onnx, no PyTorch weights): it runs in "
                             "onnxruntime; leave the runtime out, or give the PyTorch folder it was exported from",
                             source.name)
        if language_model:
            raise ModelError(f"{source.name} is an exported ONNX model: its graph holds the biLM, not the language "
                             "model's softmax; give the PyTorch language-model folder", source.name)
        return _load_export(source, dtype, device)
    if runtime == "onnxruntime":
        if language_model:
            raise UserError("{runtime} onnxruntime runs the biLM, not the language model's softmax: leave the "
                            "runtime out", "onnxruntime", arguments=["runtime"])
        from .runtime.cache import cached_export

        def load_float32():  # what the cache exports, loaded only when there is something to export
            return _load_torch(source, False, "float32", None, None)

        export = cached_export(source, dtype or "float32", load_float32)
        return _load_export(export, dtype, device, name=source.name)
    return _load_torch(source, language_model, dtype, quantization_config, device)


def _load_export(source, dtype, device, name=None):
    """An exported ModelFolder in onnxruntime with its tokenizer; errors name the model as `name` (default: as
    `source` was named)."""
    from tokenization_elmo import ElmoTokenizer

    from .runtime.onnx import OnnxElmoModel

    model = OnnxElmoModel(source, dtype, device)
    with loading(name or source.name):
        tokenizer = ElmoTokenizer.from_pretrained(source.path)
        check_tokenizer(model.config, tokenizer)
    return model, tokenizer


def _load_torch(source, language_model, dtype, quantization_config, device):
    import torch

    from modeling_elmo import ElmoForLanguageModeling, ElmoModel
    from tokenization_elmo import ElmoTokenizer

    kwargs = {}
    if dtype == "int8":
        if device is not None and torch.device(device).type != "cpu":
            raise UserError(f"int8 inference runs on the CPU, not on {device}: leave the device out, or use "
                            "dtype=torch.bfloat16 on an accelerator", str(device))
        if quantization_config is None:
            from quantization_elmo import ElmoInt8Config

            quantization_config = ElmoInt8Config()
        kwargs["quantization_config"] = quantization_config
    elif dtype is not None:
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise UserError(f"{{dtype}} {dtype!r:.50}: not a torch dtype (float32, bfloat16, float16) nor int8",
                            dtype, arguments=["dtype"])
        kwargs["dtype"] = getattr(torch, dtype)
    if language_model and not source.is_language_model:
        raise ModelError(f"{source.name}: it has no language-model softmax (no lm_vocab_size in its config.json): "
                         "give a language-model folder", source.name)
    with loading(source.name):
        config = source.elmo_config()  # config.json as open_model read it: not parsed a second time
        tokenizer = ElmoTokenizer.from_pretrained(source.path)
        model_class = ElmoForLanguageModeling if language_model else ElmoModel
        model, info = model_class.from_pretrained(source.path, config=config, output_loading_info=True, **kwargs)
        check_tokenizer(model.config, tokenizer)
        if language_model:
            model.check_vocabulary(tokenizer)
    missing = sorted(key for key in info["missing_keys"] if "bilm." in key)
    if missing:
        raise ModelError(f"{source.name} lacks the biLM weights {missing[:3]}...: not a converted or trained ELMo",
                         source.name)
    if device is not None:
        model = model.to(device)
    return model.eval(), tokenizer
