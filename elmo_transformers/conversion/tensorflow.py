"""Convert a TensorFlow ELMo (a TF-Hub module or a bilm-tf checkpoint) without TensorFlow.

    elmo-transformers convert tensorflow PATH --output DIR [--options OPTIONS.json] [--vocab VOCAB.txt]

PATH is a TF-Hub ELMo module (a folder with saved_model.pb, tfhub_module.pb and variables/, or the .tar.gz TF-Hub
serves, its files at the top or in one folder; of an archive only what is read is unpacked), a bilm-tf training folder
(options.json, `checkpoint`, model.ckpt-N.*) or a checkpoint prefix. The checkpoint variables are renamed to the
datasets bilm-tf's `dump_weights` writes into weights.hdf5 (kernel -> W_0, bias -> B, projection/kernel -> W_P_0, under
RNN_d/RNN/MultiRNNCell/Cell{k}/LSTMCell), so the rest is the hdf5 route's (`allennlp.to_state_dict`). The TF-Hub
module's char_embed has bilm-tf's padding row 0 (262 rows), dropped here as `dump_weights` never writes it; its
`aggregation/weights` and `aggregation/scaling` (TF-Hub's `elmo` output = scaling * sum_k softmax(weights)_k * layer_k)
become the scalar mix, so that `last_hidden_state` is TF-Hub's `elmo` and its masked mean TF-Hub's `default`. With
--vocab, a checkpoint's `softmax/W`, `softmax/b` give the language model.
"""

import errno
import gzip
import os
import posixpath
import re
import shutil
import tarfile
import tempfile
import zlib
from contextlib import contextmanager

import numpy as np
import torch
from huggingface_hub.errors import StrictDataclassError
from transformers.utils import logging

from ..errors import ConversionError, first_line
from .allennlp import (
    build_model,
    check_input_files,
    check_softmax,
    config_from_options,
    expected_shapes,
    options_from_shapes,
    shape_problems,
    to_state_dict,
    vocabulary_words,
)
from .output import mismatch_error
from .tf_checkpoint import MAX_INDEX_BYTES, Checkpoint, checkpoint_prefix, open_file

logger = logging.get_logger(__name__)

LSTM_LEAVES = {"kernel": "W_0", "bias": "B", "projection/kernel": "W_P_0"}
LSTM_PATTERNS = [  # (TF-Hub, bilm-tf several layers, bilm-tf one layer) -> direction, layer, leaf
    re.compile(
        r"RNN_(?P<d>[01])/RNN/MultiRNNCell/Cell(?P<k>\d+)/rnn/lstm_cell/(?P<leaf>kernel|bias|projection/kernel)"
    ),
    re.compile(r"RNN_(?P<d>[01])/rnn/multi_rnn_cell/cell_(?P<k>\d+)/lstm_cell/(?P<leaf>kernel|bias|projection/kernel)"),
    re.compile(r"RNN_(?P<d>[01])/rnn/lstm_cell/(?P<leaf>kernel|bias|projection/kernel)"),
]
OTHER_PARTS = re.compile(r"char_embed|CNN/[Wb]_cnn_\d+|CNN_high_\d+/[Wb]_(carry|transform)|CNN_proj/[Wb]_proj")
TRAINING_STATE = re.compile(
    r"Adagrad|Adam(_\d+)?|Momentum|RMSProp(_\d+)?|ExponentialMovingAverage|beta[12]_power"
    r"|Variable(_\d+)?"
)  # last name parts; Variable: the inference graph's LSTM states
EXTRAS = {"aggregation/weights", "aggregation/scaling", "softmax/W", "softmax/b"}
SOFTMAX = ("softmax/W", "softmax/b")
ARCHIVES = (".tar.gz", ".tgz", ".tar")
SMALL_FILE_BYTES = 1 << 20  # the `checkpoint` file and options.json: a few hundred bytes


def hdf5_name(name):
    """The weights.hdf5 dataset (nested layout) or extra (aggregation, softmax) a checkpoint variable is, or None."""
    for scope in ("bilm/", "lm/"):
        if name.startswith(scope):
            name = name[len(scope) :]
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


