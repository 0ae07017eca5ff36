#!/usr/bin/env python
"""Upload an ELMo folder (converted or trained) to the Hugging Face Hub, with a model card.

    python scripts/push_to_hub.py DIR REPO_ID [--private] [--dry-run [--staging-dir FOLDER]]

1. Builds the upload folder: DIR's files (hidden files, `_*` and `checkpoint-*` left out; subfolders such as
   Trainer's runs/ left out with a note) plus README.md, the model card from model_card.py (DIR's own README.md,
   if any, is kept instead).
2. Checks that folder in a fresh, isolated Python process (`python -I`, another working directory, offline): it
   must load with AutoConfig/AutoTokenizer/AutoModel and `trust_remote_code=True` from its own code files and embed
   a sentence.
3. Creates the repo (if needed) and uploads the folder in one commit. The token comes from the HF_TOKEN variable or
   `hf auth login`. `--dry-run` stops before this step and keeps the folder for inspection.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from huggingface_hub import HfApi, get_token
from model_card import write_model_card

# Run in the fresh process: load through the Auto classes only, from the folder's own copies of the code.
LOAD_CHECK = """
import sys
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

folder = sys.argv[1]
config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
if not type(model).__module__.startswith("transformers_modules"):
    sys.exit(f"the model class came from {type(model).__module__}, not from the folder's code files")
with torch.no_grad():
    out = model(**tokenizer(["Hello world !"], return_tensors="pt"), output_hidden_states=True)
expected = (1, 3, 2 * config.projection_dim)
shapes = [tuple(out.last_hidden_state.shape)] + [tuple(h.shape) for h in out.hidden_states]
if len(out.hidden_states) != config.n_layers + 1 or set(shapes) != {expected}:
    sys.exit(f"unexpected output shapes {shapes}")
print(f"loads: {type(model).__name__}, {sum(p.numel() for p in model.parameters()):,} parameters")
"""

SKIPPED = ("checkpoint-", "_", ".")


def build_upload_folder(model_dir, staging, repo_id, **card_kwargs):
    """Copy DIR's files into `staging` and add the model card; returns the sorted file names."""
    names = sorted(n for n in os.listdir(model_dir) if not n.startswith(SKIPPED))
    if "config.json" not in names:
        raise SystemExit(f"error: {model_dir} has no config.json: not a saved model folder")
    folders = [n for n in names if os.path.isdir(os.path.join(model_dir, n))]
    if folders:  # e.g. Trainer's runs/ logs: a model folder is flat
        print(f"not uploading the subfolders {', '.join(folders)} of {model_dir}", file=sys.stderr)
    os.makedirs(staging, exist_ok=True)
    for name in names:
        if name not in folders:
            shutil.copy2(os.path.join(model_dir, name), os.path.join(staging, name))
    if "README.md" in names:
        print(f"keeping {model_dir}/README.md as the model card (delete it to generate one)", file=sys.stderr)
    else:
        write_model_card(staging, repo_id, **card_kwargs)
    return sorted(os.listdir(staging))


def check_loads(folder):
    """Load `folder` in a fresh isolated process (no repository modules on the path, no network)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as cwd:
        result = subprocess.run(
            [sys.executable, "-I", "-c", LOAD_CHECK, os.path.abspath(folder)],
            cwd=cwd, env=env, capture_output=True, text=True,
        )
    if result.returncode != 0:
        raise SystemExit(f"error: {folder} does not load with the Auto classes:\n{result.stderr.strip()[-3000:]}")
    return result.stdout.strip()


def upload(folder, repo_id, private):
    api = HfApi()
    url = api.create_repo(repo_id, private=private, exist_ok=True)
    api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message="Upload ELMo model")
    return url


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", metavar="DIR", help="saved ELMo folder (converter or save_pretrained)")
    parser.add_argument("repo_id", metavar="REPO_ID", help="Hub repo, e.g. user/elmo-original")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--dry-run", action="store_true", help="build and check the upload folder, upload nothing")
    parser.add_argument("--staging-dir", help="where to build the upload folder (default: a new temporary folder)")
    card = parser.add_argument_group("model card")
    card.add_argument("--license", default="apache-2.0", help="license id (default apache-2.0, as AllenNLP's ELMo)")
    card.add_argument("--language", nargs="*", default=["en"], help="language codes (default en)")
    card.add_argument("--datasets", nargs="*", default=[], help="Hub ids of the training data sets")
    card.add_argument("--base-model", help="Hub id this model was fine-tuned from")
    card.add_argument("--source", help="what it was converted from, e.g. the AllenNLP options/weights file names")
    card.add_argument("--check", help="how equivalence to AllenNLP was checked, with the figure")
    args = parser.parse_args(argv)

    if not os.path.isdir(args.model_dir):
        raise SystemExit(f"error: {args.model_dir} is not a folder")
    if not args.dry_run and get_token() is None:
        raise SystemExit("error: no Hugging Face token: set HF_TOKEN or run `hf auth login` (or use --dry-run)")
    if args.staging_dir and os.path.exists(args.staging_dir) and os.listdir(args.staging_dir):
        raise SystemExit(f"error: --staging-dir {args.staging_dir} is not empty")
    staging = args.staging_dir or tempfile.mkdtemp(prefix="elmo-upload-")
    try:
        files = build_upload_folder(
            args.model_dir, staging, args.repo_id, license=args.license, language=args.language,
            datasets=args.datasets, base_model=args.base_model, source=args.source, check=args.check,
        )
        print(check_loads(staging), file=sys.stderr)
        if args.dry_run:
            print(f"dry run: would upload {staging} to {args.repo_id} ({'private' if args.private else 'public'}):")
            print("\n".join(f"  {name}" for name in files))
            return 0
        url = upload(staging, args.repo_id, args.private)
        print(f"uploaded {len(files)} files to {url}")
        return 0
    finally:
        if not args.dry_run and not args.staging_dir:
            shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
