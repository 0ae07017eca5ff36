import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_NAMES = ["allennlp-tiny", "allennlp-tiny-edge"]
SHIPPED = REPO / "elmo_transformers" / "models" / "elmo-en-small"  # the default model, as the checkout has it


def command(*args):
    """The `elmo-transformers` command line of this checkout, for subprocess.run / Popen (env: `command_env()`)."""
    return [sys.executable, "-m", "elmo_transformers", *map(str, args)]


def command_env(**variables):
    """A subprocess environment that runs this checkout's code, never an installed copy (the repository root comes
    first on the path), offline."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "research")]), HF_HUB_OFFLINE="1",
                **variables)


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
    from elmo_transformers.conversion.output import save_atomically
    from elmo_transformers.conversion.allennlp import convert

    folder = FIXTURES / "allennlp-tiny"
    model, tokenizer = convert(folder / "options.json", folder / "weights.hdf5")
    return save_atomically(model, tokenizer, tmp_path_factory.mktemp("converted") / "tiny")


@pytest.fixture(scope="session")
def tiny(tiny_model_dir):
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    return ElmoModel.from_pretrained(tiny_model_dir).eval(), ElmoTokenizer.from_pretrained(tiny_model_dir)


LM_FIXTURE = FIXTURES / "allennlp-lm-tiny"  # a biLM with AllenNLP's published softmax format, and AllenNLP's scores


def convert_lm_fixture(output, softmax=LM_FIXTURE / "softmax.hdf5", vocab=LM_FIXTURE / "vocab.txt", extra=()):
    """`elmo-transformers convert allennlp` of the LM fixture with its softmax; the exit code."""
    from elmo_transformers.cli import main

    return main(["convert", "allennlp", "--options", str(LM_FIXTURE / "options.json"), "--weights",
                 str(LM_FIXTURE / "weights.hdf5"), "--output", str(output), "--softmax-weights", str(softmax),
                 "--vocab", str(vocab), *map(str, extra)])


@pytest.fixture(scope="session")
def lm_dir(tmp_path_factory):
    """The LM fixture converted with its softmax (ElmoForLanguageModeling), read-only for the tests."""
    folder = tmp_path_factory.mktemp("lm") / "converted"
    assert convert_lm_fixture(folder) == 0
    return folder


TOKEN_LABELS = ["O", "B-X", "I-X"]


@pytest.fixture(scope="session")
def tiny_heads_dir(tiny_model_dir, tmp_path_factory):
    """A token head (labels TOKEN_LABELS) and a sequence head (negative/positive) on the tiny converted model, with
    seeded random classifiers, saved as `token/` and `sequence/` with the tokenizer (as fine-tuning saves them)."""
    import torch

    from modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification
    from tokenization_elmo import ElmoTokenizer

    root = tmp_path_factory.mktemp("heads")
    token = ElmoForTokenClassification.from_pretrained(
        tiny_model_dir, id2label=dict(enumerate(TOKEN_LABELS)),
        label2id={label: i for i, label in enumerate(TOKEN_LABELS)}
    )
    sequence = ElmoForSequenceClassification.from_pretrained(
        tiny_model_dir, id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1}
    )
    torch.manual_seed(0)
    with torch.no_grad():  # sharp predictions, with runs of I-X (multi-word entity groups)
        token.classifier.weight.normal_(std=3.0)
        token.classifier.bias.copy_(torch.tensor([0.0, 0.0, 1.0]))
        sequence.classifier.weight.normal_(std=3.0)
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    for name, model in (("token", token), ("sequence", sequence)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root


@pytest.fixture
def fake_hub(monkeypatch):
    """HfApi's create_repo and upload_folder replaced by recorders, so that a push runs without a network. Returns
    the dict they fill: "create_repo" (repo id, keyword arguments), "upload_folder" (keyword arguments), "files" (the
    uploaded folder's names) and "readme" (its README.md, read before the push removes a temporary folder)."""
    from huggingface_hub import HfApi

    calls = {}

    def create_repo(self, repo_id, **kwargs):
        calls["create_repo"] = (repo_id, kwargs)
        return f"https://huggingface.co/{'spaces/' if kwargs.get('repo_type') == 'space' else ''}{repo_id}"

    def upload_folder(self, **kwargs):
        folder = kwargs["folder_path"]
        readme = os.path.join(folder, "README.md")
        calls.update(upload_folder=kwargs, files=sorted(os.listdir(folder)),
                     readme=Path(readme).read_text(encoding="utf-8") if os.path.exists(readme) else None)

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    return calls
