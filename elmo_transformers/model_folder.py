"""A model folder, read in one place: `open_model` finds a model (a local folder, the shipped model's names, or a Hub
repo id that is in the local cache or on a reachable Hub), checks that it holds an ELMo config.json and readable JSON
files, and reads those once into the `ModelFolder` that every later step is given: the loader
(`model_source.load_model`, the one way a model loads), the export cache, the card writers, push, the page and
training. What a folder is (PyTorch weights or an exported graph; a biLM or a language model), what it is called, its
config, its identity (`identity`, `fingerprint`) and its files (weights, tokenizer, results) are answered here and
nowhere else. A name that is none of these is one line (`ModelError`) at once, instead of transformers' offline
retries, a traceback, or another architecture's weights run as ELMo.

Imports neither torch nor transformers (an exported folder is opened in a process without them): the methods that
load weights import torch when called."""

import contextlib
import functools
import glob
import hashlib
import json
import os
import pickle
import re
import stat
from dataclasses import dataclass

from huggingface_hub.errors import StrictDataclassError
from safetensors import SafetensorError

from .errors import ModelError, UserError, first_line
from .model_files import GRAPH_FILES, is_onnx_export
from .models import DEFAULT_MODEL, DEFAULT_MODEL_NAMES

GIVE = "give a converted or trained ELMo folder, or the Hub repo id of one"
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")  # what weights may be saved in
# safetensors' names of dtypes -> torch's
SAFETENSORS_DTYPES = {
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "I8": "int8",
    "U8": "uint8",
    "I16": "int16",
    "I32": "int32",
    "I64": "int64",
    "BOOL": "bool",
}


