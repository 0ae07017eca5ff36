"""`elmo-transformers demo`, the README's first command: with one sentence, with none and with the user's own
sentences it shows one word's uses, and the similarities it prints are the cosines of the model's ELMo vectors."""

import logging
import re

import pytest
import torch
from conftest import SHIPPED

from elmo_transformers.cli import demo
from elmo_transformers.demo.senses import EXAMPLES
from modeling_elmo import ElmoModel
from tokenization_elmo import ElmoTokenizer


@pytest.fixture(scope="module")
def shipped():
    return ElmoModel.from_pretrained(SHIPPED).eval(), ElmoTokenizer.from_pretrained(SHIPPED)


def run(argv, capsys, caplog, recwarn):
    with caplog.at_level(logging.WARNING):
        demo.main(argv)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "the demo must print no warnings"
    assert not [w for w in recwarn if not issubclass(w.category, DeprecationWarning)], [str(w) for w in recwarn]
    return capsys.readouterr().out


def printed_pairs(out):
    return {(int(a), int(b)): float(v) for a, b, v in re.findall(r"\[(\d)\] and \[(\d)\]: ([\d.]+)", out)}


@pytest.mark.slow
def test_default_examples_show_bank_in_two_senses(shipped, capsys, caplog, recwarn):
    out = run([], capsys, caplog, recwarn)
    assert 'The word "bank" in 4 places' in out
    pairs = printed_pairs(out)
    assert len(pairs) == 6
    model, tokenizer = shipped
    with torch.no_grad():
        vectors = [
            model(**tokenizer([s], return_tensors="pt")).last_hidden_state[0, s.split().index("bank")] for s in EXAMPLES
        ]
    for (a, b), value in pairs.items():
        assert abs(torch.cosine_similarity(vectors[a - 1], vectors[b - 1], dim=0).item() - value) <= 0.005 + 1e-4
    assert "Grouped by ELMo" in out and "every pair scores 1.00" in out


def test_one_sentence_adds_the_examples(capsys, caplog, recwarn):
    out = run(["The cat sat on the mat ."], capsys, caplog, recwarn)  # the README's own example
    assert "adding the built-in examples" in out and 'The word "bank" in 4 places' in out


def test_the_users_word_is_chosen(capsys, caplog, recwarn):
    out = run(["The children play in the garden .", "We saw a play at the theatre ."], capsys, caplog, recwarn)
    assert 'The word "play" in 2 places' in out and "adding" not in out
    assert len(printed_pairs(out)) == 1 and "Grouped" not in out
