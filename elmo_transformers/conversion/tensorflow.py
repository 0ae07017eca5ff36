"""Convert a TensorFlow ELMo (a TF-Hub module or a bilm-tf checkpoint) without TensorFlow.

    elmo-transformers convert tensorflow PATH --output DIR [--options OPTIONS.json] [--vocab VOCAB.txt]

PATH is a TF-Hub ELMo module (a folder with saved_model.pb, tfhub_module.pb and variables/, or the .tar.gz TF-Hub
serves), a bilm-tf training folder (options.json, `checkpoint`, model.ckpt-N.*) or a checkpoint prefix. The checkpoint
variables are renamed to the datasets bilm-tf's `dump_weights` writes into weights.hdf5 (kernel -> W_0, bias -> B,
projection/kernel -> W_P_0, under RNN_d/RNN/MultiRNNCell/Cell{k}/LSTMCell), so the rest is the hdf5 route's
(`allennlp.to_state_dict`). The TF-Hub module's char_embed has bilm-tf's padding row 0 (262 rows), dropped here as
`dump_weights` never writes it; its `aggregation/weights` and `aggregation/scaling` (TF-Hub's `elmo` output =
scaling * sum_k softmax(weights)_k * layer_k) become the scalar mix, so that `last_hidden_state` is TF-Hub's `elmo`
and its masked mean TF-Hub's `default`. With --vocab, a checkpoint's `softmax/W`, `softmax/b` give the language model.
"""

import os
import re
import tarfile
import tempfile
from contextlib import contextmanager

import numpy as np
import torch
from transformers.utils import logging

from tokenization_elmo import read_vocabulary

from ..errors import ConversionError
from ..text_input import check_text_file
from .allennlp import (build_model, check_softmax, config_from_options, expected_shapes, options_from_shapes,
                       shape_problems, to_state_dict)
from .output import mismatch_error
from .tf_checkpoint import Checkpoint, checkpoint_prefix

logger = logging.get_logger(__name__)

LSTM_LEAVES = {"kernel": "W_0", "bias": "B", "projection/kernel": "W_P_0"}
LSTM_PATTERNS = [  # (TF-Hub, bilm-tf several layers, bilm-tf one layer) -> direction, layer, leaf
    re.compile(r"RNN_(?P<d>[01])/RNN/MultiRNNCell/Cell(?P<k>\d+)/rnn/lstm_cell/(?P<leaf>kernel|bias|projection/kernel)"),
    re.compile(r"RNN_(?P<d>[01])/rnn/multi_rnn_cell/cell_(?P<k>\d+)/lstm_cell/(?P<leaf>kernel|bias|projection/kernel)"),
    re.compile(r"RNN_(?P<d>[01])/rnn/lstm_cell/(?P<leaf>kernel|bias|projection/kernel)"),
]
OTHER_PARTS = re.compile(r"char_embed|CNN/[Wb]_cnn_\d+|CNN_high_\d+/[Wb]_(carry|transform)|CNN_proj/[Wb]_proj")
TRAINING_STATE = re.compile(r"Adagrad|Adam(_\d+)?|Momentum|RMSProp(_\d+)?|ExponentialMovingAverage|beta[12]_power"
                            r"|Variable(_\d+)?")  # last name parts; Variable: the inference graph's LSTM states
EXTRAS = {"aggregation/weights", "aggregation/scaling", "softmax/W", "softmax/b"}


def hdf5_name(name):
    """The weights.hdf5 dataset (nested layout) or extra (aggregation, softmax) a checkpoint variable is, or None."""
    for scope in ("bilm/", "lm/"):
        if name.startswith(scope):
            name = name[len(scope):]
            break
    if name in EXTRAS or OTHER_PARTS.fullmatch(name):
        return name
    for pattern in LSTM_PATTERNS:
        match = pattern.fullmatch(name)
        if match:
            layer = match.groupdict().get("k") or 0
            return f"RNN_{match['d']}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{LSTM_LEAVES[match['leaf']]}"
    return None


def is_training_state(name):
    """Optimizer slots, the step counter and similar training bookkeeping, which the model does not need."""
    return name == "global_step" or TRAINING_STATE.fullmatch(name.rsplit("/", 1)[-1]) is not None


@contextmanager
def module_folder(path):
    """`path` itself, or a temporary folder holding the TF-Hub .tar.gz `path` unpacked."""
    if not (os.path.isfile(path) and str(path).endswith((".tar.gz", ".tgz", ".tar"))):
        yield os.fspath(path)
        return
    with tempfile.TemporaryDirectory(prefix="elmo-tfhub-") as folder:
        try:
            with tarfile.open(path) as archive:
                archive.extractall(folder, filter="data")
        except (OSError, tarfile.TarError, EOFError) as e:
            raise ConversionError(f"cannot unpack {path} (truncated download?): {e}") from e
        yield folder


