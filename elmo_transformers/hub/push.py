"""Upload an ELMo folder (converted, trained or fine-tuned) to the Hugging Face Hub, with a model card: `push`, which
the command `elmo-transformers push DIR REPO_ID [--private] [--dry-run [--staging-dir FOLDER]]` calls.

1. Builds the upload folder from an allow-list of what a model repo needs (model_files.py: config, weights,
   tokenizer files, the code modules, README.md); anything else in DIR (Trainer's training_args.bin, which can hold
   a token, trainer_state.json, *_results.json, optimizer states, checkpoint-*/ and runs/ folders...) is left out
   and listed. Only regular files inside DIR go: a symbolic link leaving DIR is refused by name (except a code
   module linked to this installation's own copy, as in the shipped default model). README.md is the model card
   from model_card.py (DIR's own README.md, if any, is kept instead). PyTorch models only: an exported ONNX folder
   is refused, and a model.onnx beside PyTorch weights is left out (what is uploaded is what step 2 checks).
2. Checks that folder in a fresh, isolated Python process (`python -I`, another working directory, offline): with
   `trust_remote_code=True` and its own code files, the Auto class of its architecture must load it and its
   pipeline must run on a sentence (for a language model, fill-mask on one with a `<mask>` word). A failure names
   the step that failed.
3. Creates the repo (if needed) and uploads the folder in one commit. The token comes from the HF_TOKEN variable or
   `hf auth login`. `dry_run` stops before this step and keeps the folder for inspection. Each wait on the Hub
   ends after HF_HUB_DOWNLOAD_TIMEOUT seconds (default 60: hub/deadline.py, in a command); SIGTERM stops the command
   as Ctrl+C does, removing the temporary upload folder.
"""

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass

from huggingface_hub import get_token

from ..errors import UserError
from ..model_folder import check_hub_id, open_model
from ..output_paths import check_output_apart
from . import space as spaces
from .model_card import architecture, model_card
from .repo import check_in_fresh_process, upload, upload_files

logger = logging.getLogger(__name__)

# Run in the fresh process: the architecture's Auto class and the pipeline, from the folder's own code files. Each
# step names itself when it fails, so that a pipeline that fails is not reported as a folder that does not load.
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
        sys.exit(f"{what} failed: {type(e).__name__}: {str(e).strip()[:500]}")


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


def build_upload_folder(folder, staging, repo_id, **card_kwargs):
    """Copy the model files (`upload_files`) of DIR (`folder`, its ModelFolder) into `staging` (links copied as the
    files they point to) and add the model card (`model_card`'s keyword arguments); returns the sorted file names
    of `staging`."""
    kept, _ = upload_files(folder)
    os.makedirs(staging, exist_ok=True)
    for name in kept:
        shutil.copyfile(folder.file(name), os.path.join(staging, name))  # follows the checked links
    if "README.md" in kept:
        logger.warning(f"keeping {folder.path}/README.md as the model card (delete it to generate one)")
    else:
        # From DIR's config.json and *_results.json (the latter are described, not uploaded).
        model_card(folder, repo_id, **card_kwargs).save(os.path.join(staging, "README.md"))
    return sorted(os.listdir(staging))


def check_loads(staging, folder):
    """Load `staging`, the upload folder made from DIR (`folder`, its ModelFolder, whose config `staging` holds), in
    a fresh isolated process (`check_in_fresh_process`); returns what the check says it loaded."""
    return check_in_fresh_process(LOAD_CHECK, staging, *architecture(folder.config))


@dataclass(frozen=True)
class Pushed:
    """What `push` did: `upload_folder`, the folder built for upload (kept after a dry run or in the `staging_dir`
    given, else removed); `files`, its files (relative paths, sorted); `check`, what the fresh-process check says it
    loaded; `url`, the repo's URL (None after a dry run)."""

    upload_folder: str
    files: list
    check: str
    url: str | None


def check_staging_dir(staging_dir, folder):
    """A `staging_dir` given to `push`: apart from DIR (`folder`, its ModelFolder), empty, and writable (made if
    missing)."""
    check_output_apart(staging_dir, [folder.path])
    if os.path.exists(staging_dir) and os.listdir(staging_dir):
        raise UserError(f"staging_dir {staging_dir} is not empty", staging_dir, argument="staging_dir")
    try:
        os.makedirs(staging_dir, exist_ok=True)
        tempfile.TemporaryFile(dir=staging_dir).close()
    except OSError as e:
        raise UserError(
            f"staging_dir {staging_dir}: cannot write into it: {e.strerror or e}", staging_dir, argument="staging_dir"
        ) from None


def push(
    model,
    repo_id,
    *,
    private=False,
    dry_run=False,
    space=False,
    staging_dir=None,
    license=None,
    language=("en",),
    datasets=(),
    base_model=None,
    source=None,
    check=None,
    eval_dataset=None,
):
    """Upload the ELMo folder `model` (a path, `default` for the shipped model, or `open_model`'s ModelFolder) to the
    Hub repo `repo_id` with a model card: the upload folder built, checked in a fresh process and uploaded in one
    commit (this module's docstring). `space`: a Gradio Space serving the demo page on the model instead
    (`space.build_space_folder`; the card arguments but `license` do not apply). `dry_run` builds and checks the
    folder and uploads nothing. The folder is built in `staging_dir` (empty or new) where given, else in a temporary
    folder removed at the end (kept after a dry run). The card arguments are `model_card`'s. The token comes from
    HF_TOKEN or `hf auth login`. Every argument is checked before any work; returns a `Pushed`."""
    for value in (repo_id, base_model, *datasets):
        if value is not None:
            check_hub_id(value)
    folder = open_model(model, local=True)  # (a ModelFolder as it is)
    if space:
        from ..demo.server import import_gradio

        import_gradio()  # before anything is staged
    if not dry_run and get_token() is None:
        raise UserError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (or pass dry_run=True)")
    if staging_dir:
        check_staging_dir(staging_dir, folder)
    staging = staging_dir or tempfile.mkdtemp(prefix="elmo-upload-")
    kept = False  # a dry run keeps its folder for inspection; a failed run removes the one it made
    try:
        if space:
            files, _ = spaces.build_space_folder(folder, staging, repo_id, license=license)
            checked = spaces.check_space(staging)
            options = {"repo_type": "space", "space_sdk": "gradio", "commit_message": "Upload ELMo demo Space"}
        else:
            files = build_upload_folder(
                folder,
                staging,
                repo_id,
                license=license,
                language=language,
                datasets=datasets,
                base_model=base_model,
                source=source,
                check=check,
                eval_dataset=eval_dataset,
            )
            checked = check_loads(staging, folder)
            options = {}
        url = None if dry_run else upload(staging, repo_id, private, **options)
        kept = dry_run
        return Pushed(staging, files, checked, url)
    finally:
        if not kept and not staging_dir:  # only the temporary folder push made itself
            shutil.rmtree(staging, ignore_errors=True)
