"""Convert an original ELMo (AllenNLP / bilm-tf `options.json` + `weights.hdf5`) into a Hub-ready folder.

    elmo-transformers convert allennlp --options OPTIONS.json --weights WEIGHTS.hdf5 --output DIR

The folder holds config.json (with `auto_map`), model.safetensors, the tokenizer files and the model's code modules
(`ELMO_MODULES`), so that `AutoModel.from_pretrained(DIR, trust_remote_code=True)` works. Every dataset is checked
against the options before anything is written; the folder appears only when the conversion succeeded.

With the published softmax (`NAME_softmax_weights.hdf5`: group `softmax` with `W` [V, P] and `b` [V], shared by both
directions) and its vocabulary (one word a line, word id = line number), the folder holds the language model: it
loads as `AutoModelForPreTraining` (`ElmoForLanguageModeling`) and, without the softmax, as `AutoModel`.
"""

import json
import os

import h5py
import numpy as np
import torch
from huggingface_hub.errors import StrictDataclassError
from transformers.utils import logging

from configuration_elmo import ElmoConfig
from modeling_elmo import ElmoForLanguageModeling, ElmoModel
from basic_tokenization_elmo import BOS_WORD, EOS_WORD, read_vocabulary
from tokenization_elmo import ElmoTokenizer

from ..errors import ConversionError, first_line
from ..text_input import check_text_file
from .output import mismatch_error

logger = logging.get_logger(__name__)


def config_from_options(options, **kwargs):
    """The ElmoConfig of an AllenNLP / bilm-tf `options.json` (a path or the parsed dict).

    Training-only keys (batch_size, n_epochs, ...) are ignored; `kwargs` set the fields options.json lacks
    (num_output_representations, do_layer_norm, dropout, ...).
    """
    if isinstance(options, (str, os.PathLike)):
        with open(options, encoding="utf-8") as f:
            try:
                options = json.load(f)
            except json.JSONDecodeError as e:
                raise ConversionError(f"{options} is not valid JSON: {e}") from e
            except RecursionError:
                raise ConversionError(f"{options} nests lists or objects too deeply to be an options.json") from None
    try:
        lstm, char_cnn = options["lstm"], options["char_cnn"]
        fields = dict(
            char_embedding_dim=char_cnn["embedding"]["dim"],
            filters=char_cnn["filters"],
            n_highway=char_cnn["n_highway"],
            activation=char_cnn.get("activation", "relu"),
            n_characters=char_cnn.get("n_characters", 262),
            max_characters_per_token=char_cnn.get("max_characters_per_token", 50),
            lstm_dim=lstm["dim"],
            projection_dim=lstm["projection_dim"],
            n_layers=lstm["n_layers"],
            cell_clip=lstm.get("cell_clip"),
            proj_clip=lstm.get("proj_clip"),
        )
    except KeyError as e:
        raise ConversionError(f"options are missing the required key {e} (expected the AllenNLP options.json layout)")
    except (TypeError, AttributeError) as e:
        raise ConversionError(f"options do not have the AllenNLP options.json layout (lstm and char_cnn objects): {e}")
    if "use_skip_connections" not in lstm:
        logger.warning("options.json has no lstm.use_skip_connections; using true, as AllenNLP does")
    fields["use_skip_connections"] = lstm.get("use_skip_connections", True)  # validated: a JSON true or false
    fields.update(kwargs)
    return ElmoConfig(**fields)


def options_from_config(config):
    """The options.json dict that describes `config`'s biLM (the inverse of `config_from_options`)."""
    return {
        "lstm": {
            "dim": config.lstm_dim,
            "projection_dim": config.projection_dim,
            "n_layers": config.n_layers,
            "cell_clip": config.cell_clip,
            "proj_clip": config.proj_clip,
            "use_skip_connections": config.use_skip_connections,
        },
        "char_cnn": {
            "activation": config.activation,
            "embedding": {"dim": config.char_embedding_dim},
            "filters": config.filters,
            "n_highway": config.n_highway,
            "n_characters": config.n_characters,
            "max_characters_per_token": config.max_characters_per_token,
        },
    }


