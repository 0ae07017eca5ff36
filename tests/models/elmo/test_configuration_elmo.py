"""ElmoConfig: every field is validated by name at construction (wrong types, out-of-range and non-finite values,
inconsistent vocabulary fields) with huggingface_hub's `@strict` errors, as transformers' own configs are, and the
AllenNLP options.json round trip keeps every field."""

import ast
import json
import re
import shutil

import pytest
from conftest import FIXTURES, REPO, one_line, run
from huggingface_hub.errors import StrictDataclassError

from configuration_elmo import ElmoConfig


@pytest.mark.parametrize(
    "field, value",
    [
        ("activation", "gelu"),
        ("n_characters", 300),
        ("filters", [[60, 4]]),
        ("lstm_dim", 0),
        ("cell_clip", -1.0),
        ("dropout", 1.5),
        ("scalar_mix_parameters", [0.0]),
        ("max_characters_per_token", 2),
    ],
)
def test_invalid_config_is_named(field, value):
    with pytest.raises(StrictDataclassError, match=field):
        ElmoConfig(**{field: value})


@pytest.mark.parametrize(
    "field, value",
    [
        ("use_skip_connections", "false"),
        ("do_layer_norm", 0),
        ("cell_clip", float("nan")),
        ("proj_clip", float("-inf")),
        ("mix_l2_lambda", float("nan")),
        ("scalar_mix_parameters", [0.0, float("nan"), 0.0]),
        ("scalar_mix_parameters", ["1", 0, 0]),
        ("filters", 5),
        ("filters", [[1, 2, 3]]),
        ("dropout", float("nan")),
    ],
)
def test_config_refuses_wrong_types_and_non_finite_numbers(field, value):
    with pytest.raises(StrictDataclassError, match=field):
        ElmoConfig(**{field: value})


@pytest.mark.parametrize(
    "fields, fragment",
    [
        (dict(word_vocab_size=10), "word_vocab_size and word_embedding_dim"),
        (dict(char_embedding_dim=0), "char_embedding_dim is 0"),
        (dict(char_vocab_size=10), "sentence_boundary_ids"),
        (dict(char_vocab_size=10, sentence_boundary_ids=[[1] * 50, [2] * 49]), "sentence_boundary_ids"),
        (dict(sentence_boundary_ids=[[1] * 50, [2] * 50]), "only for a character vocabulary"),
        (dict(word_vocab_size=10, word_embedding_dim=-1), "word_embedding_dim"),
    ],
)
def test_config_refuses_inconsistent_vocabulary_fields(fields, fragment):
    with pytest.raises(StrictDataclassError, match=fragment):
        ElmoConfig(**fields)


def test_round_trip_through_options():
    from elmo_transformers.conversion.allennlp import config_from_options, options_from_config

    config = config_from_options(FIXTURES / "allennlp-tiny" / "options.json")
    assert config_from_options(options_from_config(config)).to_dict() == config.to_dict()


def test_types_and_ranges_are_checked_on_assignment():
    """`@strict` checks a field's type when it is set, not only at construction, and the range is checked then too
    (a config edited in place, `config.lstm_dim = 10**12`, was accepted and failed much later), in one line naming
    the value and the range; also through the names transformers' configs share (`num_hidden_layers`)."""
    config = ElmoConfig(lstm_dim=12, projection_dim=5)
    for field, value in [
        ("lstm_dim", "12"),
        ("do_layer_norm", 1),
        ("dropout", "0.1"),
        ("task_encoder", "gru"),
        ("filters", [[1, "4"]]),
    ]:
        with pytest.raises(StrictDataclassError, match=f"for field '{field}'"):
            setattr(config, field, value)
    for field, value, message in [
        ("lstm_dim", 10**12, "ElmoConfig.lstm_dim must be an integer from 1 to 65,536, got 1000000000000"),
        ("lstm_dim", 0, "ElmoConfig.lstm_dim must be an integer from 1 to 65,536, got 0"),
        ("num_hidden_layers", 65, "ElmoConfig.n_layers must be an integer from 1 to 64, got 65"),
        ("dropout", 1.5, "ElmoConfig.dropout must be in [0, 1), got 1.5"),
        ("mix_l2_lambda", -1, "ElmoConfig.mix_l2_lambda must be a non-negative finite number, got -1"),
        (
            "cell_clip",
            float("inf"),
            "ElmoConfig.cell_clip must be a positive finite number or None (no clipping), got inf",
        ),
    ]:
        with pytest.raises(ValueError) as refused:
            setattr(config, field, value)
        assert str(refused.value) == message
    assert (config.lstm_dim, config.n_layers, config.dropout, config.mix_l2_lambda) == (12, 2, 0.5, 0.0)  # unchanged
    with pytest.raises(ValueError, match=r"ElmoConfig.mix_l2_lambda must be a non-negative"):  # kwargs are assignments
        ElmoConfig.from_dict(config.to_dict(), mix_l2_lambda=-0.5)
    config.num_hidden_layers = 3
    assert config.n_layers == 3 and "num_hidden_layers" not in config.to_dict()


