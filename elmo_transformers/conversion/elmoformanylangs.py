"""Convert an ELMoForManyLangs (HIT-SCIR) model folder into a Hub-ready ELMo folder.

    elmo-transformers convert elmoformanylangs MODEL_DIR --output DIR

MODEL_DIR is a folder as ELMoForManyLangs publishes it: config.json (naming the model config in `config_path`),
char.dic and word.dic, token_embedder.pkl and encoder.pkl. The model config is found as the package's `Embedder`
finds it: at `config_path` relative to MODEL_DIR, then by its file name in MODEL_DIR, then among the configs the
package ships (their contents are built in here); no file outside MODEL_DIR is read (a `config_path` that leaves it
is looked up by its file name, an absolute one is refused). The output folder is written by the same rules as every
converter (conversion/output.py): it appears only complete, and `overwrite` replaces only an earlier conversion.
"""

import copy
import json
import os

import torch
from huggingface_hub.errors import StrictDataclassError

from configuration_elmo import ElmoConfig
from modeling_elmo import ElmoModel
from tokenization_elmo import ElmoTokenizer

from ..errors import ConversionError, first_line
from ..model_folder import finite
from .output import mismatch_error

# The model configs shipped inside the elmoformanylangs package (configs/), used by all released models. Both files
# have the same contents (the "cnn_0" one also says char_dim 50).
_SHIPPED = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
SHIPPED_CONFIGS = {"cnn_50_100_512_4096_sample.json": _SHIPPED, "cnn_0_100_512_4096_sample.json": _SHIPPED}


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ConversionError(f"cannot read {path} as JSON: {e}") from e
    except RecursionError:
        raise ConversionError(f"cannot read {path} as JSON: it nests lists or objects too deeply") from None


def read_model_config(model_dir):
    """The model config named by MODEL_DIR/config.json, looked up in the package's order (module docstring)."""
    outer = read_json(os.path.join(model_dir, "config.json"))
    name = outer.get("config_path") if isinstance(outer, dict) else None
    if not isinstance(name, str):
        raise ConversionError(f"{model_dir}/config.json has no config_path (not an ELMoForManyLangs model folder?)")
    if os.path.isabs(name) or os.path.splitdrive(name)[0]:
        raise ConversionError(
            f"{model_dir}/config.json names the model config {name!r}, an absolute path: only files "
            "inside the model folder are read; copy that config into the folder and name it there"
        )
    # Only files inside the folder are read: a path that leaves it ("../configs/NAME", as the released folders name
    # the package's own configs) is looked up by its file name.
    inside = not os.path.normpath(name).startswith(os.pardir)
    for path in ([os.path.join(model_dir, name)] if inside else []) + [os.path.join(model_dir, os.path.basename(name))]:
        if os.path.isfile(path):
            return read_json(path)
    if os.path.basename(name) in SHIPPED_CONFIGS:
        return copy.deepcopy(SHIPPED_CONFIGS[os.path.basename(name)])
    raise ConversionError(
        f"the model config {name!r} named in {model_dir}/config.json is neither in the folder nor one the "
        f"elmoformanylangs package ships ({', '.join(SHIPPED_CONFIGS)}): copy it into {model_dir}"
    )