def lstm_prefix(direction, layer, n_layers, flat):
    """bilm-tf writes no MultiRNNCell/Cell{l} level for a single-layer LSTM (`flat`); AllenNLP's dumps have it."""
    if n_layers == 1 and flat:
        return f"RNN_{direction}/RNN/LSTMCell"
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_shapes(config, flat=False):
    """Every dataset the options call for, with its shape (`flat`: the single-layer layout without Cell0)."""
    d, F, P, H = config.char_embedding_dim, config.n_filters, config.projection_dim, config.lstm_dim
    shapes = {"char_embed": (261, d)}  # raw char ids 0..260, whatever n_characters says
    for i, (width, n) in enumerate(config.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, d, n)
        shapes[f"CNN/b_cnn_{i}"] = (n,)
    for k in range(config.n_highway):
        for name in ("transform", "carry"):
            shapes[f"CNN_high_{k}/W_{name}"] = (F, F)
            shapes[f"CNN_high_{k}/b_{name}"] = (F,)
    shapes["CNN_proj/W_proj"] = (F, P)
    shapes["CNN_proj/b_proj"] = (P,)
    for direction in range(2):
        for layer in range(config.n_layers):
            prefix = lstm_prefix(direction, layer, config.n_layers, flat)
            shapes[f"{prefix}/W_0"] = (2 * P, 4 * H)
            shapes[f"{prefix}/B"] = (4 * H,)
            shapes[f"{prefix}/W_P_0"] = (H, P)
    return shapes


def shape_problems(expected, found, what="dataset"):
    """Every way the arrays `found` (name -> shape) differ from `expected`, one sentence each."""
    problems = [
        f"missing {what} {name} (expected shape {shape})" for name, shape in expected.items() if name not in found
    ]
    problems += [
        f"{what} {name} has shape {tuple(found[name])}, expected {shape} from the options"
        for name, shape in expected.items()
        if name in found and tuple(found[name]) != shape
    ]
    problems += [
        f"unexpected {what} {name} {tuple(found[name])} (not called for by the options)"
        for name in found
        if name not in expected
    ]
    return problems


ORIGINAL_DEFAULTS = dict(
    cell_clip=3.0, proj_clip=3.0, use_skip_connections=True, activation="relu", max_characters_per_token=50
)  # what the published models use (options.json)


def options_from_shapes(shapes, source):
    """The options.json dict of the biLM whose datasets (names as in `expected_shapes`, either LSTM layout) have
    `shapes`; what weights cannot say takes the Original's values (`ORIGINAL_DEFAULTS`), logged as such."""
    try:
        n_filters = sum(1 for name in shapes if name.startswith("CNN/W_cnn_"))
        filters = [[int(shapes[f"CNN/W_cnn_{i}"][1]), int(shapes[f"CNN/W_cnn_{i}"][3])] for i in range(n_filters)]
        lstm = sorted(name for name in shapes if name.startswith("RNN_0/") and name.endswith("/W_P_0"))
        dim, projection_dim = (int(n) for n in shapes[lstm[0]])
        options = {
            "lstm": {
                "dim": dim,
                "projection_dim": projection_dim,
                "n_layers": len(lstm),
                **{key: ORIGINAL_DEFAULTS[key] for key in ("cell_clip", "proj_clip", "use_skip_connections")},
            },
            "char_cnn": {
                "embedding": {"dim": int(shapes["char_embed"][1])},
                "filters": filters,
                "n_highway": sum(1 for name in shapes if name.endswith("/W_carry")),
                "n_characters": 262,
                "activation": ORIGINAL_DEFAULTS["activation"],
                "max_characters_per_token": ORIGINAL_DEFAULTS["max_characters_per_token"],
            },
        }
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise ConversionError(
            f"options_path not given, and the architecture cannot be inferred from the arrays of "
            f"{source} (missing or misshapen {e}): give the options file",
            argument="options_path",
        ) from e
    unsaid = ", ".join(f"{key}={json.dumps(value)}" for key, value in ORIGINAL_DEFAULTS.items())
    logger.warning(
        f"no options for {source}: architecture read from the weight shapes; not in the weights, so the "
        f"Original's values are used: {unsaid} (an options file overrides them)"
    )
    return options


