"""The embed command's defaults and choices, in a module that imports nothing: `elmo-transformers embed --help` shows
them before torch is imported."""

from ..runtime import RUNTIMES  # noqa: F401  (a choice of the command; runtime/ imports nothing heavy)

DEFAULT_BATCH_SIZE = 64  # AllenNLP's
MAX_SENTENCE_WORDS = 1000
MODES = ("all", "top", "average")
DTYPE_NAMES = ("float32", "bfloat16", "float16", "int8")  # torch dtypes, and int8 weights
