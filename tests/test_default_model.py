"""The shipped default model (elmo_transformers/models/elmo-en-small) loads offline, through the Auto classes, in a
fresh process."""

import json
import textwrap

import pytest

from conftest import REPO, run_isolated, SHIPPED as MODEL

from configuration_elmo import ELMO_MODULES

CHILD = textwrap.dedent(
    """
    import json, sys, torch
    for name in ELMO_MODULES:
        sys.modules[name] = None  # only the folder's own code may be used
    from transformers import AutoModel, AutoModelForPreTraining, AutoTokenizer

    folder = sys.argv[1]
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    lm = AutoModelForPreTraining.from_pretrained(folder, trust_remote_code=True).eval()
    sentences = [["He", "sat", "on", "the", "bank", "of", "the", "river", "."],
                 ["She", "put", "the", "money", "in", "the", "bank", "."]]
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True, output_attentions=False)
        again = model(**batch, output_hidden_states=True)
        lm_out = lm(**batch)
    bank = [torch.cosine_similarity(h[0, 4], h[1, 6], dim=0).item() for h in out.hidden_states]
    print(json.dumps({
        "dtypes": sorted({str(p.dtype) for p in model.parameters()}),
        "shape": list(out.last_hidden_state.shape),
        "deterministic": torch.equal(out.last_hidden_state, again.last_hidden_state),
        "bank_cosine_per_layer": bank,
        "lm_logits": list(lm_out.forward_logits.shape),
        "vocab": tokenizer.vocab_size,
    }))
    """
).replace("ELMO_MODULES", repr(ELMO_MODULES))


@pytest.mark.slow
def test_default_model_loads_offline_in_a_fresh_process(tmp_path):
    result = run_isolated(CHILD, MODEL, folder=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    # The LM checkpoint's word softmax is left out of AutoModel on purpose: no load report, no warning.
    assert "LOAD REPORT" not in result.stderr and "UNEXPECTED" not in result.stderr, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    config = json.loads((MODEL / "config.json").read_text())
    assert got["dtypes"] == ["torch.float32"]  # stored in bf16, restored to fp32 on load
    assert got["shape"] == [2, 9, 2 * config["projection_dim"]] and got["deterministic"]
    assert got["vocab"] == config["lm_vocab_size"] and got["lm_logits"] == [2, 10, config["lm_vocab_size"]]
    # Layer 0 is context-free: the same word has the same vector; the LSTM layers see the two contexts.
    assert abs(got["bank_cosine_per_layer"][0] - 1.0) < 1e-5
    assert max(got["bank_cosine_per_layer"][1:]) < 0.99


def test_default_model_is_small_and_documented():
    weights = MODEL / "model.safetensors"
    assert weights.stat().st_size < 25 * 2**20
    card = (MODEL / "README.md").read_text(encoding="utf-8")
    for fragment in ("perplexity", "bigram", "ROC AUC", "reproduce_default_model.sh"):
        assert fragment in card


def test_default_model_code_is_the_repository_code():
    """Remote code needs the modules in the folder: there they are git symlinks to the one copy at the root."""
    for name in (f"{module}.py" for module in ELMO_MODULES):
        link = MODEL / name
        assert link.is_symlink() and link.resolve() == REPO / name, f"{MODEL}/{name} is not a link"


def test_the_installed_modules_are_the_model_modules():
    """pyproject.toml installs the root modules as top-level modules: the same list as ELMO_MODULES, and the console
    entry point (outside the package so that --help does not wait for its import)."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert tuple(project["tool"]["setuptools"]["py-modules"]) == (*ELMO_MODULES, "elmo_transformers_cli")
    assert project["project"]["scripts"] == {"elmo-transformers": "elmo_transformers_cli:main"}


def test_pyproject_installs_every_subpackage():
    """pyproject.toml lists the packages by hand: every folder of elmo_transformers with an __init__.py is one of
    them, or the installed package misses it while the checkout (and an editable install) works."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    inits = (REPO / "elmo_transformers").rglob("__init__.py")
    found = {".".join(init.parent.relative_to(REPO).parts) for init in inits}
    assert set(project["tool"]["setuptools"]["packages"]) == found


@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_save_pretrained_keeps_the_loaded_dtype(tmp_path, dtype):
    """transformers' rule, as documented in the README: the shipped bf16 weights load as config.json's dtype
    (float32) and save_pretrained writes what was loaded, the same values (bf16 widens to float32 exactly); loaded
    with dtype=torch.bfloat16 it writes bf16 weights identical to the shipped ones, and the config says so."""
    import torch
    from safetensors import safe_open

    from modeling_elmo import ElmoForLanguageModeling

    kwargs = {"dtype": getattr(torch, dtype)} if dtype else {}
    ElmoForLanguageModeling.from_pretrained(MODEL, **kwargs).save_pretrained(tmp_path)
    want = dtype or "float32"
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == want
    with (
        safe_open(MODEL / "model.safetensors", "pt") as shipped,
        safe_open(tmp_path / "model.safetensors", "pt") as saved,
    ):
        assert sorted(saved.keys()) == sorted(shipped.keys())
        for key in shipped.keys():
            tensor = saved.get_tensor(key)
            assert tensor.dtype == getattr(torch, want), key
            assert torch.equal(tensor.float(), shipped.get_tensor(key).float()), key


def test_the_cards_fill_mask_example_quotes_the_model():
    """The card's fill-mask figures are the model's: rerun here by the script that makes them, each within the
    rounding of its three decimals."""
    import re

    from card_fill_mask_example import SHOWN, top_words

    card = (MODEL / "README.md").read_text(encoding="utf-8")
    line = re.search(r"from both directions \(((?:\w+ [0-9.]+, ){%d})\.\.\." % SHOWN, card)
    assert line, "the card's fill-mask example is not where this test reads it"
    quoted = [(word, float(score)) for word, score in re.findall(r"(\w+) ([0-9.]+)", line.group(1))]
    got = top_words(MODEL)
    assert [word for word, _ in quoted] == [word for word, _ in got]
    for (word, figure), (_, score) in zip(quoted, got):
        assert abs(figure - score) <= 0.0005 + 1e-5, f"{word}: the card says {figure}, the model gives {score:.4f}"
