"""Upload an ELMo folder (converted, trained or fine-tuned) to the Hugging Face Hub, with a model card.

    elmo-transformers push DIR REPO_ID [--private] [--dry-run [--staging-dir FOLDER]]

1. Builds the upload folder from an allow-list of what a model repo needs (model_files.py: config, weights,
   tokenizer files, the code modules, README.md); of the weights only those the model loads (model.safetensors, or
   the shards its index names), each of which must parse as safetensors; never a hidden file. Anything else in DIR
   (Trainer's training_args.bin, which can hold a token, trainer_state.json, *_results.json, optimizer states,
   checkpoint-*/ and runs/ folders...) is left out and listed in one line. Only regular files inside DIR go: a
   symbolic link leaving DIR is refused by name (except a code module linked to this installation's own copy, as in
   the shipped default model). README.md is the model card from model_card.py (DIR's own README.md, if any, is kept
   instead). The repo id (and --base-model) must be Hub repo ids, checked first, also under --dry-run.
2. Checks that folder in a fresh, isolated Python process (`python -I`, another working directory, offline): with
   `trust_remote_code=True` and its own code files, the Auto class of its architecture must load it and its
   pipeline must run on a sentence (fill-mask, for a language model: one with a `<mask>` word). A failure names
   the step that failed.
3. Creates the repo (if needed) and uploads the folder in one commit. The token comes from the HF_TOKEN variable or
   `hf auth login`. `--dry-run` stops before this step and keeps the folder for inspection; otherwise, and after any
   failure, the temporary folder push made is removed (a --staging-dir is the user's and stays).
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

from huggingface_hub import HfApi
from safetensors import safe_open

from configuration_elmo import ELMO_MODULES

from ..errors import ModelError, UserError
from .model_card import architecture, model_card
from ..model_files import is_model_file

# Run in the fresh process: the architecture's Auto class and the pipeline, from the folder's own code files. Each
# step names itself when it fails, so that a failing pipeline run is not reported as a folder that does not load.
LOAD_CHECK = """
import sys
import torch
import transformers
from transformers import AutoTokenizer, pipeline

folder, name, auto_class, task = sys.argv[1:5]


def step(what, run):
    try:
        return run()
    except Exception as e:
        sys.exit(f"{what} failed: {type(e).__name__}: {e}")


tokenizer = step("loading the tokenizer (AutoTokenizer)",
                 lambda: AutoTokenizer.from_pretrained(folder, trust_remote_code=True))
model = step(f"loading the model ({auto_class})",
             lambda: getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval())
if not type(model).__module__.startswith("transformers_modules"):
    sys.exit(f"the model class came from {type(model).__module__}, not from the folder's code files")
if type(model).__name__ != name:
    sys.exit(f"{auto_class} loaded {type(model).__name__}, but config.architectures says {name}")
with torch.no_grad():
    step(f"running {name} on a sentence", lambda: model(**tokenizer(["Hello world !"], return_tensors="pt")))
pipe = step(f"loading the {task} pipeline", lambda: pipeline(task, model=folder, trust_remote_code=True))
text = f"Hello {tokenizer.mask_token} !" if task == "fill-mask" else "Hello world !"
result = step(f"running the {task} pipeline on {text!r}", lambda: pipe(text))
if task == "feature-extraction" and [len(result), len(result[0])] != [1, 3]:
    sys.exit(f"feature extraction gave {len(result[0])} vectors for 3 words")
print(f"loads: {name} ({auto_class}), {model.num_parameters():,} parameters; {task} pipeline: {type(pipe).__name__}")
"""

def installed_module(name):
    """The real path of this installation's own module file `name` (e.g. modeling_elmo.py), or None."""
    module = name.removesuffix(".py")
    spec = importlib.util.find_spec(module) if name.endswith(".py") and module in ELMO_MODULES else None
    return os.path.realpath(spec.origin) if spec is not None and spec.origin else None