class ArchiveMembers:
    """An archive's members, read in place: the files the converter reads that are small (indexes, options.json,
    `checkpoint`) unpacked into `folder`, its shards opened as members (`open`), so that only the bytes of the
    tensors read leave the archive, and nothing else in it (a large or a hostile member) is unpacked."""

    def __init__(self, archive, path, folder):
        self.archive, self.folder = archive, folder
        self.members = {}
        for member in archive.getmembers():  # reads every header: a truncated archive fails here
            name = posixpath.normpath(member.name)
            if name.startswith(("/", "../")) or name == "..":
                raise ConversionError(
                    f"cannot unpack {path}: its member {member.name} lies outside the archive "
                    "(an absolute path or ..): refused"
                )
            if name != ".":
                self.members[name] = member
        tops = {name.split("/", 1)[0] for name in self.members}
        top = tops.pop() if len(tops) == 1 else None  # `tar czf m.tar.gz module/` puts the files in one folder
        # ... and `tar czf m.tar.gz module/*` too, without an entry of the folder itself
        self.root = top if top is not None and (top not in self.members or self.members[top].isdir()) else ""
        total = 0
        for name, member in self.members.items():
            relative = posixpath.relpath(name, self.root or ".")
            if relative in ("checkpoint", "options.json"):
                bound, what = SMALL_FILE_BYTES, relative
            elif relative.endswith(".index") and posixpath.dirname(relative) in ("", "variables"):
                bound, what = MAX_INDEX_BYTES, "checkpoint index"
            else:
                continue
            if not member.isfile():
                raise ConversionError(
                    f"{path}:{name} is a link or a special file, not a file: unpack the archive and convert the folder"
                )
            if member.size > bound:
                raise ConversionError(
                    f"{path}:{name} is {member.size:,} bytes, more than a {what} file holds "
                    f"({bound:,} at most): not an ELMo checkpoint archive"
                )
            total += member.size
            if total > MAX_INDEX_BYTES + 2 * SMALL_FILE_BYTES:
                raise ConversionError(
                    f"{path} holds more than {total - member.size:,} bytes of checkpoint indexes "
                    "and options: not an ELMo checkpoint archive"
                )
            target = os.path.join(folder, *name.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with archive.extractfile(member) as source, open(target, "xb") as out:
                shutil.copyfileobj(source, out)

    def open(self, path):
        """A checkpoint shard `path` (in `folder`), as the archive member it names."""
        name = posixpath.join(*os.path.relpath(path, self.folder).split(os.sep))
        member = self.members.get(name)
        if member is None:
            raise FileNotFoundError(errno.ENOENT, "not in the archive")
        if not member.isfile():
            raise OSError(errno.EINVAL, "a link or a special file in the archive, not a file")
        return self.archive.extractfile(member)


def unpack_error(path, error):
    """Why the archive `path` cannot be read, in one line."""
    if isinstance(error, EOFError) or "unexpected end of data" in str(error):
        return f"cannot unpack {path}: it ends before its last member does (a truncated download?)"
    if isinstance(error, (zlib.error, gzip.BadGzipFile)) or (isinstance(error, OSError) and error.errno is None):
        return f"cannot unpack {path}: its compressed data is corrupt ({error})"
    if isinstance(error, OSError):
        return f"cannot unpack {path}: {error.strerror}{f' ({error.filename})' if error.filename else ''}"
    return f"cannot unpack {path}: a damaged tar archive ({error})"


@contextmanager
def module_folder(path):
    """(folder, open_shard) of `path`: the folder itself and files, or for the .tar.gz TF-Hub serves (or a .tar)
    a temporary folder of its `ArchiveMembers`. Errors name an archive's files as PATH:MEMBER, since the temporary
    folder is gone when the user reads them."""
    if not (os.path.isfile(path) and str(path).endswith(ARCHIVES)):
        yield os.fspath(path), open_file
        return
    try:
        archive = tarfile.open(path)
    except tarfile.ReadError as e:  # no compression tarfile knows gives a tar header
        what = (
            "the file is empty (an interrupted download?)"
            if os.path.getsize(path) == 0
            else "not a tar archive (plain, or compressed with gzip, bzip2 or xz)"
        )
        raise ConversionError(f"cannot unpack {path}: {what}") from e
    except (OSError, tarfile.TarError) as e:
        raise ConversionError(unpack_error(path, e)) from e
    with archive, tempfile.TemporaryDirectory(prefix="elmo-tfhub-") as folder:
        try:
            members = ArchiveMembers(archive, path, folder)
            yield os.path.join(folder, members.root) if members.root else folder, members.open
        except ConversionError as e:
            message = str(e).replace(folder + os.sep, f"{path}:").replace(folder, os.fspath(path))
            raise ConversionError(message) from e
        except (OSError, tarfile.TarError, EOFError, zlib.error) as e:
            raise ConversionError(unpack_error(path, e)) from e


def find_checkpoint(folder):
    """(checkpoint prefix, options.json beside it or None) of a TF-Hub module, a bilm-tf folder or a prefix."""
    variables = os.path.join(folder, "variables", "variables")
    if os.path.isfile(f"{variables}.index"):
        return variables, None
    prefix = checkpoint_prefix(folder)
    options = os.path.join(os.path.dirname(prefix), "options.json")
    return prefix, (options if os.path.isfile(options) else None)


def elmo_variables(checkpoint, prefix):
    """weights.hdf5 name (or extra) -> checkpoint variable of every ELMo variable; the others are reported."""
    names, ignored = {}, []
    for name in checkpoint.entries:
        target = hdf5_name(name)
        if target is None:
            if not is_training_state(name):
                ignored.append(name)
        elif target in names:
            raise ConversionError(f"{prefix} holds two variables for {target} (two models in one checkpoint?)")
        else:
            names[target] = name
    if ignored:
        logger.warning(f"{prefix}: ignoring variables that are not part of ELMo: {', '.join(ignored)}")
    if not any(name.startswith("RNN_") for name in names):
        raise ConversionError(
            f"{prefix} holds no ELMo biLM variables (bilm/... or lm/... names): not an ELMo checkpoint"
        )
    return names


def convert(path, options_path=None, vocab_path=None, **config_kwargs):
    """Build an ElmoModel (with a TF-Hub module's scalar mix), or with `vocab_path` the language model of a
    checkpoint's softmax, and its tokenizer. Every variable's dtype and shape is checked against the architecture
    before any is read."""
    check_input_files(options_path=options_path, vocab_path=vocab_path)
    with module_folder(path) as (folder, open_shard):
        prefix, found_options = find_checkpoint(folder)
        checkpoint = Checkpoint(prefix, open_shard)
        names = elmo_variables(checkpoint, prefix)
        if vocab_path is None and "softmax/W" in names:
            logger.warning(f"{path} holds a softmax; without its vocabulary only the biLM is converted")
            names = {target: name for target, name in names.items() if target not in SOFTMAX}
        for name in names.values():  # float32, a known shape, a size that is the shape's, within its shard
            checkpoint.check(name, np.float32)
        shapes = {target: checkpoint.shapes[name] for target, name in names.items()}
        if shapes.get("char_embed", (0,))[0] == 262:  # bilm-tf's inference graph added a padding row 0
            shapes["char_embed"] = (261, *shapes["char_embed"][1:])
        extras = {name: shapes.pop(name) for name in EXTRAS if name in shapes}
        options = options_path or found_options or options_from_shapes(shapes, path)
        try:
            config = config_from_options(options, **config_kwargs)
        except (OSError, ValueError, StrictDataclassError) as e:
            raise ConversionError(f"invalid options {options}: {first_line(e)}") from e
        problems = shape_problems(expected_shapes(config), shapes, what="variable")
        if problems:
            raise mismatch_error(
                path,
                problems,
                f"the options ({options})" if isinstance(options, str) else "the architecture its shapes give",
            )
        n_mixed = config.n_layers + 1
        if "aggregation/weights" in extras and (
            extras["aggregation/weights"] != (n_mixed,) or extras.get("aggregation/scaling", (1,)) != (1,)
        ):
            raise ConversionError(
                f"{path}: aggregation/weights {extras['aggregation/weights']} and "
                f"aggregation/scaling {extras.get('aggregation/scaling')} do not fit {n_mixed} "
                "layers"
            )
        words = None
        if vocab_path is not None:
            if "softmax/W" not in extras or "softmax/b" not in extras:
                raise ConversionError(
                    f"vocab_path {vocab_path}: {path} has no softmax (softmax/W, softmax/b) for the "
                    "vocabulary (a bilm-tf training checkpoint has one); convert without it for the "
                    "biLM alone",
                    vocab_path,
                    argument="vocab_path",
                )
            words = vocabulary_words(vocab_path)
            check_softmax(config, extras["softmax/W"], extras["softmax/b"], len(words), path, vocab_path)
        read = checkpoint.read(list(names.values()), np.float32)
        arrays = {target: np.array(read[name]) for target, name in names.items()}  # writable copies
        if arrays["char_embed"].shape[0] == 262:
            arrays["char_embed"] = arrays["char_embed"][1:]
        if not all(np.isfinite(value).all() for value in arrays.values()):
            raise ConversionError(f"{prefix} holds NaN or infinite values")
    extras = {name: arrays.pop(name) for name in EXTRAS if name in arrays}
    state = to_state_dict(config, arrays)
    if "aggregation/weights" in extras:
        state["scalar_mixes.0.scalar_parameters"] = torch.from_numpy(extras["aggregation/weights"])
        state["scalar_mixes.0.gamma"] = torch.from_numpy(extras.get("aggregation/scaling", np.ones(1, np.float32)))
    softmax = (extras["softmax/W"], extras["softmax/b"], words) if words is not None else None
    return build_model(config, state, softmax, vocab_path)