def find_checkpoint(folder):
    """(checkpoint prefix, options.json beside it or None) of a TF-Hub module, a bilm-tf folder or a prefix."""
    variables = os.path.join(folder, "variables", "variables")
    if os.path.isfile(f"{variables}.index"):
        return variables, None
    prefix = checkpoint_prefix(folder)
    options = os.path.join(os.path.dirname(prefix), "options.json")
    return prefix, (options if os.path.isfile(options) else None)


def read_checkpoint(prefix):
    """name -> float32 array of every ELMo variable, under the weights.hdf5 names; the rest is reported."""
    checkpoint = Checkpoint(prefix)
    arrays, ignored = {}, []
    for name in checkpoint.shapes:
        target = hdf5_name(name)
        if target is None:
            if not is_training_state(name):
                ignored.append(name)
            continue
        if target in arrays:
            raise ConversionError(f"{prefix} holds two variables for {target} (two models in one checkpoint?)")
        arrays[target] = np.array(checkpoint.read(name), dtype=np.float32)  # writable
    if ignored:
        logger.warning(f"{prefix}: ignoring variables that are not part of ELMo: {', '.join(ignored)}")
    if not any(name.startswith("RNN_") for name in arrays):
        raise ConversionError(f"{prefix} holds no ELMo biLM variables (bilm/... or lm/... names): not an ELMo "
                              "checkpoint")
    char_embed = arrays.get("char_embed")
    if char_embed is not None and char_embed.shape[0] == 262:  # bilm-tf's inference graph added a padding row 0
        arrays["char_embed"] = char_embed[1:]
    if not all(np.isfinite(value).all() for value in arrays.values()):
        raise ConversionError(f"{prefix} holds NaN or infinite values")
    return arrays


def convert(path, options_path=None, vocab_path=None, **config_kwargs):
    """Build an ElmoModel (with a TF-Hub module's scalar mix), or with `vocab_path` the language model of a
    checkpoint's softmax, and its tokenizer."""
    with module_folder(path) as folder:
        prefix, found_options = find_checkpoint(folder)
        arrays = read_checkpoint(prefix)
    extras = {name: arrays.pop(name) for name in EXTRAS if name in arrays}
    options = options_path or found_options
    if options is None:
        options = options_from_shapes({name: value.shape for name, value in arrays.items()}, path)
    try:
        config = config_from_options(options, **config_kwargs)
    except (OSError, ValueError) as e:
        raise ConversionError(f"invalid options {options}: {e}") from e
    problems = shape_problems(expected_shapes(config), {name: value.shape for name, value in arrays.items()},
                              what="variable")
    if problems:
        raise mismatch_error(path, problems, f"the options ({options})" if isinstance(options, str) else
                             "the architecture its shapes give")
    state = to_state_dict(config, arrays)
    if "aggregation/weights" in extras:
        weights, scaling = extras["aggregation/weights"], extras.get("aggregation/scaling", np.ones(1, np.float32))
        if weights.shape != (config.n_layers + 1,) or scaling.shape != (1,):
            raise ConversionError(f"{path}: aggregation/weights {weights.shape} and aggregation/scaling "
                                  f"{scaling.shape} do not fit {config.n_layers + 1} layers")
        state["scalar_mixes.0.scalar_parameters"] = torch.from_numpy(weights.copy())
        state["scalar_mixes.0.gamma"] = torch.from_numpy(scaling.copy())
    softmax = None
    if vocab_path is not None:
        if "softmax/W" not in extras or "softmax/b" not in extras:
            raise ConversionError(f"{path} has no softmax (softmax/W, softmax/b): --vocab needs a bilm-tf training "
                                  "checkpoint; convert without --vocab for the biLM alone")
        try:
            check_text_file(vocab_path)  # bounded lines: read_vocabulary reads it whole
            words = read_vocabulary(vocab_path)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ConversionError(f"cannot use the vocabulary {vocab_path}: {e}") from e
        weight, bias = extras["softmax/W"], extras["softmax/b"]
        check_softmax(config, weight.shape, bias.shape, len(words), path, vocab_path)
        softmax = (weight, bias, words)
    elif "softmax/W" in extras:
        logger.warning(f"{path} holds a softmax; without --vocab (its vocabulary) only the biLM is converted")
    return build_model(config, state, softmax, vocab_path)
