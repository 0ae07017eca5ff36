"""`elmo-transformers push`: upload an ELMo folder to the Hub with a model card; the command line of
`elmo_transformers.hub.push.push`, which holds the rules."""

import argparse
import contextlib
import sys

from ..model_folder import open_model
from . import import_package, option


DESCRIPTION = """Upload an ELMo folder (converted, trained or fine-tuned) to the Hugging Face Hub, with a model card.

    elmo-transformers push DIR REPO_ID [--private] [--dry-run [--staging-dir FOLDER]]

1. Copies what a model repo needs into an upload folder: the config, the weights, the tokenizer files, the model's
   code files, README.md (the model card: DIR's own, or one made from DIR's config and results) and LICENSE.md.
   Everything else (Trainer's training_args.bin, which can hold a token, its state and results files, optimizer
   states, checkpoint folders...) stays out and is listed. A symbolic link that leaves DIR is refused.
2. Loads that folder in a fresh Python process, offline, as a user would (trust_remote_code=True), and runs its
   pipeline on a sentence. A folder that fails is not uploaded; the message names the step.
3. Creates the repo if needed and uploads the folder in one commit. The token comes from HF_TOKEN or
   `hf auth login`. --dry-run stops before this step and keeps the folder to look at.

Every wait on the Hub ends after HF_HUB_DOWNLOAD_TIMEOUT seconds (default 60); Ctrl+C or SIGTERM removes the
upload folder. Details: docs/hub-and-pipelines.md (Uploading to the Hub)."""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="elmo-transformers push", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "model_dir",
        metavar="DIR",
        help="saved ELMo folder (converter or save_pretrained), or `default` for the shipped model",
    )
    parser.add_argument("repo_id", metavar="REPO_ID", help="Hub repo, e.g. user/elmo-original")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--dry-run", action="store_true", help="build and check the upload folder, upload nothing")
    parser.add_argument(
        "--space",
        action="store_true",
        help="upload a Gradio Space serving the demo page on DIR "
        "(REPO_ID names the Space; the model card options do not apply; docs/demo-page.md)",
    )
    parser.add_argument("--staging-dir", help="where to build the upload folder (default: a new temporary folder)")
    card = parser.add_argument_group("model card")
    card.add_argument(
        "--license",
        help="license id (default: 'other', pointing to DIR's LICENSE.md where DIR holds "
        "one, as every model derived from the default model does; else apache-2.0, as AllenNLP's ELMo; "
        "with --space: the licence of DIR's model card where it has one)",
    )
    card.add_argument("--language", nargs="*", default=["en"], help="language codes (default en)")
    card.add_argument("--datasets", nargs="*", default=[], help="Hub ids of the training data sets")
    card.add_argument("--base-model", help="Hub id this model was fine-tuned from")
    card.add_argument("--source", help="what it was converted from, e.g. the AllenNLP options/weights file names")
    card.add_argument("--check", help="how equivalence to AllenNLP was checked, with the figure")
    card.add_argument(
        "--eval-dataset", help="Hub id or name of the data of DIR's *_results.json (default: the first of --datasets)"
    )
    args = parser.parse_args(argv)

    with option("DIR", args.model_dir):
        model = open_model(args.model_dir, local=True)  # a folder of ELMo's, every JSON file of it readable
    import_package()
    from ..hub.push import push

    given = [
        ("REPO_ID", args.repo_id),
        ("--base-model", args.base_model),
        *(("--datasets", name) for name in args.datasets),
        ("--staging-dir", args.staging_dir),
    ]
    with contextlib.ExitStack() as flags:  # an error about one of these values names its option
        for flag, value in given:
            flags.enter_context(option(flag, value))
        pushed = push(
            model,
            args.repo_id,
            private=args.private,
            dry_run=args.dry_run,
            space=args.space,
            staging_dir=args.staging_dir,
            license=args.license,
            language=args.language,
            datasets=args.datasets,
            base_model=args.base_model,
            source=args.source,
            check=args.check,
            eval_dataset=args.eval_dataset,
        )
    print(pushed.check, file=sys.stderr)
    if pushed.url is None:
        print(
            f"dry run: would upload {pushed.upload_folder} to {'the Space ' if args.space else ''}{args.repo_id} "
            f"({'private' if args.private else 'public'}):"
        )
        print("\n".join(f"  {name}" for name in pushed.files))
    else:
        print(f"uploaded {len(pushed.files)} files to {pushed.url}")
    return 0
