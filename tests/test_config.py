"""ElmoConfig: every field is validated by name at construction (wrong types, out-of-range and non-finite values,
inconsistent vocabulary fields), and the AllenNLP options.json round trip keeps every field."""

import pytest
from conftest import FIXTURES

from configuration_elmo import ElmoConfig


@pytest.mark.parametrize(
    "field, value",
    [("activation", "gelu"), ("n_characters", 300), ("filters", [[60, 4]]), ("lstm_dim", 0),
     ("cell_clip", -1.0), ("dropout", 1.5), ("scalar_mix_parameters", [0.0]), ("max_characters_per_token", 2)],
)
def test_invalid_config_is_named(field, value):
    with pytest.raises(ValueError, match=field):
        ElmoConfig(**{field: value})


@pytest.mark.parametrize(
    "field, value",
    [("use_skip_connections", "false"), ("do_layer_norm", 0), ("cell_clip", float("nan")),
     ("proj_clip", float("-inf")), ("mix_l2_lambda", float("nan")), ("scalar_mix_parameters", [0.0, float("nan"), 0.0]),
     ("scalar_mix_parameters", ["1", 0, 0]), ("filters", 5), ("filters", [[1, 2, 3]]), ("dropout", float("nan"))],
)
def test_config_refuses_wrong_types_and_non_finite_numbers(field, value):
    with pytest.raises(ValueError, match=field):
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
    with pytest.raises(ValueError, match=fragment):
        ElmoConfig(**fields)


def test_round_trip_through_options():
    from elmo_transformers.conversion.allennlp import config_from_options, options_from_config

    config = config_from_options(FIXTURES / "allennlp-tiny" / "options.json")
    assert config_from_options(options_from_config(config)).to_dict() == config.to_dict()