def check_hub_id(value):
    """Refuse, in one line, a value that is not a Hub repo id (NAME or OWNER/NAME, huggingface_hub's rule): the
    repo to push to, or a repo named in a model card's metadata and links."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

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
    """The JSON files of `folder` (the files of model `name`), {file name: its object}, when config.json is a JSON
    object of model_type "elmo" and the other JSON files are JSON objects; else one ModelError line naming the file.
    Read as plain JSON, before transformers is imported: a BERT folder is refused at once, not loaded into ELMo's
    classes, and a cut tokenizer_config.json is named (transformers gives a bare JSON message or a traceback)."""
    path = os.path.join(folder, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        raise ModelError(f"{name} has no config.json: {GIVE}", name) from None
    except (OSError, ValueError, RecursionError) as e:  # not UTF-8, not JSON, too deep
        raise ModelError(
            f"{name}: its config.json cannot be read as JSON ({first_line(e)}): restore it, or convert the model again",
            name,
        ) from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != "elmo":
        raise ModelError(
            f"{name} is not an ELMo model: its config.json has model_type {model_type!r}, not 'elmo'; {GIVE}", name
        )
    documents = {"config.json": config}
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
                documents[os.path.basename(path)] = value
                continue
            problem = f"holds a JSON {type(value).__name__}, not an object"
        raise ModelError(
            f"{name}: {path} {problem}: the folder is damaged (a cut download or copy?); restore that file", name
        )
    return documents


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
        raise ModelError(
            f"{name}: cannot load it: its config.json does not fit its weights ({shape_differences(e)}): "
            "restore the config.json saved with these weights",
            name,
        ) from None


# torch's load_state_dict lists each tensor whose shape differs as one such line
SIZE_MISMATCH = re.compile(
    r"size mismatch for (\S+): copying a param with shape torch\.Size\((\[[^]]*\])\) from "
    r"checkpoint, the shape in current model is torch\.Size\((\[[^]]*\])\)"
)


def shape_differences(error):
    """The tensors whose shapes differ, as `error` (torch's load_state_dict error) lists them, the first three in
    words; transformers' own error lists none (its load report, printed above it, does)."""
    found = SIZE_MISMATCH.findall(str(error))
    if not found:
        return "the tensor shapes differ, as listed above"
    shown = "; ".join(f"{name} is {saved} in the weights, {wanted} by the config" for name, saved, wanted in found[:3])
    return f"the tensor shapes differ: {shown}" + (f"; and {len(found) - 3} more" if len(found) > 3 else "")


def files_sha256(paths):
    """SHA-256 over the name, size and bytes of each file at `paths`, in order."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{os.path.basename(path)} {os.path.getsize(path)}\n".encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


def package_version(name):
    """The installed version of the distribution `name`, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class ModelFolder:
    """A found and checked model: `path`, its folder; `name`, how the user named it (what errors say); `documents`,
    its JSON files as plain JSON ({file name: object}, read once, before torch or transformers load)."""

    name: str
    path: str
    documents: dict

    @property
    def config(self):
        """config.json, as a dict."""
        return self.documents["config.json"]

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
            with open(self.file("README.md"), encoding="utf-8") as f:
                for line in f:
                    if line.startswith("# "):
                        return line[2:].strip()
        except (OSError, UnicodeDecodeError):
            pass
        if not os.path.isdir(shipped_model(self.name)):  # a Hub snapshot: its folder is named by a commit hash
            return self.name
        return os.path.basename(os.path.normpath(os.path.abspath(self.path)))  # (a name for `.` too)

    @property
    def source(self):
        """What a record of a run calls the model (`embed`'s run.json): the absolute path of a folder given by its
        path, else the name given (a Hub repo id, one of the shipped model's names)."""
        return os.path.abspath(self.path) if os.path.isdir(self.name) else self.name

    def card_metadata(self, remedy="fix it"):
        """The metadata of the folder's model card (README.md's YAML header), {} without a card; a header that cannot
        be read is one UserError line (`remedy`: what else to do)."""
        path = self.file("README.md")
        if not os.path.isfile(path):
            return {}
        from huggingface_hub import ModelCard

        try:
            return ModelCard.load(path).data.to_dict()
        except Exception as e:  # noqa: BLE001  (huggingface_hub reports bad YAML with several error types)
            raise UserError(
                f"{path}: its metadata cannot be read ({first_line(e)}): fix the model card's header, or {remedy}", path
            ) from None

    def licence(self):
        """The card licence of a folder whose weights came with the licences of what they were trained on
        (configuration_elmo.LICENCE_FILE, which `save_pretrained` carries into every model derived from them): the
        Hub's `license: other` fields, named by the file's first heading; None without the file."""
        from configuration_elmo import LICENCE_FILE

        try:
            with open(self.file(LICENCE_FILE), encoding="utf-8") as f:
                heading = next((line[2:] for line in f if line.startswith("# ")), "")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise ModelError(f"{self.file(LICENCE_FILE)} cannot be read ({e}): restore it", self.name) from None
        name = "-".join(re.findall(r"[a-z0-9]+(?:[._][a-z0-9]+)*", heading.lower())) or "see-license-file"
        return {"license": "other", "license_name": name, "license_link": LICENCE_FILE}

    def file(self, name):
        """The path of the folder's file `name`."""
        return os.path.join(self.path, name)

    def options(self):
        """config.json's ELMo fields (`options_elmo.ElmoOptions`: checked, without transformers). A value it refuses
        raises huggingface_hub's StrictDataclassError (`loading` makes it one line)."""
        from options_elmo import ElmoOptions

        return ElmoOptions.from_config_json(self.config)

    def elmo_config(self, **updates):
        """This folder's `ElmoConfig` with `updates` (as `from_pretrained(folder, **updates)` makes it), from the
        config.json read at `open_model`: not parsed a second time. A value it refuses raises huggingface_hub's
        StrictDataclassError (`loading` makes it one line)."""
        from configuration_elmo import ElmoConfig

        return ElmoConfig.from_dict(self.config, **updates)

    @property
    def tokenizer_settings(self):
        """tokenizer_config.json with special_tokens_map.json's tokens, as transformers reads them."""
        return {**self.documents.get("special_tokens_map.json", {}), **self.documents.get("tokenizer_config.json", {})}

    def basic_tokenizer(self):
        """The tokenizer's rules without transformers (`basic_tokenization_elmo.ElmoBasicTokenizer`): what inference
        and an exported model read words with."""
        from basic_tokenization_elmo import VOCABULARY_FILES, ElmoBasicTokenizer

        files = {
            argument: self.file(name) for argument, name in VOCABULARY_FILES.items() if os.path.isfile(self.file(name))
        }
        return ElmoBasicTokenizer.from_settings(self.tokenizer_settings, **files)

    def tokenizer(self):
        """transformers' `ElmoTokenizer` of the folder (training, pipelines)."""
        from tokenization_elmo import ElmoTokenizer

        return ElmoTokenizer.from_pretrained(self.path)

    def pretrained(self, model_class, config, **kwargs):
        """`model_class.from_pretrained` of the folder with `config` (an ElmoConfig): the model and its loading info.
        transformers' "Loading weights" bar is not shown: a folder of ELMo's loads in a moment, and a command's output
        is its own. Its weight files are checked first (`check_weights`), and the loaded weights after
        (`check_finite`)."""
        from transformers.utils import logging

        self.check_weights()
        enabled = logging.is_progress_bar_enabled()
        logging.disable_progress_bar()
        try:
            model, info = model_class.from_pretrained(self.path, config=config, output_loading_info=True, **kwargs)
        finally:
            if enabled:
                logging.enable_progress_bar()
        self.check_finite(model.state_dict())
        return model, info

    def weight_files(self):
        """The paths of the files the model's weights are read from: the shards model.safetensors.index.json names,
        or model.safetensors; else PyTorch's pickles (pytorch_model.bin, or its index's shards); else the graph of an
        export. Each is a file of the folder (`member`). Raises ModelError for an index that is not one."""
        for index, single in [
            ("model.safetensors.index.json", "model.safetensors"),
            ("pytorch_model.bin.index.json", "pytorch_model.bin"),
        ]:
            if index in self.documents:
                shards = self.documents[index].get("weight_map")
                if not isinstance(shards, dict) or not all(isinstance(name, str) for name in shards.values()):
                    raise ModelError(
                        f"{self.name}: its {index} is not a weight index (a JSON weight_map): restore it", self.name
                    )
                named = f"its {index} names the weight file"
                return [self.member(name, named) for name in sorted(set(shards.values()))]
            if os.path.lexists(self.file(single)):
                return [self.member(single, "its weight file")]
        return [self.member(name, "its graph file") for name in GRAPH_FILES if os.path.lexists(self.file(name))]

    def member(self, name, named):
        """The path of the folder's file `name` (`named`: how an error names it, "its weight file"), refused in one
        ModelError line unless it is in the folder: a relative path without `..`, not a link to a place outside (a
        Hub snapshot's links into its repo's blobs/ are its files), and a regular file, not a device, pipe or folder
        (whose reading never ends). A missing file passes: its reader names it."""
        parts = re.split(r"[/\\]", name)
        if os.path.isabs(name) or ".." in parts or not name:
            raise ModelError(
                f"{self.name}: {named} {name!r}, which is not a file of the folder (an absolute path or "
                "`..`): a model folder's files must be in it; move the file into the folder and name it "
                "by its path there",
                self.name,
            )
        path = self.file(name)
        target = os.path.realpath(path)
        if not any(target.startswith(root + os.sep) for root in self.file_roots()):
            raise ModelError(
                f"{self.name}: {named} {name}, a link to {target}, outside the folder: replace the link "
                "by a copy of the file",
                self.name,
            )
        try:
            mode = os.stat(target).st_mode
        except FileNotFoundError:
            return path
        if not stat.S_ISREG(mode):
            raise ModelError(
                f"{self.name}: {named} {name}, which is not a regular file (a device, pipe or folder): "
                "restore the file saved with the model",
                self.name,
            )
        return path

    def file_roots(self):
        """Where the folder's files may be (after links are followed): the folder, and for a snapshot in the Hugging
        Face cache (REPO/snapshots/COMMIT) the repo's blobs/, where its files are."""
        folder = os.path.realpath(self.path)
        repo, snapshots = os.path.split(os.path.dirname(folder))
        return [folder, *([os.path.join(repo, "blobs")] if snapshots == "snapshots" else [])]

    def check_weights(self):
        """Raise ModelError naming a safetensors weight file whose header does not parse (a cut or foreign file), or
        a tensor saved in a dtype other than a float one (`check_float`; a pickle is read whole for this:
        `read_weights`)."""
        for path in self.weight_files():
            if path.endswith(".safetensors"):
                self.check_safetensors(path)
            elif path.endswith(".bin"):
                self.read_weights(path)

    def check_safetensors(self, path):
        """Refuse the safetensors file `path` whose header does not parse, or that holds other than float tensors
        (`check_float`), reading only its header."""
        from safetensors import safe_open

        try:
            with safe_open(path, framework="numpy") as f:
                dtypes = {key: f.get_slice(key).get_dtype() for key in f.keys()}
        except Exception:  # noqa: BLE001 - safetensors reports a bad header with its own error type
            raise ModelError(
                f"{path} is not a safetensors file (its header does not parse): save the model again", self.name
            ) from None
        self.check_float(path, {key: SAFETENSORS_DTYPES.get(dtype, dtype) for key, dtype in dtypes.items()})

    def check_float(self, path, dtypes):
        """Refuse, in one line naming the tensor, weights of the file `path` ({name: dtype name}) saved in another
        dtype than float16, bfloat16, float32 or float64: casting them would run other numbers than were saved."""
        for key, dtype in dtypes.items():
            if dtype not in FLOAT_DTYPES:
                raise ModelError(
                    f"{self.name}: its weight {key} in {os.path.basename(path)} is saved as {dtype}, not "
                    "a float dtype (float32, bfloat16, float16): weights are floats; save the model again "
                    "from its float weights",
                    self.name,
                )

    def check_finite(self, tensors, path=None):
        """Refuse, in one line naming the first, float weights ({name: tensor}; of the file `path`) that hold NaN or
        infinite values: the model would give NaN vectors for every word."""
        bad = [key for key, tensor in tensors.items() if tensor.is_floating_point() and not finite(tensor)]
        if bad:
            where = f" in {os.path.basename(path)}" if path else ""
            more = f" (and {len(bad) - 1} more weights)" if len(bad) > 1 else ""
            raise ModelError(
                f"{self.name}: its weight {bad[0]}{where} holds NaN or infinite values{more}: the model "
                "would give NaN vectors for every word (a training that diverged, or a damaged file); "
                "restore weights saved before",
                self.name,
            )

    def results(self, name):
        """The metrics Trainer wrote into the folder's results file `name` (eval_results.json...), or None."""
        return self.documents.get(name)

    def state_dict(self):
        """The weights of a PyTorch folder, {name: tensor} as saved: its safetensors files (one, or the shards its
        index lists), else PyTorch's pickles, each read and checked by `read_weights`."""
        files = self.weight_files()
        if not files:
            raise OSError(
                f"it holds no weights (no model.safetensors in {self.path}): restore the weight files saved "
                "with its config.json"
            )
        weights = {}
        for path in files:
            if path.endswith((".safetensors", ".bin")):
                weights.update(self.read_weights(path))
        return weights

    def read_weights(self, path):
        """The tensors of the weight file `path` (safetensors, or PyTorch's pickle read with `weights_only`, so that
        nothing in it runs), {name: tensor}, checked: floats (`check_float`), finite (`check_finite`). A pickle that
        holds more than tensors is one ModelError line saying how to convert it."""
        import torch
        from safetensors.torch import load_file

        name = os.path.basename(path)
        if path.endswith(".safetensors"):
            self.check_safetensors(path)
            tensors = load_file(path)
        else:
            try:
                tensors = torch.load(path, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError:
                raise ModelError(
                    f"{self.name}: its weights are only in a PyTorch pickle ({name}) that holds more than "
                    "tensors, so it was not read (nothing in it ran): convert the weights to "
                    "model.safetensors where the file is trusted (docs/troubleshooting.md)",
                    self.name,
                ) from None
            except RuntimeError as e:  # not a zip of PyTorch's (cut, or another file)
                raise ModelError(
                    f"{self.name}: its weight file {name} cannot be read as PyTorch's ({first_line(e)}): restore it",
                    self.name,
                ) from None
            if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
                raise ModelError(
                    f"{self.name}: its weight file {name} holds no dict of tensors: restore the weights "
                    "saved with the model",
                    self.name,
                )
            self.check_float(path, {key: str(t.dtype).removeprefix("torch.") for key, t in tensors.items()})
        self.check_finite(tensors, path)
        return tensors

    def identity(self, dtype):
        """What decides the numbers this model computes in `dtype`: for an exported graph its runtime; the dtype; a
        SHA-256 of its weight files (the graph's, for an export); the config's fields that decide the numbers
        (`options_elmo.NUMBERS_FIELDS`); the tokenizer's rules, its vocabularies and the versions of the packages that
        segment its text. The order says what a comparison names first: the dtype before the weights, and the weights
        before the config (another model at the same path is named by its weights, not by a config field it happens
        to differ in)."""
        tokenizer = self.basic_tokenizer()
        vocabularies = [self.file(name) for name in ("char.dic", "word.dic") if os.path.isfile(self.file(name))]
        return {
            **({"runtime": "onnxruntime"} if self.is_export else {}),
            "dtype": dtype,
            "weights_sha256": files_sha256(self.weight_files()),
            "config": self.options().numbers_fields(),
            "tokenizer": {
                **tokenizer.settings(),
                "vocabularies_sha256": files_sha256(vocabularies),
                "packages": {name: package_version(name) for name in tokenizer.segmenter.packages()},
            },
        }

    def fingerprint(self, dtype):
        """SHA-256 of `identity(dtype)`: what keys the export cache and identifies the model in a resumed run."""
        return hashlib.sha256(json.dumps(self.identity(dtype), sort_keys=True).encode()).hexdigest()


def finite(tensor):
    """Whether a float tensor holds no NaN or infinite value: its smallest and largest values (NaN comes out of
    both) are finite; one pass that allocates nothing, where `isfinite().all()` writes a mask of the whole tensor."""
    if not tensor.numel():
        return True
    smallest, largest = tensor.aminmax()
    return bool(smallest.isfinite() and largest.isfinite())


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
    return opened(hub_snapshot(name))


def hub_snapshot(name):
    """The folder of the Hub repo `name`'s snapshot in the local cache, downloaded first when the Hub is reachable;
    one ModelError line when there is none. (huggingface_hub's client is imported here, for a Hub name only.)"""
    from huggingface_hub import HfApi, constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ModelError(f"{name}: no such folder, and not a Hub repo id (NAME or OWNER/NAME)", name) from None
    try:
        return snapshot_download(name, local_files_only=True)
    except LocalEntryNotFoundError:
        pass
    if constants.HF_HUB_OFFLINE:
        raise ModelError(
            f"{name}: no such folder, and the Hub repo is not in the local cache (HF_HUB_OFFLINE is "
            "set): give a local folder, or download it while online",
            name,
        )
    try:
        HfApi().model_info(name)  # one request: a missing repo or no network answers at once, without retries
    except (RepositoryNotFoundError, GatedRepoError) as e:
        raise ModelError(
            f"{name}: no such folder, and the Hub has no model {name} that this token may read "
            f"({type(e).__name__}): check the name, or log in with `hf auth login`",
            name,
        ) from None
    except Exception as e:  # noqa: BLE001  (no network, proxy, TLS...: every cause reads the same to the user)
        raise ModelError(
            f"{name}: no such folder, and the Hub cannot be reached ({first_line(e)}): give a local folder", name
        ) from None
    with loading(name):
        return snapshot_download(name)