def test_the_names_transformers_configs_share_map_to_elmo_fields():
    """Generic code (PEFT, layer-wise learning rates) reads num_hidden_layers, hidden_size and vocab_size."""
    config = ElmoConfig(lstm_dim=12, projection_dim=5, n_layers=3, lm_vocab_size=40)
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (3, 10, 40)
    config.vocab_size = 50
    assert config.lm_vocab_size == 50


def test_a_pad_token_after_the_softmax_words_loads_without_a_warning(tmp_path, caplog):
    """`vocab_size` is the LM softmax's; `<pad>` and `<mask>` come after its words in the tokenizer's vocabulary,
    as in the shipped model. transformers' rule (a special id below `vocab_size`) warned on every load of it."""
    ElmoConfig(lstm_dim=12, projection_dim=5, lm_vocab_size=40, pad_token_id=40).save_pretrained(tmp_path)
    with caplog.at_level("WARNING"):
        config = ElmoConfig.from_pretrained(tmp_path)
    assert (config.pad_token_id, config.vocab_size) == (40, 40)
    assert "pad_token_id" not in caplog.text


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            dict(char_vocab_size=10, sentence_boundary_ids=[[1] * 49 + [11], [2] * 50]),
            "holds the id 11, beyond its vocabulary (ids 1 to 10",
        ),
        (
            dict(char_embedding_dim=0, word_vocab_size=7, word_embedding_dim=4, sentence_boundary_ids=[[8], [2]]),
            "holds the id 8, beyond its vocabulary (ids 1 to 7",
        ),
        (
            dict(
                char_vocab_size=10,
                word_vocab_size=7,
                word_embedding_dim=4,
                sentence_boundary_ids=[[1] * 51, [9] + [2] * 50],
            ),
            "holds the id 9, beyond its vocabulary (ids 1 to 7",
        ),
    ],
)
def test_sentence_boundary_ids_beyond_the_vocabularies_are_refused(fields, message):
    """Refused when the config is made, not at the first forward with an IndexError."""
    with pytest.raises(StrictDataclassError, match=re.escape(message)):
        ElmoConfig(lstm_dim=12, projection_dim=5, **fields)


def test_configuration_imports_neither_torch_nor_the_tokenizer():
    """configuration_elmo is the base of the model's modules: its own imports hold neither torch nor the tokenizer
    (transformers' PretrainedConfig may import torch where it is installed; that is transformers')."""
    tree = ast.parse((REPO / "configuration_elmo.py").read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"torch", "tokenization_elmo"}, imported
    with pytest.raises(ValueError, match="'banana' is not a torch dtype of floats"):
        ElmoConfig(dtype="banana")
    assert ElmoConfig(dtype="bfloat16").dtype is not None


def test_tuples_are_stored_as_lists():
    config = ElmoConfig(filters=((1, 4), (2, 8)), scalar_mix_parameters=(0.0, 1, 2.5), lstm_dim=12, projection_dim=5)
    assert config.filters == [[1, 4], [2, 8]] and config.scalar_mix_parameters == [0.0, 1, 2.5]
    assert ElmoConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("lstm_dim", "12", "Field 'lstm_dim' expected int, got str (value: '12')"),
        ("dropout", 1.5, "ElmoConfig.dropout must be in [0, 1), got 1.5"),
    ],
)
def test_a_config_json_value_refused_is_one_line_naming_it(tmp_path, tiny_model_dir, capsys, field, value, message):
    """A folder's config.json holding a value of the wrong type or out of range: the command's one line quotes
    what `@strict` refused (its cause, not only the header line of huggingface_hub's error)."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config[field] = value
    (folder / "config.json").write_text(json.dumps(config))
    (tmp_path / "in.txt").write_text("a cat .\n")
    code, err = run(["embed", tmp_path / "in.txt", tmp_path / "out.hdf5", "--model", folder, "--top"], capsys)
    assert one_line(code, err).endswith(f"cannot load it: {message}")
