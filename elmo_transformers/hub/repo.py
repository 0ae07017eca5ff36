"""What of a model folder goes up to a Hub repo, and the upload itself: shared by a model's upload folder
(`push.py`) and a Space's (`space.py`)."""

import importlib.util
import os

from huggingface_hub import HfApi, constants

from configuration_elmo import ELMO_MODULES

from ..errors import UserError, first_line
from ..model_files import GRAPH_FILES, is_model_file


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
            raise UserError(f"{path} is a symbolic link to {target}, outside {model_dir}: only files inside the "
                            "folder are uploaded (copy the file in, or remove the link)")


def upload_files(source):
    """(names to upload, names left out) of DIR (`source`, its ModelFolder; its links checked by `refuse_links_out`).
    Uploaded: regular, not hidden files with a model-file name (or README.md) inside DIR, and of the safetensors files
    only those the model loads, each checked to be one (`ModelFolder.check_weights`)."""
    model_dir = source.path
    if source.is_export:
        raise UserError(f"{model_dir} is an exported ONNX folder (model.onnx, no PyTorch weights): push uploads and "
                        "checks PyTorch models; push the folder it was exported from")
    if "tokenizer_config.json" not in source.documents:  # (the model's save_pretrained alone writes none)
        raise UserError(f"{model_dir} holds no tokenizer files (tokenizer_config.json), which a user's AutoTokenizer "
                        "needs: save the tokenizer into it too (tokenizer.save_pretrained(DIR))")
    weights = {os.path.basename(path) for path in source.weight_files()}
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
    source.check_weights()
    return kept, left_out


def upload(folder, repo_id, private, repo_type="model", commit_message="Upload ELMo model", **create_options):
    """Create the repo `repo_id` (a model, or with repo_type="space" and space_sdk a Space) if needed and upload
    `folder` in one commit; returns the repo's URL. A Hub that cannot be reached or refuses (no network, a token
    without write access) is one UserError line."""
    api = HfApi()
    try:
        url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True, **create_options)
        api.upload_folder(repo_id=repo_id, repo_type=repo_type, folder_path=folder, commit_message=commit_message)
    except Exception as e:  # noqa: BLE001  (no network, proxy, TLS, a refused token: the Hub's answer, in one line)
        raise UserError(f"cannot upload to {repo_id} on {constants.ENDPOINT}: {type(e).__name__}: {first_line(e)}; "
                        "check the network and the token (`hf auth login`), then push again") from e
    return url
