"""A model folder, read in one place: `open_model` finds a model (a local folder, the shipped model's names, or a Hub
repo id that is in the local cache or on a reachable Hub), checks that it holds an ELMo config.json and readable JSON
files, and reads config.json once into the `ModelFolder` that every later step is given: the loader
(`model_source.load_model`), the ONNX runner, the export cache, the card writers, push, the page and training. What a
folder is (PyTorch weights or an exported graph; a biLM or a language model), what it is called, its config and the
hash of the files its numbers depend on are answered here and nowhere else. A name that is none of these is one line
(`ModelError`) at once, instead of transformers' offline retries, a traceback, or another architecture's weights run
as ELMo.

Imports neither torch nor transformers: an exported folder is opened in a process without them."""

import contextlib
import functools
import glob
import hashlib
import json
import os
from dataclasses import dataclass

from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub.errors import (GatedRepoError, HFValidationError, LocalEntryNotFoundError,
                                    RepositoryNotFoundError, StrictDataclassError)
from huggingface_hub.utils import validate_repo_id
from safetensors import SafetensorError

from .errors import ModelError, UserError, first_line
from .model_files import is_onnx_export, result_files
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


@contextlib.contextmanager
def loading(name):
    """Around the steps that read a model's files (a download, `from_pretrained`): a folder that cannot be loaded (a
    config.json that holds a bad value or does not fit the weights, missing weights, a tokenizer that does not fit
    the model: `model_source.check_tokenizer`) is one ModelError line naming the model `name`, not a traceback."""
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


def files_sha256(paths):
    """SHA-256 over the name, size and bytes of each file at `paths`, in order."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{os.path.basename(path)} {os.path.getsize(path)}\n".encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class ModelFolder:
    """A found and checked model: `path`, its folder; `name`, how the user named it (what errors say); `config`,
    its config.json as plain JSON (read once, before torch or transformers load)."""

    name: str
    path: str
    config: dict

    @functools.cached_property
    def is_export(self):
        """Whether `export onnx` wrote it: a graph and no PyTorch weights."""
        return is_onnx_export(self.path)

    @property
    def is_language_model(self):
        """Whether it has a language-model softmax (lm_vocab_size), which an export never carries."""
        return self.config.get("lm_vocab_size") is not None and not self.is_export

    @property
    def title(self):
        """What pages and cards call the model: its model card's title (README.md's first `# ` heading: a Space
        holds the model as `model/`), else the name of the folder given, or the Hub repo id given."""
        try:
            with open(os.path.join(self.path, "README.md"), encoding="utf-8") as f:
                for line in f:
                    if line.startswith("# "):
                        return line[2:].strip()
        except (OSError, UnicodeDecodeError):
            pass
        if not os.path.isdir(shipped_model(self.name)):  # a Hub snapshot: its folder is named by a commit hash
            return self.name
        return os.path.basename(os.path.normpath(os.path.abspath(self.path)))  # (a name for `.` too)

    def fingerprint(self):
        """SHA-256 of every file the model's numbers depend on (`model_files.result_files`: config.json, each weight
        file the loader reads, the graph, the tokenizer's files with its segmenter and conversion settings): what
        keys a cache or a resumed run of this model."""
        return files_sha256(result_files(self.path))

    def elmo_config(self, **updates):
        """This folder's `ElmoConfig` with `updates` (as `from_pretrained(folder, **updates)` makes it), from the
        config.json read at `open_model`: not parsed a second time. A value it refuses raises huggingface_hub's
        StrictDataclassError (`loading` makes it one line)."""
        from configuration_elmo import ElmoConfig

        return ElmoConfig.from_dict(self.config, **updates)


def open_model(name, local=False):
    """`name` (a folder or Hub repo id, or a ModelFolder) found and checked as a ModelFolder, its config.json read
    once for every later step: `name` itself when it is a folder, else the cached snapshot of the Hub repo `name`
    (downloaded first when the Hub is reachable; `local`: only a folder is taken); its config.json must be an ELMo
    one (`check_elmo_folder`). Raises ModelError in one line otherwise."""
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
    if local:
        raise ModelError(f"{name} is not a folder: give a saved ELMo folder, or `default` for the shipped model", name)
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


def resolve_model(name):
    """The folder holding `name`'s files (`open_model`'s path): `name` itself when it is a folder, else the cached
    snapshot of the Hub repo `name`. Raises ModelError in one line when it is not an ELMo model."""
    return open_model(name).path
