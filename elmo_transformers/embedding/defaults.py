"""The embed command's defaults and choices, in a module that imports nothing heavy: `elmo-transformers embed --help`
shows them before torch is imported."""

from ..runtime import RUNTIMES  # noqa: F401  (a choice of the command; runtime/ imports nothing heavy)

DEFAULT_BATCH_SIZE = 64  # AllenNLP's
MAX_SENTENCE_WORDS = 1000
MODES = ("all", "top", "average")
DTYPE_NAMES = ("float32", "bfloat16", "float16", "int8")  # torch dtypes, and int8 weights
# Padded words a batch holds by default (lines x the longest line's words), on the CPU and on an accelerator. On the
# CPU the LSTM's GEMMs run faster the more rows they get, up to about this many (docs/speed.md, the budget on Zen 3);
# past it the gain is small and the memory keeps growing.
BATCH_WORDS = {"cpu": 4096, "accelerator": 16384}
MAX_BATCH_WORDS = 1 << 20  # the most any of them may be set to: a batch's activations grow with its padded words
FILE_FORMATS = ("hdf5", "parquet")  # what embed writes: one HDF5 file (AllenNLP's layout), or a folder of Parquet files
# The dtype of the vectors written (--output-dtype): float32 (AllenNLP's), or float16 at half the disk. Neither HDF5
# nor Parquet (Arrow) has a bfloat16 type.
OUTPUT_DTYPES = ("float32", "float16")