def elmo_config(model_config, **kwargs):
    """ElmoConfig fields from an ELMoForManyLangs model config (only the `cnn` token embedder and `elmo` encoder,
    which every released model uses). Vocabulary sizes and boundary rows are added by `convert`."""
    try:
        encoder, embedder = model_config["encoder"], model_config["token_embedder"]
        if encoder["name"].lower() != "elmo" or embedder["name"].lower() != "cnn":
            raise ConversionError(
                f"only the 'cnn' token embedder with the 'elmo' encoder (as in every released model) can be converted, "
                f"got {embedder['name']!r} and {encoder['name']!r}"
            )
        return dict(
            char_embedding_dim=embedder["char_dim"],
            filters=embedder["filters"],
            n_highway=embedder["n_highway"],
            activation=embedder["activation"],
            max_characters_per_token=embedder["max_characters_per_token"],
            word_embedding_dim=embedder["word_dim"],
            lstm_dim=encoder["dim"],
            projection_dim=encoder["projection_dim"],
            n_layers=encoder["n_layers"],
            # The package clips only when the value is truthy (0 or null: no clipping).
            cell_clip=encoder["cell_clip"] or None,
            proj_clip=encoder["proj_clip"] or None,
            use_skip_connections=True,  # its encoder always adds them
            **kwargs,
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise ConversionError(f"the model config lacks or mistypes {e} (expected the ELMoForManyLangs layout)") from e


def load_state_dict(path):
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means an unreadable file
        raise ConversionError(f"cannot read {path} as a torch state dict (truncated or corrupt file?): {e}") from e
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ConversionError(f"{path} does not hold a state dict of tensors")
    return {name: value.float() for name, value in state.items()}


def expected_shapes(config, char_rows, word_rows):
    """Every tensor of token_embedder.pkl and encoder.pkl the config calls for, with its shape."""
    F, P, H = config.n_filters, config.projection_dim, config.lstm_dim
    token, encoder = {}, {}
    if config.word_embedding_dim:
        token["word_emb_layer.embedding.weight"] = (word_rows, config.word_embedding_dim)
    if config.char_embedding_dim:
        token["char_emb_layer.embedding.weight"] = (char_rows, config.char_embedding_dim)
        for i, (width, n) in enumerate(config.filters):
            token[f"convolutions.{i}.weight"] = (n, config.char_embedding_dim, width)
            token[f"convolutions.{i}.bias"] = (n,)
        for k in range(config.n_highway):
            token[f"highways._layers.{k}.weight"] = (2 * F, F)
            token[f"highways._layers.{k}.bias"] = (2 * F,)
    token["projection.weight"] = (P, config.word_embedding_dim + (F if config.char_embedding_dim else 0))
    token["projection.bias"] = (P,)
    for layer in range(config.n_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            encoder[f"{prefix}.input_linearity.weight"] = (4 * H, P)
            encoder[f"{prefix}.state_linearity.weight"] = (4 * H, P)
            encoder[f"{prefix}.state_linearity.bias"] = (4 * H,)
            encoder[f"{prefix}.state_projection.weight"] = (P, H)
    return token, encoder


def check_tensors(state, expected, path):
    problems = [f"missing {name} (expected shape {shape})" for name, shape in expected.items() if name not in state]
    problems += [
        f"{name} has shape {tuple(state[name].shape)}, expected {shape} from the model config and vocabularies"
        for name, shape in expected.items()
        if name in state and tuple(state[name].shape) != shape
    ]
    problems += [f"unexpected {name} {tuple(state[name].shape)}" for name in state if name not in expected]
    problems += [
        f"{name} holds NaN or infinite values" for name in expected if name in state and not finite(state[name])
    ]
    if problems:
        raise mismatch_error(path, problems)


def with_zero_row(weight):
    """Our ids are the vocabulary's + 1, with 0 for "no word": row 0 is the padding row."""
    return torch.cat([weight.new_zeros(1, weight.shape[1]), weight])


def to_state_dict(config, token, encoder):
    """Map the package's parameter names onto ElmoModel's."""
    state = {}
    if config.word_embedding_dim:
        state["bilm.char_cnn.word_embedding.weight"] = with_zero_row(token["word_emb_layer.embedding.weight"])
    if config.char_embedding_dim:
        state["bilm.char_cnn.char_embedding.weight"] = with_zero_row(token["char_emb_layer.embedding.weight"])
        for i in range(len(config.filters)):
            for kind in ("weight", "bias"):
                state[f"bilm.char_cnn.convolutions.{i}.{kind}"] = token[f"convolutions.{i}.{kind}"]
        F = config.n_filters
        for k in range(config.n_highway):
            # Its highway computes gate * x + (1 - gate) * relu(transform) with gate = sigmoid(second half); ours
            # carries relu(transform) with sigmoid(carry): carry = 1 - gate, i.e. the gate rows negated.
            for kind in ("weight", "bias"):
                value = token[f"highways._layers.{k}.{kind}"]
                state[f"bilm.char_cnn.highways.{k}.{kind}"] = torch.cat([value[:F], -value[F:]])
    state["bilm.char_cnn.projection.weight"] = token["projection.weight"]  # columns: word vector, then char CNN
    state["bilm.char_cnn.projection.bias"] = token["projection.bias"]
    for layer in range(config.n_layers):
        cells = [f"{direction}_layer_{layer}" for direction in ("forward", "backward")]
        # Gate blocks are i, f, g, o in both; the forget bias is already in the stored bias (no +1 at run time).
        state[f"bilm.layers.{layer}.input_weight"] = torch.stack(
            [encoder[f"{c}.input_linearity.weight"].T for c in cells]
        )
        state[f"bilm.layers.{layer}.state_weight"] = torch.stack(
            [encoder[f"{c}.state_linearity.weight"].T for c in cells]
        )
        state[f"bilm.layers.{layer}.bias"] = torch.stack([encoder[f"{c}.state_linearity.bias"] for c in cells])[:, None]
        state[f"bilm.layers.{layer}.projection_weight"] = torch.stack(
            [encoder[f"{c}.state_projection.weight"].T for c in cells]
        )
    return {name: value.contiguous() for name, value in state.items()}


def convert(model_dir, segmenter="whitespace", opencc_config=None, **config_kwargs):
    """Build an ElmoModel and its (character-vocabulary) tokenizer holding an ELMoForManyLangs model; the tokenizer
    splits raw text with `segmenter` (and converts it with `opencc_config`), as the model's training text was."""
    fields = elmo_config(read_model_config(model_dir), **config_kwargs)
    files = {}
    for kind, dim in (("char", fields["char_embedding_dim"]), ("word", fields["word_embedding_dim"])):
        if dim:
            files[kind] = os.path.join(model_dir, f"{kind}.dic")
    try:
        tokenizer = ElmoTokenizer(
            max_characters_per_token=fields["max_characters_per_token"],
            char_vocab_file=files.get("char"),
            word_vocab_file=files.get("word"),
            segmenter=segmenter,
            opencc_config=opencc_config,
        )
    except (OSError, ValueError, TypeError) as e:
        raise ConversionError(f"cannot make the tokenizer of {model_dir}: {e}") from e
    sizes = {
        kind: len(vocab) for kind, vocab in (("char", tokenizer.char_vocab), ("word", tokenizer.word_vocab)) if vocab
    }
    for kind, vocab in (("char", tokenizer.char_vocab), ("word", tokenizer.word_vocab)):
        bad = [t for t, i in (vocab or {}).items() if not 0 <= i < len(vocab)]
        if bad:
            raise ConversionError(
                f"{files[kind]}: ids must run from 0 to {len(vocab) - 1} (one per entry), see {bad[:3]}"
            )
    fields.update(char_vocab_size=sizes.get("char"), word_vocab_size=sizes.get("word"))
    fields["sentence_boundary_ids"] = [list(tokenizer.token_row("<bos>")), list(tokenizer.token_row("<eos>"))]
    try:
        config = ElmoConfig(**fields)
    except (ValueError, TypeError, StrictDataclassError) as e:
        raise ConversionError(f"invalid model config in {model_dir}: {first_line(e)}") from e
    token_path, encoder_path = (os.path.join(model_dir, name) for name in ("token_embedder.pkl", "encoder.pkl"))
    token, encoder = load_state_dict(token_path), load_state_dict(encoder_path)
    expected_token, expected_encoder = expected_shapes(config, sizes.get("char"), sizes.get("word"))
    check_tensors(token, expected_token, token_path)
    check_tensors(encoder, expected_encoder, encoder_path)
    model = ElmoModel(config)
    missing, unexpected = model.load_state_dict(to_state_dict(config, token, encoder), strict=False)
    if unexpected or any(not name.startswith("scalar_mixes.") for name in missing):
        raise ConversionError(f"internal mapping error: missing {missing}, unexpected {unexpected}")
    return model.eval(), tokenizer