def hdf5_shapes(weights_path):
    """name -> shape of every dataset in an HDF5 file, or ConversionError."""
    found = {}
    try:
        with h5py.File(weights_path, "r") as hdf5:
            hdf5.visititems(
                lambda name, obj: found.__setitem__(name, obj.shape) if isinstance(obj, h5py.Dataset) else None
            )
    except (OSError, RuntimeError, KeyError, ValueError) as e:
        raise ConversionError(f"cannot read {weights_path} as HDF5 (truncated or corrupt file?): {e}") from e
    return found


def read_weights(config, weights_path):
    """Read and check every dataset: a dict name -> float32 array, or ConversionError listing all problems.

    Names are returned in the nested layout (`RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/...`) whatever the file uses.
    """
    try:
        hdf5 = h5py.File(weights_path, "r")
    except OSError as e:
        raise ConversionError(f"cannot read {weights_path} as HDF5 (truncated or corrupt file?): {e}") from e
    with hdf5:
        found = {}

        def collect(name, obj):  # returns None so that visititems visits everything
            if isinstance(obj, h5py.Dataset):
                found[name] = obj.shape

        try:  # a file with damaged metadata opens, then fails here ("Object visitation failed")
            hdf5.visititems(collect)
            expected = expected_shapes(config, flat="RNN_0/RNN/MultiRNNCell" not in hdf5)
        except (RuntimeError, OSError, KeyError, ValueError) as e:
            raise ConversionError(f"cannot read the structure of {weights_path} (corrupt file?): {e}") from e
        problems = shape_problems(expected, found)
        for name in expected if not problems else ():  # unwritten datasets read as zeros of any size they claim
            dataset = hdf5[name]
            stored, size = dataset.id.get_storage_size(), dataset.size * dataset.dtype.itemsize
            if dataset.compression is None and stored < size:
                problems.append(f"dataset {name} stores {stored:,} of its {size:,} bytes (truncated or sparse file)")
        if problems:
            raise mismatch_error(weights_path, problems, "the options")
        check_floats(weights_path, {name: hdf5[name].dtype for name in expected})
        arrays = {}
        for name in expected:
            try:
                arrays[name] = np.asarray(hdf5[name][...], dtype=np.float32)
            except (OSError, ValueError, TypeError) as e:
                raise ConversionError(f"cannot read dataset {name} from {weights_path} (corrupt file?): {e}") from e
            if not np.isfinite(arrays[name]).all():
                raise ConversionError(f"dataset {name} in {weights_path} holds NaN or infinite values (corrupt file?)")
    return {
        name.replace("/RNN/LSTMCell/", "/RNN/MultiRNNCell/Cell0/LSTMCell/"): value for name, value in arrays.items()
    }


def check_floats(path, dtypes):
    """ConversionError naming the datasets of the HDF5 file `path` ({name: NumPy dtype}) not stored as floats: read as
    float32 they would give other weights than the model was trained with (an int64 dataset holds whole numbers)."""
    other = [f"{name} ({dtype})" for name, dtype in dtypes.items() if dtype.kind != "f"]
    if other:
        more = f" and {len(other) - 3:,} more" if len(other) > 3 else ""
        raise ConversionError(
            f"{path}: the datasets {', '.join(other[:3])}{more} are not stored as floats: ELMo's "
            "weights are floats; give the weight file the model was trained with (float32)"
        )


