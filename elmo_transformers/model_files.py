"""The files of an ELMo model folder: what a conversion writes (and so what `--overwrite` may replace) and what
`elmo-transformers push` uploads. One list, so that a file a model needs is never written by one tool and left out
by another."""

import fnmatch
import os

from configuration_elmo import ELMO_MODULES

GRAPH_FILES = ("model.onnx", "model.onnx.data")  # `export onnx`: the graph, and its weights where ONNX keeps them apart

MODEL_FILES = (
    "config.json",
    "*.safetensors",
    *GRAPH_FILES,
    "model.safetensors.index.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",  # the word vocabulary (bilm-tf format)
    "char.dic",  # ELMoForManyLangs character and word vocabularies
    "word.dic",
    *(f"{module}.py" for module in ELMO_MODULES),
    "README.md",  # the model card (a preset conversion names its source and licence there)
    "LICENSE.md",  # the licences of what the weights were trained on, where the card points to them
)


def is_model_file(name):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in MODEL_FILES)


def is_onnx_export(folder):
    """Whether `folder` is one that `export onnx` wrote: a model.onnx and no PyTorch weights (a folder holding both
    runs in PyTorch, as before the export existed)."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return GRAPH_FILES[0] in names and not any(fnmatch.fnmatchcase(name, "*.safetensors") for name in names)
