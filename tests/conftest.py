import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_NAMES = ["allennlp-tiny", "allennlp-tiny-edge"]


def load_fixture(name):
    """(sentences, expected arrays, options) of one AllenNLP reference fixture."""
    folder = FIXTURES / name
    sentences = json.loads((folder / "sentences.json").read_text(encoding="utf-8"))
    expected = dict(np.load(folder / "expected.npz", allow_pickle=False))
    options = json.loads((folder / "options.json").read_text())
    return sentences, expected, options


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """The allennlp-tiny fixture converted by the converter (both fixtures share these weights)."""
    from convert_allennlp_elmo import convert, save_atomically

    folder = FIXTURES / "allennlp-tiny"
    model, tokenizer = convert(folder / "options.json", folder / "weights.hdf5")
    return save_atomically(model, tokenizer, tmp_path_factory.mktemp("converted") / "tiny")


@pytest.fixture(scope="session")
def tiny(tiny_model_dir):
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    return ElmoModel.from_pretrained(tiny_model_dir).eval(), ElmoTokenizer.from_pretrained(tiny_model_dir)
