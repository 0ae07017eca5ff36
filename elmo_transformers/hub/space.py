"""A Hugging Face Space that serves the demo page on one model: `elmo-transformers push DIR OWNER/NAME --space`.

The Space folder holds:
- app.py: the repository's (the page of `demo --web`), which serves the model in model/;
- model/: DIR's files as `push` uploads a model (the same allow-list and link checks, `repo.upload_files`);
- this package's code (elmo_transformers/ without its shipped model, and the model modules), so that the Space runs
  the code checked here, and its licence (LICENSE, Apache-2.0);
- requirements.txt: this package's requirements and its [demo] extra, from the installed package's metadata, with
  PyTorch's CPU package index added (`--extra-index-url`, which pip reads in a requirements file): a CPU Space then
  installs the CPU build of torch (its `+cpu` version sorts above the same version on PyPI), not the CUDA build;
- README.md: the Spaces header (sdk: gradio, the Gradio version, a title naming the model, the licence of the
  model's card, or `license` where given) and what the page shows.

Before upload the folder is checked in a fresh, isolated process (`python -I`, offline, another working folder): its
app.py must build the page from the folder's own code and model.
"""

import os
import shutil
from importlib import metadata
from pathlib import Path

from huggingface_hub import SpaceCard, SpaceCardData
from packaging.requirements import Requirement

from configuration_elmo import ELMO_MODULES

from ..errors import UserError
from .model_card import model_card
from .repo import check_in_fresh_process, installed_module, upload_files

PACKAGE = "elmo-transformers"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
LICENSE_FIELDS = ("license", "license_name", "license_link")  # of a model card's metadata
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # elmo_transformers/
# Run in the fresh process from the Space folder: importing app.py builds the page (loads the model).
PAGE_CHECK = """
import sys
sys.path.insert(0, sys.argv[1])
import app
print(f"the page builds: {type(app.demo).__name__} on {app.MODEL.name}/ with the code of {app.server.__file__}")
"""


def requirements():
    """This package's requirements and those of its [demo] extra, as requirements.txt lines, after the line that
    adds PyTorch's CPU index."""
    try:
        lines = metadata.requires(PACKAGE) or []
    except metadata.PackageNotFoundError:
        raise UserError(
            f'{PACKAGE} is not installed (its requirements come from the installed package): pip install ".[demo]"'
        ) from None
    needed = []
    for line in lines:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": "demo"}):
            requirement.marker = None
            needed.append(str(requirement))
    return [f"--extra-index-url {TORCH_CPU_INDEX}", *needed]


def package_files():
    """{path in the Space: source file} for this package's Python code (not its shipped model) and the model
    modules; symbolic links are copied as the files they point to."""
    root = PACKAGE_ROOT
    files = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] == "models" and len(relative.parts) > 2:
            continue  # the shipped model (its code files are the model modules, added below)
        files[f"elmo_transformers/{relative.as_posix()}"] = path
    for module in ELMO_MODULES:
        files[f"{module}.py"] = Path(installed_module(f"{module}.py"))
    files["LICENSE"] = code_licence()
    return files


def code_licence():
    """The code's licence file (Apache-2.0): the repository's LICENSE, or the installed distribution's copy."""
    checkout = PACKAGE_ROOT.parent / "LICENSE"
    if checkout.is_file():
        return checkout
    for file in metadata.distribution(PACKAGE).files or []:
        if file.name == "LICENSE":
            return Path(file.locate())
    raise UserError(f'{PACKAGE}\'s LICENSE file is not installed: reinstall the package (pip install ".[demo]")')


def model_licence(folder):
    """{field: value} of the licence of the model `folder` (a ModelFolder): its card's (README.md's metadata), else
    that of the licence file it holds (`ModelFolder.licence`), a `license_link` to a file of the folder pointing into
    the Space's model/; {} without either."""
    data = folder.card_metadata("give the Space's licence as license")
    licence = {field: data[field] for field in LICENSE_FIELDS if data.get(field)} or folder.licence() or {}
    link = licence.get("license_link")
    if isinstance(link, str) and os.path.isfile(folder.file(link)):
        licence["license_link"] = f"model/{link}"
    return licence


def space_card(folder, repo_id, license=None):
    """The Space's README.md for the model `folder` (a ModelFolder): the Spaces header and a few lines on what the
    page shows. Its licence is `license` where given, else the model's (`model_licence`), else apache-2.0 (as `push`
    gives a model)."""
    import gradio

    config, name, language_model = folder.config, folder.title, folder.is_language_model
    licence = {"license": license} if license else model_licence(folder) or {"license": "apache-2.0"}
    data = SpaceCardData(
        title=f"ELMo demo: {name}"[:60],
        sdk="gradio",
        sdk_version=gradio.__version__,
        app_file="app.py",
        emoji="🔤",
        colorFrom="blue",
        colorTo="green",
        short_description="How ELMo's vectors of a word depend on its sentence",
        tags=["elmo"],
        **licence,
    )
    body = (
        f"# ELMo demo: {name}\n\n"
        f"This Space serves the demo page of elmo-transformers on the ELMo model in `model/` (copied from "
        f"`{name}`: {config.get('n_layers')} biLM layers, {2 * config.get('projection_dim', 0)}-value vectors"
        f"{', with its language-model softmax' if language_model else ''}).\n\n"
        "- Word senses: the cosine similarities of one word's uses in several sentences, per biLM layer, and "
        "their 2-D projection.\n"
        + (
            "- Fill-mask (the top 10 words for a `<mask>`) and each word's log-probability, forward, backward and "
            "mean.\n"
            if language_model
            else "- Fill-mask and word scores are off: the model has no softmax.\n"
        )
        + f"\nMade with `elmo-transformers push {name} {repo_id} --space`.\n"
    )
    return SpaceCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def build_space_folder(folder, staging, repo_id, license=None):
    """Write the Space folder for DIR (`folder`, its ModelFolder) into `staging`; returns (its files, relative and
    sorted; the names of DIR left out of model/, which `upload_files` logs)."""
    kept, left_out = upload_files(folder, skipped="not in model/")
    app = PACKAGE_ROOT / "demo" / "app.py"  # the repository's app.py
    files = {"app.py": app, **package_files(), **{f"model/{name}": Path(folder.file(name)) for name in kept}}
    for relative, path in files.items():
        target = Path(staging) / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)  # follows the checked links
    if "README.md" not in kept:  # the page names the model by its card's title, not by the folder name model/
        card = model_card(folder, folder.title, license=license)
        card.save(Path(staging) / "model" / "README.md")
    (Path(staging) / "requirements.txt").write_text("\n".join(requirements()) + "\n", encoding="utf-8")
    space_card(folder, repo_id, license).save(os.path.join(staging, "README.md"))
    written = sorted(p.relative_to(staging).as_posix() for p in Path(staging).rglob("*") if p.is_file())
    return written, left_out


def check_space(staging):
    """Build the page from the Space folder `staging` alone in a fresh isolated process (`check_in_fresh_process`);
    returns what the check says it built."""
    checked = check_in_fresh_process(
        PAGE_CHECK, staging, env={"GRADIO_ANALYTICS_ENABLED": "False"}, what=f"the Space folder {staging}"
    )
    return checked.splitlines()[-1]
