"""Where a command's model comes from, checked before anything loads: a local folder, or a Hub repo id that is in
the local cache or on a reachable Hub, holding an ELMo config.json. A name that is none of these is one line
(`ModelError`) at once, instead of transformers' offline retries, a traceback, or another architecture's weights
run as ELMo. A command resolves its model once (`resolve_model`) and passes the folder down."""

import contextlib
import glob
import json
import os

from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub.errors import (GatedRepoError, HFValidationError, LocalEntryNotFoundError,
                                    RepositoryNotFoundError)
from huggingface_hub.utils import validate_repo_id
from safetensors import SafetensorError

from .errors import ModelError, UserError, first_line
from .models import DEFAULT_MODEL, DEFAULT_MODEL_NAMES

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
    """The folder holding `name`'s files: `name` itself when it is a folder, else the cached snapshot of the Hub
    repo `name` (downloaded first when the Hub is reachable); its config.json must be an ELMo one
    (`check_elmo_folder`). Raises ModelError in one line otherwise."""
    name = shipped_model(os.fspath(name))
    if os.path.isdir(name):
        return check_elmo_folder(name, name)
    if os.path.exists(name):
        raise ModelError(f"{name} is a file: {GIVE}", name)
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ModelError(f"{name}: no such folder, and not a Hub repo id (NAME or OWNER/NAME)", name) from None
    try:
        return check_elmo_folder(snapshot_download(name, local_files_only=True), name)
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
        return check_elmo_folder(snapshot_download(name), name)


def shipped_model(name):
    """The shipped model's folder for one of its names (`default`, `elmo-en-small`) where no such path exists, else
    `name` as given."""
    return DEFAULT_MODEL if name in DEFAULT_MODEL_NAMES and not os.path.exists(name) else name


def check_elmo_folder(folder, name):
    """`folder` (the files of model `name`) when its config.json is a JSON object of model_type "elmo" and its other
    JSON files are JSON objects; else one ModelError line naming the file. Read as plain JSON, before transformers is
    imported: a BERT folder is refused at once, not loaded into ELMo's classes, and a cut tokenizer_config.json is
    named (transformers gives a bare JSON message or a traceback)."""
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
    return folder


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
    except (OSError, ValueError, SafetensorError) as e:  # SafetensorError: a weight file that is not safetensors
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
