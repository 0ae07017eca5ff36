"""The files of an ELMo model folder: what a conversion writes (and so what `overwrite` may replace) and what
`elmo-transformers push` uploads. One list, so that a file a model needs is never written by one tool and left out
by another."""

import fnmatch
import functools
import os

GRAPH_FILES = ("model.onnx", "model.onnx.data")  # `export onnx`: the graph, and its weights where ONNX keeps them apart
# The files a model's numbers depend on: its config, every weight file the loader reads (safetensors, PyTorch's
# pickles, their shard indexes, the graph) and the tokenizer's files (its vocabularies; its segmenter and conversion
# settings are in tokenizer_config.json). What a conversion writes, with the card, the licence and the module files
# (`model_files`).
NUMBERS_FILES = (
    "config.json",
    "*.safetensors",
    "model.safetensors.index.json",
    "pytorch_model*.bin",
    "pytorch_model.bin.index.json",
    *GRAPH_FILES,
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",  # the word vocabulary (bilm-tf format)
    "char.dic",  # ELMoForManyLangs character and word vocabularies
    "word.dic",
)


@functools.cache
def model_files():
    """MODEL_FILES, made on first use: the model's modules are configuration_elmo's list, and it imports torch (this
    module is also read where an exported folder runs without torch)."""
    from configuration_elmo import ELMO_MODULES, LICENCE_FILE

    return (
        *(pattern for pattern in NUMBERS_FILES if "pytorch_model" not in pattern),  # (a conversion writes safetensors)
        *(f"{module}.py" for module in ELMO_MODULES),
        "README.md",  # the model card (a preset conversion names its source and licence there)
        LICENCE_FILE,  # the licences of what the weights were trained on, where the card points to them
    )


def __getattr__(name):
    if name == "MODEL_FILES":
        return model_files()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_model_file(name):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in model_files())


def is_onnx_export(folder):
    """Whether `folder` is one that `export onnx` wrote: a model.onnx and no PyTorch weights (a folder holding both
    runs in PyTorch, as before the export existed)."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return GRAPH_FILES[0] in names and not any(fnmatch.fnmatchcase(name, "*.safetensors") for name in names)
