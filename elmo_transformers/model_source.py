"""Where a model comes from, and the one way it loads. `open_model` finds and checks it before anything loads: a
local folder, or a Hub repo id that is in the local cache or on a reachable Hub, holding an ELMo config.json, which it
reads once into the `ModelFolder` every later step is given (`resolve_model`: its folder alone). A name that is none
of these is one line (`ModelError`) at once, instead of transformers' offline retries, a traceback, or another
architecture's weights run as ELMo. A command opens its model once and passes the ModelFolder down.

`load_model` is the one loader every command and API uses (embed, ElmoEmbedder, perplexity, demo, export): every
kind of ELMo folder (PyTorch weights or an exported ONNX graph; a biLM or a language model) in every dtype and
runtime, with the checks between its parts (config, weights, tokenizer; a graph against its config). It imports torch
only for a model that runs in PyTorch."""

import contextlib
import glob
import json
import os
from dataclasses import dataclass

from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub.errors import (GatedRepoError, HFValidationError, LocalEntryNotFoundError,
                                    RepositoryNotFoundError, StrictDataclassError)
from huggingface_hub.utils import validate_repo_id
from safetensors import SafetensorError

from .embedding.defaults import RUNTIMES
from .errors import ModelError, UserError, first_line
from .models import DEFAULT_MODEL, DEFAULT_MODEL_NAMES
from .runtime import process_state

GIVE = "give a converted or trained ELMo folder, or the Hub repo id of one"


def check_hub_id(value):
    """Refuse, in one line, a value that is not a Hub repo id (NAME or OWNER/NAME, huggingface_hub's rule): the
    repo to push to, or a repo named in a model card's metadata and links."""
    try:
        validate_repo_id(value)
    except HFValidationError as e:
        raise UserError(f"{value!r:.200} is not a Hub repo id: {first_line(e)}", value) from None
    return value


def resolve_model(name):
    """The folder holding `name`'s files (`open_model`'s path): `name` itself when it is a folder, else the cached
    snapshot of the Hub repo `name`. Raises ModelError in one line when it is not an ELMo model."""
    return open_model(name).path


def shipped_model(name):
    """The shipped model's folder for one of its names (`default`, `elmo-en-small`) where no such path exists, else
    `name` as given."""
    return DEFAULT_MODEL if name in DEFAULT_MODEL_NAMES and not os.path.exists(name) else name