def tf_gates_to_ifgo(matrix, hidden):
    """TensorFlow's gate blocks i, j(=g), f, o along the last axis -> i, f, g, o."""
    i, g, f, o = np.split(matrix, [hidden, 2 * hidden, 3 * hidden], axis=-1)
    return np.concatenate([i, f, g, o], axis=-1)


def to_state_dict(config, arrays):
    """Map the original datasets onto ElmoModel's parameter names (see docs in modeling_elmo.py)."""
    H, P = config.lstm_dim, config.projection_dim
    state = {}
    char_embed = arrays["char_embed"]
    state["bilm.char_cnn.char_embedding.weight"] = np.concatenate([np.zeros_like(char_embed[:1]), char_embed])
    for i in range(len(config.filters)):
        state[f"bilm.char_cnn.convolutions.{i}.weight"] = arrays[f"CNN/W_cnn_{i}"][0].transpose(2, 1, 0)
        state[f"bilm.char_cnn.convolutions.{i}.bias"] = arrays[f"CNN/b_cnn_{i}"]
    for k in range(config.n_highway):  # transform rows over carry rows
        high = f"CNN_high_{k}"
        state[f"bilm.char_cnn.highways.{k}.weight"] = np.concatenate(
            [arrays[f"{high}/W_transform"].T, arrays[f"{high}/W_carry"].T]
        )
        state[f"bilm.char_cnn.highways.{k}.bias"] = np.concatenate(
            [arrays[f"{high}/b_transform"], arrays[f"{high}/b_carry"]]
        )
    state["bilm.char_cnn.projection.weight"] = arrays["CNN_proj/W_proj"].T
    state["bilm.char_cnn.projection.bias"] = arrays["CNN_proj/b_proj"]
    for layer in range(config.n_layers):
        directions = [f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell" for d in range(2)]
        kernels = [tf_gates_to_ifgo(arrays[f"{p}/W_0"], H) for p in directions]
        biases = [tf_gates_to_ifgo(arrays[f"{p}/B"], H) for p in directions]
        for b in biases:
            b[H : 2 * H] += 1.0  # TensorFlow's LSTMCell adds forget_bias=1.0 at run time
        state[f"bilm.layers.{layer}.input_weight"] = np.stack([k[:P] for k in kernels])
        state[f"bilm.layers.{layer}.state_weight"] = np.stack([k[P:] for k in kernels])
        state[f"bilm.layers.{layer}.bias"] = np.stack(biases)[:, None, :]
        state[f"bilm.layers.{layer}.projection_weight"] = np.stack([arrays[f"{p}/W_P_0"] for p in directions])
    return {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in state.items()}


def check_softmax(config, weight_shape, bias_shape, n_words, softmax_path, vocab_path):
    """ConversionError unless a softmax W [V, P], b [V] fits the biLM and the vocabulary of `n_words` lines."""
    if len(weight_shape) != 2 or tuple(bias_shape) != (weight_shape[0],):
        raise ConversionError(
            f"{softmax_path}: softmax/W must be [vocabulary, projection] and softmax/b "
            f"[vocabulary], got {tuple(weight_shape)} and {tuple(bias_shape)}"
        )
    if weight_shape[1] != config.projection_dim:
        raise ConversionError(
            f"{softmax_path}: softmax/W has {weight_shape[1]} columns, the biLM's projection "
            f"size is {config.projection_dim} (a softmax of another model?)"
        )
    if weight_shape[0] != n_words:
        raise ConversionError(
            f"{vocab_path} has {n_words:,} lines but {softmax_path}'s softmax/W has "
            f"{weight_shape[0]:,} rows: the vocabulary must be the softmax's, one word a line"
        )


def vocabulary_words(vocab_path):
    """The words of the vocabulary file `vocab_path` (one a line), or ConversionError naming the problem."""
    try:
        check_text_file(vocab_path)  # bounded lines: read_vocabulary reads it whole
        return read_vocabulary(vocab_path)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConversionError(f"cannot use the vocabulary {vocab_path}: {e}") from e


def read_softmax(config, softmax_path, vocab_path):
    """The published softmax and its vocabulary, checked against each other and the biLM: (W [V, P], b [V], words),
    or ConversionError naming the problem."""
    words = vocabulary_words(vocab_path)
    try:
        hdf5 = h5py.File(softmax_path, "r")
    except OSError as e:
        raise ConversionError(f"cannot read {softmax_path} as HDF5 (truncated or corrupt file?): {e}") from e
    with hdf5:
        missing = [name for name in ("softmax/W", "softmax/b") if not isinstance(hdf5.get(name), h5py.Dataset)]
        if missing:
            raise ConversionError(
                f"{softmax_path} lacks the datasets {missing}: a published softmax file holds the "
                "group softmax with W [vocabulary, projection] and b [vocabulary]"
            )
        weight, bias = hdf5["softmax/W"], hdf5["softmax/b"]
        check_softmax(config, weight.shape, bias.shape, len(words), softmax_path, vocab_path)
        check_floats(softmax_path, {"softmax/W": weight.dtype, "softmax/b": bias.dtype})
        weight, bias = np.asarray(weight[...], dtype=np.float32), np.asarray(bias[...], dtype=np.float32)
    if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
        raise ConversionError(f"{softmax_path} holds NaN or infinite values (corrupt file?)")
    return weight, bias, words


def check_published_file(key, path, options):
    """ConversionError unless `path` can be the `key` file ("options", "weights", "softmax" or "vocab") of the
    published model whose options.json is `options`: options that describe that model, weights and a softmax with its
    datasets and shapes, a vocabulary of UTF-8 text. Reads the HDF5 files' structure only. The message names the
    problem, not `path` (a download's temporary name)."""
    config = config_from_options(options)

    def refuse(what, problems=()):  # the first three problems, and how many more: one line
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3:,} more" if len(problems) > 3 else "")
        return ConversionError(f"{what}: {shown}" if shown else what)

    if key == "options":
        with open(path, "rb") as f:
            data = f.read()
        try:
            found = config_from_options(json.loads(data.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise refuse(f"not JSON, it begins {data[:40]!r}") from None
        except (ValueError, StrictDataclassError) as e:  # ConversionError: not the options layout; or a value
            # ElmoConfig refuses
            raise refuse(f"not an ELMo options.json: {first_line(e)}") from None
        found, published = (dict(flat_items(options_from_config(c))) for c in (found, config))
        problems = [
            f"{name} is {found[name]!r}, published {value!r}"
            for name, value in published.items()
            if found[name] != value
        ]
        if problems:
            raise refuse("the options of another model", problems)
        return
    if key == "vocab":
        try:
            check_text_file(path)  # bounded lines, as read_softmax reads a vocabulary
            read_vocabulary(path)
        except (UnicodeDecodeError, ValueError) as e:
            raise refuse(
                f"not a vocabulary of UTF-8 text, one word a line ({first_line(e)})".replace(str(path), "the file")
            ) from None
        return
    try:
        shapes = hdf5_shapes(path)
    except ConversionError:
        raise ConversionError("not an HDF5 file") from None
    if key == "weights":
        problems = shape_problems(expected_shapes(config), shapes)
        if problems:
            raise refuse("the weights of another model", problems)
    else:  # the softmax
        weight, bias = shapes.get("softmax/W"), shapes.get("softmax/b")
        if (
            weight is None
            or bias is None
            or len(weight) != 2
            or weight[1] != config.projection_dim
            or tuple(bias) != (weight[0],)
        ):
            raise refuse(
                f"expected the datasets softmax/W [vocabulary, {config.projection_dim}] and softmax/b "
                f"[vocabulary], found {', '.join(f'{n} {tuple(s)}' for n, s in shapes.items()) or 'none'}"
            )


def flat_items(options, prefix=""):
    """("lstm.dim", 4096), ... for every leaf of a nested options dict."""
    for name, value in options.items():
        if isinstance(value, dict):
            yield from flat_items(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def check_input_files(**paths):
    """Each path given (an argument of the call, by name) is an existing file: a missing one is named as such, not
    as a file that cannot be read as HDF5 or JSON."""
    for argument, path in paths.items():
        if isinstance(path, (str, os.PathLike)) and (os.path.isdir(path) or not os.path.exists(path)):
            why = "is a folder, not a file" if os.path.isdir(path) else "no such file"
            raise ConversionError(f"{argument} {path}: {why}", path, argument=argument)


def convert(options_path, weights_path, softmax_path=None, vocab_path=None, **config_kwargs):
    """Build an ElmoModel (and its tokenizer) holding the original weights; with `softmax_path` and `vocab_path`,
    an ElmoForLanguageModeling holding the published softmax too (tokenizer with that vocabulary). Without
    `options_path` the architecture comes from the dataset shapes (`options_from_shapes`)."""
    if (softmax_path is None) != (vocab_path is None):
        given, path, other = (
            ("softmax_path", softmax_path, "vocabulary")
            if vocab_path is None
            else ("vocab_path", vocab_path, "softmax weights")
        )
        raise ConversionError(
            f"{given} {path}: give the {other} too (the softmax rows are the vocabulary's words)", path, argument=given
        )
    check_input_files(
        options_path=options_path, weights_path=weights_path, softmax_path=softmax_path, vocab_path=vocab_path
    )
    options = (
        options_path
        if options_path is not None
        else options_from_shapes(
            {
                name.replace("/RNN/LSTMCell/", "/RNN/MultiRNNCell/Cell0/LSTMCell/"): shape
                for name, shape in hdf5_shapes(weights_path).items()
            },
            weights_path,
        )
    )
    try:
        config = config_from_options(options, **config_kwargs)
    except (OSError, ValueError, StrictDataclassError) as e:
        raise ConversionError(f"invalid options {options_path}: {first_line(e)}") from e
    softmax = None if softmax_path is None else read_softmax(config, softmax_path, vocab_path)
    state = to_state_dict(config, read_weights(config, weights_path))  # checked against the options first
    return build_model(config, state, softmax, vocab_path)


def build_model(config, state, softmax=None, vocab_path=None):
    """The converted model and its tokenizer from a state dict of `to_state_dict` (plus any scalar mix): ElmoModel,
    or with `softmax` = (W, b, words) read from `vocab_path` the language model."""
    if softmax is None:
        model = ElmoModel(config)
        tokenizer = ElmoTokenizer(max_characters_per_token=config.max_characters_per_token)
    else:
        weight, bias, words = softmax
        index = {w: i for i, w in enumerate(words)}
        config.lm_vocab_size = len(words)
        config.bos_token_id, config.eos_token_id = index[BOS_WORD], index[EOS_WORD]
        model = ElmoForLanguageModeling(config)
        tokenizer = ElmoTokenizer(vocab_file=str(vocab_path), max_characters_per_token=config.max_characters_per_token)
        state = {f"elmo.{name}": value for name, value in state.items()}
        state["lm_softmax.weight"], state["lm_softmax.bias"] = torch.from_numpy(weight), torch.from_numpy(bias)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Only scalar mixes the source lacks (all but TF-Hub's) are new: they keep their initialisation.
    if unexpected or any("scalar_mixes." not in name for name in missing):
        raise ConversionError(f"internal mapping error: missing {missing}, unexpected {unexpected}")
    return model.eval(), tokenizer


def write_random_weights(config, path, seed=0, scale=1.0, flat=False):
    """Write a weight file in the exact original layout with random values (for tests and benchmarks).

    `scale` multiplies Glorot-sized values; around 3 makes cell and projection clipping happen, as in the fixtures.
    """
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for name, shape in expected_shapes(config, flat).items():
            fan = sum(shape[-2:]) if len(shape) > 1 else shape[0]
            f[name] = (rng.standard_normal(shape) * scale * (2.0 / fan) ** 0.5).astype(np.float32)
