"""Where a command's model comes from, checked before anything loads: a local folder, or a Hub repo id that is in
the local cache or on a reachable Hub. A name that is neither is one line (`ModelError`) at once, instead of
transformers' offline retries and a traceback. `content_id` names the weights a run used (embed --resume compares
it), from their bytes or the Hub commit, never from a path or a time stamp."""

import contextlib
import json
import os

from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub.errors import (GatedRepoError, HFValidationError, LocalEntryNotFoundError,
                                    RepositoryNotFoundError)
from huggingface_hub.utils import validate_repo_id
from safetensors import SafetensorError

from .errors import ModelError, UserError, first_line


def check_hub_id(value, what):
    """Refuse, in one line, a `what` (the repo to push to, --base-model) that is not a Hub repo id (NAME or
    OWNER/NAME, huggingface_hub's rule): it goes into the card's metadata and links."""
    try:
        validate_repo_id(value)
    except HFValidationError as e:
        raise UserError(f"{what} {value!r:.200} is not a Hub repo id: {first_line(e)}") from None
    return value


def resolve_model(name, option="--model"):
    """The folder holding `name`'s files: `name` itself when it is a folder, else the cached snapshot of the Hub
    repo `name` (downloaded first when the Hub is reachable). Raises ModelError in one line otherwise."""
    name = os.fspath(name)
    if os.path.isdir(name):
        return name
    if os.path.exists(name):
        raise ModelError(f"{option} {name} is a file: give a model folder (with config.json) or a Hub repo id")
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ModelError(f"{option} {name}: no such folder, and not a Hub repo id (NAME or OWNER/NAME)") from None
    try:
        return snapshot_download(name, local_files_only=True)
    except LocalEntryNotFoundError:
        pass
    if constants.HF_HUB_OFFLINE:
        raise ModelError(f"{option} {name}: no such folder, and the Hub repo is not in the local cache "
                         "(HF_HUB_OFFLINE is set): give a local folder, or download it while online")
    try:
        HfApi().model_info(name)  # one request: a missing repo or no network answers at once, without retries
    except (RepositoryNotFoundError, GatedRepoError) as e:
        raise ModelError(f"{option} {name}: no such folder, and the Hub has no model {name} that this token may "
                         f"read ({type(e).__name__}): check the name, or log in with `hf auth login`") from None
    except Exception as e:  # noqa: BLE001  (no network, proxy, TLS...: every cause reads the same to the user)
        raise ModelError(f"{option} {name}: no such folder, and the Hub cannot be reached "
                         f"({first_line(e)}): give a local folder") from None
    return snapshot_download(name)


def check_json_files(folder, name, option="--model"):
    """Raise ModelError naming the file if one of the model's JSON files in `folder` is cut or is not a JSON object:
    transformers names config.json, but tokenizer_config.json gives a bare JSON message or a traceback."""
    from .model_files import MODEL_FILES  # here: it imports the model's code (torch), which --help must not wait for

    for file in (name for name in MODEL_FILES if name.endswith(".json")):
        path = os.path.join(folder, file)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                value = json.load(f)
        except ValueError as e:  # not JSON, not UTF-8
            problem = f"is not valid JSON ({first_line(e)})"
        else:
            if isinstance(value, dict):
                continue
            problem = f"holds a JSON {type(value).__name__}, not an object"
        raise ModelError(f"{option} {name}: {path} {problem}: the folder is damaged (a cut download or copy?); "
                         "restore that file")


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
def loading(name, option="--model"):
    """Around a command's `from_pretrained` calls: a folder that cannot be loaded (a JSON file that is cut or not
    JSON, a config.json that holds a bad value or does not fit the weights, missing weights, a tokenizer that does
    not fit the model: `check_tokenizer`) is one ModelError line naming `option`, not a traceback."""
    check_json_files(resolve_model(name, option), name, option)  # resolved before: the folder, at once
    try:
        yield
    except UserError:
        raise
    except (OSError, ValueError, SafetensorError) as e:  # SafetensorError: a weight file that is not safetensors
        raise ModelError(f"{option} {name}: cannot load it: {first_line(e)}") from None
    except RuntimeError as e:
        if "mismatched_sizes" not in str(e) and "size mismatch" not in str(e):
            raise
        raise ModelError(f"{option} {name}: cannot load it: its config.json does not fit its weights (the tensor "
                         "shapes differ, as listed above): restore the config.json saved with these weights") from None


def load_config(name, option="--model"):
    """The config of the model `name` (resolved first), read before any work: a config.json that is not JSON or
    holds a value the config refuses (a dtype torch lacks, a negative size) is one ModelError line."""
    from transformers import AutoConfig

    folder = resolve_model(name, option)
    with loading(name, option):
        return AutoConfig.from_pretrained(folder)