def check_elmo_folder(folder, name):
    """The config.json of `folder` (the files of model `name`), as a dict, when it is a JSON object of model_type
    "elmo" and the folder's other JSON files are JSON objects; else one ModelError line naming the file. Read as
    plain JSON, before transformers is imported: a BERT folder is refused at once, not loaded into ELMo's classes,
    and a cut tokenizer_config.json is named (transformers gives a bare JSON message or a traceback)."""
    path = os.path.join(folder, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        raise ModelError(f"{name} has no config.json: {GIVE}", name) from None
    except (OSError, ValueError, RecursionError) as e:  # not UTF-8, not JSON, too deep
        raise ModelError(f"{name}: its config.json cannot be read as JSON ({first_line(e)}): restore it, or "
                         "convert the model again", name) from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != "elmo":
        raise ModelError(f"{name} is not an ELMo model: its config.json has model_type {model_type!r}, not "
                         f"'elmo'; {GIVE}", name)
    for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*.json"))):  # tokenizer_config.json...
        if os.path.basename(path) == "config.json":
            continue
        try:
            with open(path, encoding="utf-8") as f:
                value = json.load(f)
        except (OSError, ValueError, RecursionError) as e:
            problem = f"is not valid JSON ({first_line(e)})"
        else:
            if isinstance(value, dict):
                continue
            problem = f"holds a JSON {type(value).__name__}, not an object"
        raise ModelError(f"{name}: {path} {problem}: the folder is damaged (a cut download or copy?); restore that "
                         "file", name)
    return config


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


@contextlib.contextmanager
def loading(name):
    """Around a command's `from_pretrained` calls: a folder that cannot be loaded (a config.json that holds a bad
    value or does not fit the weights, missing weights, a tokenizer that does not fit the model: `check_tokenizer`)
    is one ModelError line naming the model `name`, not a traceback."""
    try:
        yield
    except UserError:
        raise
    except (OSError, ValueError, SafetensorError, StrictDataclassError) as e:  # SafetensorError: a weight file
        # that is not safetensors; StrictDataclassError: a config.json value ElmoConfig refuses
        raise ModelError(f"{name}: cannot load it: {first_line(e)}", name) from None
    except RuntimeError as e:
        if "mismatched_sizes" not in str(e) and "size mismatch" not in str(e):
            raise
        raise ModelError(f"{name}: cannot load it: its config.json does not fit its weights (the tensor shapes "
                         "differ, as listed above): restore the config.json saved with these weights", name) from None


def load_config(folder, name=None):
    """The config of the resolved model `folder` (`resolve_model`), read once before any work: a value the config
    refuses (a dtype torch lacks, a negative size) is one ModelError line naming `name` (default: the folder)."""
    from transformers import AutoConfig

    with loading(name or folder):
        return AutoConfig.from_pretrained(folder)


@dataclass(frozen=True)
class ModelFolder:
    """A resolved model: `path`, its folder; `name`, how the user named it (what errors say); `config`, its
    config.json as plain JSON (read before torch or transformers load)."""

    name: str
    path: str
    config: dict

    @property
    def is_export(self):
        """Whether `export onnx` wrote it: a graph and no PyTorch weights."""
        from .model_files import is_onnx_export

        return is_onnx_export(self.path)

    @property
    def is_language_model(self):
        """Whether it has a language-model softmax (lm_vocab_size), which an export never carries."""
        return self.config.get("lm_vocab_size") is not None and not self.is_export


def open_model(name):
    """`name` (a folder or Hub repo id, or a ModelFolder) found and checked as a ModelFolder, its config.json read
    once for every later step: `name` itself when it is a folder, else the cached snapshot of the Hub repo `name`
    (downloaded first when the Hub is reachable); its config.json must be an ELMo one (`check_elmo_folder`).
    Raises ModelError in one line otherwise."""
    if isinstance(name, ModelFolder):
        return name
    given = str(os.fspath(name))
    name = shipped_model(given)

    def opened(folder):
        return ModelFolder(given, folder, check_elmo_folder(folder, name))

    if os.path.isdir(name):
        return opened(name)
    if os.path.exists(name):
        raise ModelError(f"{name} is a file: {GIVE}", name)
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ModelError(f"{name}: no such folder, and not a Hub repo id (NAME or OWNER/NAME)", name) from None
    try:
        return opened(snapshot_download(name, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    if constants.HF_HUB_OFFLINE:
        raise ModelError(f"{name}: no such folder, and the Hub repo is not in the local cache (HF_HUB_OFFLINE is "
                         "set): give a local folder, or download it while online", name)
    try:
        HfApi().model_info(name)  # one request: a missing repo or no network answers at once, without retries
    except (RepositoryNotFoundError, GatedRepoError) as e:
        raise ModelError(f"{name}: no such folder, and the Hub has no model {name} that this token may read "
                         f"({type(e).__name__}): check the name, or log in with `hf auth login`", name) from None
    except Exception as e:  # noqa: BLE001  (no network, proxy, TLS...: every cause reads the same to the user)
        raise ModelError(f"{name}: no such folder, and the Hub cannot be reached ({first_line(e)}): give a local "
                         "folder", name) from None
    with loading(name):
        return opened(snapshot_download(name))


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
        return _load_export(source.path, source.name, dtype, device, source.config)
    if runtime == "onnxruntime":
        if language_model:
            raise UserError("{runtime} onnxruntime runs the biLM, not the language model's softmax: leave the "
                            "runtime out", "onnxruntime", arguments=["runtime"])
        from .runtime.cache import cached_export

        return _load_export(cached_export(source, dtype or "float32"), source.name, dtype, device)
    return _load_torch(source, language_model, dtype, quantization_config, device)


def _load_export(folder, name, dtype, device, config=None):
    from tokenization_elmo import ElmoTokenizer

    from .runtime.onnx import OnnxElmoModel

    model = OnnxElmoModel(folder, dtype, device, config)
    with loading(name):
        tokenizer = ElmoTokenizer.from_pretrained(folder)
        check_tokenizer(model.config, tokenizer)
    return model, tokenizer


def _load_torch(source, language_model, dtype, quantization_config, device):
    import torch

    from configuration_elmo import ElmoConfig
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
        config = ElmoConfig.from_dict(source.config)  # config.json as open_model read it: not parsed a second time
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
