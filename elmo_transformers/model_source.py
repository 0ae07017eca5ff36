"""Where a command's model comes from, checked before anything loads: a local folder, or a Hub repo id that is in
the local cache or on a reachable Hub. A name that is neither is one line (`ModelError`) at once, instead of
transformers' offline retries and a traceback. `content_id` names the weights a run used (embed --resume compares
it), from their bytes or the Hub commit, never from a path or a time stamp."""

import contextlib
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


@contextlib.contextmanager
def loading(name, option="--model"):
    """Around a command's `from_pretrained` calls: a folder that cannot be loaded (a config.json that is not JSON or
    holds a bad value, missing or mismatched weights) is one ModelError line naming `option`, not a traceback."""
    try:
        yield
    except UserError:
        raise
    except (OSError, ValueError, SafetensorError) as e:  # SafetensorError: a weight file that is not safetensors
        raise ModelError(f"{option} {name}: cannot load it: {first_line(e)}") from None


def load_config(name, option="--model"):
    """The config of the model `name` (resolved first), read before any work: a config.json that is not JSON or
    holds a value the config refuses (a dtype torch lacks, a negative size) is one ModelError line."""
    from transformers import AutoConfig

    folder = resolve_model(name, option)
    with loading(name, option):
        return AutoConfig.from_pretrained(folder)