def weight_files(model_dir):
    """The weight files the folder's model loads (what `from_pretrained` reads): the shards its
    `model.safetensors.index.json` names, else `model.safetensors`."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.isfile(index):
        return ["model.safetensors"]
    try:
        with open(index, encoding="utf-8") as f:
            names = sorted(set(json.load(f)["weight_map"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ModelError(f"{index} is not a safetensors index (a JSON object with a weight_map): {e}") from None
    if not all(isinstance(name, str) and os.path.basename(name) == name for name in names):
        raise ModelError(f"{index} names weight files outside its folder: save the model again")
    return names


def check_safetensors(path):
    """Refuse, by name, a weight file whose header safetensors itself cannot read (a damaged or foreign file)."""
    try:
        with safe_open(path, framework="pt"):
            pass
    except Exception as e:  # safetensors reports a bad header with its own error type
        raise ModelError(f"{path} is not a valid safetensors file ({str(e)[:200]}): save the model again") from None


def upload_files(model_dir):
    """(names to upload, names left out) of DIR. Uploaded: regular files with a model-file name (or README.md)
    inside DIR, except hidden files (a name starting with ".") and, of the weight files, those the model does not
    load (`weight_files`); each weight file uploaded must parse as safetensors, and every one the model loads must
    be there. A symbolic link is followed only when it stays inside DIR, or when it is a model module linked to this
    installation's own copy of that module (the shipped default model links its code to the package's); any other
    link is refused by name, so that a file from elsewhere (a token, a key) never reaches the Hub."""
    root = os.path.realpath(model_dir)
    weights = weight_files(model_dir)
    kept, left_out = [], []
    for name in sorted(os.listdir(model_dir)):
        path = os.path.join(model_dir, name)
        wanted = (is_model_file(name) or name == "README.md") and not name.startswith(".")
        if wanted and os.path.islink(path):
            target = os.path.realpath(path)
            if os.path.commonpath([root, target]) != root and target != installed_module(name):
                raise UserError(f"{path} is a symbolic link to {target}, outside {model_dir}: only files inside the "
                                "folder are uploaded (copy the file in, or remove the link)")
        if wanted and name.endswith(".safetensors"):
            wanted = name in weights
        if wanted and os.path.isfile(path):
            kept.append(name)
        else:
            left_out.append(name + "/" if os.path.isdir(path) else name)
    missing = [name for name in weights if name not in kept]
    if missing:
        raise ModelError(f"{model_dir} lacks the weight files {missing[:10]}: save the model again")
    for name in weights:
        check_safetensors(os.path.join(model_dir, name))
    return kept, left_out


def build_upload_folder(model_dir, staging, repo_id, **card_kwargs):
    """Copy DIR's model files (`upload_files`) into `staging` (links copied as the files they point to) and add
    the model card; returns the sorted file names of `staging`. What is left out is printed in one line."""
    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        raise ModelError(f"{model_dir} has no config.json: not a saved model folder")
    kept, left_out = upload_files(model_dir)
    if left_out:
        print(f"not uploading (not a file the model loads, or hidden): {', '.join(left_out)}", file=sys.stderr)
    os.makedirs(staging, exist_ok=True)
    for name in kept:
        shutil.copyfile(os.path.join(model_dir, name), os.path.join(staging, name))  # follows the checked links
    if "README.md" in kept:
        print(f"keeping {model_dir}/README.md as the model card (delete it to generate one)", file=sys.stderr)
    else:
        # From DIR's config.json and *_results.json (the latter are described, not uploaded).
        model_card(model_dir, repo_id, **card_kwargs).save(os.path.join(staging, "README.md"))
    return sorted(os.listdir(staging))


def check_loads(folder):
    """Load `folder` in a fresh isolated process (no repository modules on the path, no network)."""
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        name, auto_class, task = architecture(json.load(f))
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as cwd:
        result = subprocess.run(
            [sys.executable, "-I", "-c", LOAD_CHECK, os.path.abspath(folder), name, auto_class, task],
            cwd=cwd, env=env, capture_output=True, text=True,
        )
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or [f"exit status {result.returncode}"]
        raise ModelError(f"{folder} fails the check in a fresh Python process (its own code files, offline): "
                         f"{lines[-1]}")
    return result.stdout.strip()


def upload(folder, repo_id, private):
    api = HfApi()
    url = api.create_repo(repo_id, private=private, exist_ok=True)
    api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message="Upload ELMo model")
    return url

