"""The converter with the published softmax (`--softmax-weights FILE --vocab FILE`): the folder is AllenNLP's language
model. Reference: tests/fixtures/allennlp-lm-tiny, made by make_lm_fixture.py with AllenNLP's `_ElmoBiLm` plus the
linear softmax, in the published file formats (lm_1b's vocabulary order: `</S>`, `<S>`, `<UNK>` first)."""

import h5py
import numpy as np
import pytest
import torch
from conftest import LM_FIXTURE as LM, convert_lm_fixture
from tolerance import assert_close_to_reference
from transformers import AutoModel, AutoModelForPreTraining, AutoTokenizer

from elmo_transformers.cli import main as cli_main
from modeling_elmo import ElmoForLanguageModeling, ElmoModel
from tokenization_elmo import ElmoTokenizer


@pytest.fixture(scope="module")
def reference():
    import json

    sentences = json.loads((LM / "sentences.json").read_text(encoding="utf-8"))
    return sentences, dict(np.load(LM / "expected.npz", allow_pickle=False))


def labels_for(tokenizer, sentences):
    """Each sentence's word ids then </S>, -100 after (the LM's labels), looked up by name in the vocabulary."""
    vocab = tokenizer.get_vocab()
    labels = torch.full((len(sentences), max(map(len, sentences)) + 1), -100)
    for i, words in enumerate(sentences):
        ids = [vocab.get(w, vocab["<UNK>"]) for w in words] + [vocab["</S>"]]
        labels[i, : len(ids)] = torch.tensor(ids)
    return labels


@pytest.mark.fidelity
@pytest.mark.parametrize("remote_code", [True, False])
def test_log_probs_and_nll_equal_allennlp(lm_dir, reference, remote_code):
    sentences, expected = reference
    if remote_code:
        model = AutoModelForPreTraining.from_pretrained(lm_dir, trust_remote_code=True).eval()
        tokenizer = AutoTokenizer.from_pretrained(lm_dir, trust_remote_code=True)
    else:
        model, tokenizer = ElmoForLanguageModeling.from_pretrained(lm_dir).eval(), ElmoTokenizer.from_pretrained(lm_dir)
    assert type(model).__name__ == "ElmoForLanguageModeling" and model.config.lm_vocab_size == 32
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch)
        forward_states, backward_states, _ = model.lm_states(**batch)
        scored = model(**batch, labels=labels_for(tokenizer, sentences))
    for i, n in enumerate(expected["n_tokens"]):
        for direction, got_logits, states in (
            ("forward", logits.forward_logits, forward_states),
            ("backward", logits.backward_logits, backward_states),
        ):
            want = expected[f"{direction}_log_probs"][i, : n + 1]
            assert_close_to_reference(torch.log_softmax(got_logits[i, : n + 1], -1), want, what=f"{direction} {i}")
            assert_close_to_reference(model.lm_log_probs(states[i, : n + 1]), want, what=f"{direction} {i} chunked")
        assert_close_to_reference(scored.forward_nll[i], expected["forward_nll"][i], what=f"forward NLL {i}")
        assert_close_to_reference(scored.backward_nll[i], expected["backward_nll"][i], what=f"backward NLL {i}")
    # The NLL labels are the fixture's targets: ids found by name, <S> is line 1 and </S> line 0 of this vocabulary.
    np.testing.assert_array_equal(
        labels_for(tokenizer, sentences).numpy(), expected["forward_targets"][:, : batch["input_ids"].shape[1] + 1]
    )
    count = expected["n_tokens"] + 1
    assert torch.equal(scored.num_predictions, torch.as_tensor(count))
    assert_close_to_reference(
        scored.loss, (expected["forward_nll"].sum() + expected["backward_nll"].sum()) / (2 * count.sum())
    )


def test_special_words_are_found_by_name_on_any_line(tmp_path, reference):
    """The same model with the vocabulary (and softmax rows) shuffled: <S>, </S>, <UNK> in the middle of the file.
    Every log-probability moves with its word and the NLL is unchanged."""
    sentences, expected = reference
    words = (LM / "vocab.txt").read_text(encoding="utf-8").splitlines()
    order = np.array([*range(len(words) - 1, 16, -1), 2, 1, *range(3, 17), 0])  # <UNK>, <S> mid-file, </S> last
    with h5py.File(LM / "softmax.hdf5") as f:
        weight, bias = f["softmax/W"][...], f["softmax/b"][...]
    with h5py.File(tmp_path / "softmax.hdf5", "w") as f:
        f["softmax/W"], f["softmax/b"] = weight[order], bias[order]
    (tmp_path / "vocab.txt").write_text("".join(words[i] + "\n" for i in order), encoding="utf-8")
    assert convert_lm_fixture(tmp_path / "lm", tmp_path / "softmax.hdf5", tmp_path / "vocab.txt") == 0
    model = ElmoForLanguageModeling.from_pretrained(tmp_path / "lm").eval()
    tokenizer = ElmoTokenizer.from_pretrained(tmp_path / "lm")
    assert model.config.bos_token_id == order.tolist().index(1) and tokenizer.bos_token_id == model.config.bos_token_id
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
        scored = model(**batch, labels=labels_for(tokenizer, sentences))
    n = expected["n_tokens"][0]
    assert_close_to_reference(
        torch.log_softmax(out.backward_logits[0, : n + 1], -1), expected["backward_log_probs"][0, : n + 1][:, order]
    )
    assert_close_to_reference(scored.forward_nll, expected["forward_nll"])
    assert_close_to_reference(scored.backward_nll, expected["backward_nll"])


