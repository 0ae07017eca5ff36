"""The models shipped inside the package, found offline from any folder."""

from pathlib import Path

# A small English ELMo trained on modern English; its card (README.md in the folder) has every figure, its sources and
# their licences (LICENSE.md).
DEFAULT_MODEL = str(Path(__file__).resolve().parent / "elmo-en-small")
# Names every command accepts for it (where no folder of that name exists): `--model default`, `push default ...`.
DEFAULT_MODEL_NAMES = ("default", "elmo-en-small")
