"""What of a model folder goes up to a Hub repo, the fresh-process check of an upload folder, and the upload itself:
shared by a model's upload folder (`push.py`) and a Space's (`space.py`)."""

import importlib.util
import logging
import os
import subprocess
import sys
import tempfile

from huggingface_hub import HfApi, constants

from configuration_elmo import ELMO_MODULES

from ..errors import UserError, first_line
from ..model_files import GRAPH_FILES, is_model_file

logger = logging.getLogger(__name__)


def installed_module(name):
    """The real path of this installation's own module file `name` (e.g. modeling_elmo.py), or None."""
    module = name.removesuffix(".py")
    spec = importlib.util.find_spec(module) if name.endswith(".py") and module in ELMO_MODULES else None
    return os.path.realpath(spec.origin) if spec is not None and spec.origin else None


def refuse_links_out(model_dir):
    """Refuse by name a model file of DIR that is a symbolic link leaving DIR, but for a model module linked to this
    installation's own copy of that module (the shipped default model links its code to the package's): a file from
    elsewhere (a token, a key) never reaches the Hub. Checked before any file of DIR is copied."""
    root = os.path.realpath(model_dir)
    for name in sorted(os.listdir(model_dir)):
        path = os.path.join(model_dir, name)
        if name.startswith(".") or not is_model_file(name) or not os.path.islink(path):
            continue
        target = os.path.realpath(path)
        if os.path.commonpath([root, target]) != root and target != installed_module(name):
            raise UserError(
                f"{path} is a symbolic link to {target}, outside {model_dir}: only files inside the "
                "folder are uploaded (copy the file in, or remove the link)"
            )


def upload_files(folder, skipped="not uploading"):
    """(names to upload, names left out) of DIR (`folder`, its ModelFolder), its links checked first
    (`refuse_links_out`). Uploaded: regular, not hidden files with a model-file name (or README.md) inside DIR, and of
    the safetensors files only those the model loads, each checked to be one (`ModelFolder.check_weights`). What is
    left out is logged, a warning that starts with `skipped`."""
    model_dir = folder.path
    refuse_links_out(model_dir)
    if folder.is_export:
        raise UserError(
            f"{model_dir} is an exported ONNX folder (model.onnx, no PyTorch weights): push uploads and "
            "checks PyTorch models; push the folder it was exported from"
        )
    if "tokenizer_config.json" not in folder.documents:  # (the model's save_pretrained alone writes none)
        raise UserError(
            f"{model_dir} holds no tokenizer files (tokenizer_config.json), which a user's AutoTokenizer "
            "needs: save the tokenizer into it too (tokenizer.save_pretrained(DIR))"
        )
    weights = {os.path.basename(path) for path in folder.weight_files()}
    kept, left_out = [], []
    for name in sorted(os.listdir(model_dir)):
        path = os.path.join(model_dir, name)
        wanted = not name.startswith(".") and is_model_file(name)
        if name.endswith(".safetensors") and name not in weights or name in GRAPH_FILES:
            wanted = False  # not a file the model loads (a graph beside PyTorch weights is not what is checked)
        if wanted and os.path.isfile(path):
            kept.append(name)
        else:
            left_out.append(name + "/" if os.path.isdir(path) else name)
    folder.check_weights()
    if left_out:
        logger.warning(f"{skipped} (not a regular model file of the folder): {', '.join(left_out)}")
    return kept, left_out


def check_in_fresh_process(code, staging, *args, env=None, what=None):
    """Run the Python `code` with the arguments `staging` (made absolute) and `args` in a fresh, isolated process
    (`python -I`: no repository modules on the path; another working folder; offline; `env`: more variables), as a
    user who downloads the upload folder `staging` would; returns its output. A failure is one UserError line: `what`
    (default `staging`) fails the check, and the last line the process wrote (its `sys.exit` message)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", **(env or {}))
    with tempfile.TemporaryDirectory() as cwd:
        result = subprocess.run(  # -B: no __pycache__ written into the folder to upload
            [sys.executable, "-I", "-B", "-c", code, os.path.abspath(staging), *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit code {result.returncode}"
        raise UserError(f"{what or staging} fails the check in a fresh process: {last}")
    return result.stdout.strip()


def upload(staging, repo_id, private, repo_type="model", commit_message="Upload ELMo model", **create_options):
    """Create the repo `repo_id` (a model, or with repo_type="space" and space_sdk a Space) if needed and upload
    the folder `staging` in one commit; returns the repo's URL. A Hub that cannot be reached or refuses (no network,
    a token without write access) is one UserError line."""
    api = HfApi()
    try:
        url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True, **create_options)
        api.upload_folder(repo_id=repo_id, repo_type=repo_type, folder_path=staging, commit_message=commit_message)
    except Exception as e:  # noqa: BLE001  (no network, proxy, TLS, a refused token: the Hub's answer, in one line)
        raise UserError(
            f"cannot upload to {repo_id} on {constants.ENDPOINT}: {type(e).__name__}: {first_line(e)}; "
            "check the network and the token (`hf auth login`), then push again"
        ) from e
    return url