def test_folder_loads_as_the_bilm_without_a_warning(lm_dir, reference, capfd):
    from transformers.utils import logging

    logging.set_verbosity_warning()
    capfd.readouterr()
    bilm = AutoModel.from_pretrained(lm_dir, trust_remote_code=True)
    native = ElmoModel.from_pretrained(lm_dir)
    err = capfd.readouterr().err
    assert type(bilm).__name__ == "ElmoModel" and "lm_softmax" not in err and "UNEXPECTED" not in err, err
    lm = ElmoForLanguageModeling.from_pretrained(lm_dir)
    for name, value in native.state_dict().items():
        assert torch.equal(value, lm.elmo.state_dict()[name]), name


def corrupt_softmax(path, **datasets):
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            f[name] = value


@pytest.mark.parametrize(
    "case, match",
    [
        ("short vocabulary", "has 31 lines but .* has 32 rows"),
        ("wrong projection", "has 7 columns, the biLM's projection size is 8"),
        ("no <UNK>", r"lacks the words \['<UNK>'\]"),
        ("no softmax/b", r"lacks the datasets \['softmax/b'\]"),
        ("other layout", r"lacks the datasets \['softmax/W', 'softmax/b'\]"),
        ("word twice", "lists the word 'the' twice"),
        (
            "vocab alone",
            r"^error: --vocab \S+/vocab.txt: give the softmax weights too \(the softmax rows are the "
            r"vocabulary's words\)$",
        ),
    ],
)
def test_refusals_are_one_line_and_write_nothing(tmp_path, capsys, case, match):
    words = (LM / "vocab.txt").read_text(encoding="utf-8").splitlines()
    with h5py.File(LM / "softmax.hdf5") as f:
        weight, bias = f["softmax/W"][...], f["softmax/b"][...]
    softmax, vocab = tmp_path / "softmax.hdf5", tmp_path / "vocab.txt"
    if case == "short vocabulary":
        words = words[:-1]
    elif case == "wrong projection":
        corrupt_softmax(softmax, **{"softmax/W": weight[:, :7], "softmax/b": bias})
    elif case == "no <UNK>":
        words[words.index("<UNK>")] = "unk"
    elif case == "no softmax/b":
        corrupt_softmax(softmax, **{"softmax/W": weight})
    elif case == "other layout":
        corrupt_softmax(softmax, W=weight, b=bias)
    elif case == "word twice":
        words[-1] = "the"
    if not softmax.exists():
        corrupt_softmax(softmax, **{"softmax/W": weight, "softmax/b": bias})
    vocab.write_text("".join(w + "\n" for w in words), encoding="utf-8")
    output = tmp_path / "out"
    if case == "vocab alone":
        code = cli_main(
            [
                "convert",
                "allennlp",
                "--options",
                str(LM / "options.json"),
                "--weights",
                str(LM / "weights.hdf5"),
                "--output",
                str(output),
                "--vocab",
                str(vocab),
            ]
        )
    else:
        code = convert_lm_fixture(output, softmax, vocab)
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    import re

    assert re.search(match, err), err
    assert not output.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["softmax.hdf5", "vocab.txt"]


def test_the_converter_names_its_arguments_to_a_python_caller():
    """The library names `vocab_path`, where the command (above) names --vocab."""
    from elmo_transformers.conversion.allennlp import convert
    from elmo_transformers.errors import ConversionError

    vocab = LM / "vocab.txt"
    with pytest.raises(ConversionError) as refused:
        convert(LM / "options.json", LM / "weights.hdf5", vocab_path=vocab)
    assert (
        str(refused.value) == f"vocab_path {vocab}: give the softmax weights too (the softmax rows are the "
        "vocabulary's words)"
    )


@pytest.mark.fidelity
def test_perplexity_command_equals_allennlp(lm_dir, reference, tmp_path):
    """`elmo-transformers perplexity` on the fixture sentences: exp of AllenNLP's summed NLL per prediction."""
    import json
    import math

    sentences, expected = reference
    text = tmp_path / "sentences.txt"
    text.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    assert (
        cli_main(
            [
                "perplexity",
                "--model",
                str(lm_dir),
                "--max-words",
                "100",
                "--batch-size",
                "3",
                "--output",
                str(tmp_path / "ppl.json"),
                str(text),
            ]
        )
        == 0
    )
    got = json.loads((tmp_path / "ppl.json").read_text())[str(text)]
    count = (expected["n_tokens"] + 1).sum()
    forward = math.exp(expected["forward_nll"].astype(np.float64).sum() / count)
    backward = math.exp(expected["backward_nll"].astype(np.float64).sum() / count)
    assert got["words"] == expected["n_tokens"].sum()
    assert_close_to_reference(
        [got["forward_perplexity"], got["backward_perplexity"], got["perplexity"]],
        [forward, backward, (forward + backward) / 2],
    )
