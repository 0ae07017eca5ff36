"""The fast paths: which GEMMs run, the char-CNN token cache, bf16, and the stateful (windowed) mode."""

import numpy as np
import pytest
import torch
from conftest import FIXTURES, load_fixture
from reference_elmo import load_hdf5, reference_sentence

import modeling_elmo
from tokenization_elmo import BOS_WORD, EOS_WORD, word_to_char_ids

WORDS = "the cat sat on the mat and the dog sat on the cat".split()


def encode(tokenizer, sentences):
    return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


def test_fixture_runs_through_the_fast_path(tiny, monkeypatch):
    """The fidelity fixture goes through one input GEMM per layer and block, state GEMMs at the shrinking batch size
    (padded steps never computed), the compiled LSTM cell, and one char CNN call over distinct words only."""
    model, tokenizer = tiny
    sentences, expected, _ = load_fixture("allennlp-tiny")
    enc = encode(tokenizer, sentences)
    lengths = sorted((len(s) + 2 for s in sentences), reverse=True)
    steps = lengths[0]
    gemm_rows, char_cnn_rows = [], []
    real_bmm, gates = torch.bmm, 4 * model.config.lstm_dim
    monkeypatch.setattr(torch, "bmm", lambda x, w: (w.shape[-1] == gates and gemm_rows.append(x.shape[1])) or real_bmm(x, w))
    model.bilm.char_cnn.register_forward_hook(lambda m, args, out: char_cnn_rows.append(args[0].shape[0]))
    monkeypatch.setattr(modeling_elmo, "GATES_BLOCK_ELEMENTS", 2 * len(sentences) * 4 * model.config.lstm_dim * 4)
    monkeypatch.setattr(modeling_elmo, "COMPILED_CELL_MIN_DIM", model.config.lstm_dim)
    cell_calls = []
    real_cell = modeling_elmo.compiled_lstm_cell
    monkeypatch.setattr(modeling_elmo, "compiled_lstm_cell", lambda *a: cell_calls.append(1) or real_cell(*a))
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    np.testing.assert_allclose(torch.stack(out.hidden_states).numpy(), expected["bilm_activations"], atol=1e-5, rtol=0)

    running = [sum(n > t for n in lengths) for t in range(steps)]
    per_layer = []
    for start in range(0, steps, 4):  # an input GEMM over each block of 4 steps, then that block's state GEMMs
        per_layer += [running[start] * len(running[start : start + 4])] + running[start : start + 4]
    assert gemm_rows == per_layer * model.config.n_layers
    assert len(cell_calls) == steps * model.config.n_layers
    assert modeling_elmo._compiled_cell is not modeling_elmo.lstm_cell, "torch.compile failed: eager fallback used"
    distinct = {tuple(row) for s, n in zip(enc["input_ids"].tolist(), map(len, sentences)) for row in s[:n]}
    assert char_cnn_rows == [len(distinct) + 2]  # + BOS and EOS


def test_token_cache_gives_same_numbers_without_char_cnn(tiny_model_dir):
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    model = ElmoModel.from_pretrained(tiny_model_dir).eval()
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    sentences = [WORDS, ["a", "dog", "unseen"]]
    enc = encode(tokenizer, sentences)
    with torch.no_grad():
        plain = model(**enc, output_hidden_states=True)
    model.cache_token_embeddings(sorted(set(WORDS)) + ["a", "dog"])
    rows = []
    model.bilm.char_cnn.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[0]))
    with torch.no_grad():
        cached = model(**enc, output_hidden_states=True)
    assert rows == [1]  # only "unseen" was encoded
    for a, b in zip(cached.hidden_states, plain.hidden_states):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    model.cache_token_embeddings(None)
    assert model.bilm.token_cache is None


def test_bf16_stays_close_to_fp32(tiny_model_dir, tiny):
    from modeling_elmo import ElmoModel

    model, tokenizer = tiny
    sentences, _, _ = load_fixture("allennlp-tiny")
    enc = encode(tokenizer, sentences)
    bf16 = ElmoModel.from_pretrained(tiny_model_dir, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        ref = torch.stack(model(**enc, output_hidden_states=True).hidden_states)
        out = torch.stack(bf16(**enc, output_hidden_states=True).hidden_states).float()
    real = enc["attention_mask"].bool()
    cos = torch.nn.functional.cosine_similarity(out[:, real], ref[:, real], dim=-1)
    assert cos.min() > 0.999


def test_windows_carry_state_like_one_long_sentence(tiny):
    """Window 2's forward LM continues window 1 exactly (= one sentence `w1..wk </S> <S> wk+1..`), its backward LM
    starts from window 1's backward final state (= the backward LM over `wk+1.. </S> <S> w1..wk`); NumPy reference."""
    model, tokenizer = tiny
    arrays = load_hdf5(FIXTURES / "allennlp-tiny" / "weights.hdf5")
    _, _, options = load_fixture("allennlp-tiny")
    ids = encode(tokenizer, [WORDS])["input_ids"]
    k = 5
    with torch.no_grad():
        windows = [torch.stack(out.hidden_states)[:, 0] for out in model.forward_windows(ids, k, output_hidden_states=True)]
        stateless = torch.stack(model(ids[:, :k], output_hidden_states=True).hidden_states)[:, 0]
    assert [w.shape[1] for w in windows] == [5, 5, 3]
    torch.testing.assert_close(windows[0], stateless, atol=0, rtol=0)

    chars = [word_to_char_ids(w) for w in WORDS]
    bos, eos = word_to_char_ids(BOS_WORD), word_to_char_ids(EOS_WORD)
    forward = reference_sentence(arrays, options, np.array(chars[:k] + [eos, bos] + chars[k : 2 * k]))
    backward = reference_sentence(arrays, options, np.array(chars[k : 2 * k] + [eos, bos] + chars[:k]))
    P = windows[1].shape[-1] // 2
    np.testing.assert_allclose(windows[1][1:, :, :P].numpy(), forward[1:, k + 2 :, :P], atol=1e-5, rtol=0)
    np.testing.assert_allclose(windows[1][1:, :, P:].numpy(), backward[1:, :k, P:], atol=1e-5, rtol=0)


def test_forward_windows_refuses_batches(tiny):
    model, tokenizer = tiny
    ids = encode(tokenizer, [["a"], ["b"]])["input_ids"]
    with pytest.raises(ValueError, match="one text"):
        next(model.forward_windows(ids, 4))
    with pytest.raises(ValueError, match="window_size"):
        next(model.forward_windows(ids[0], 0))
    with torch.no_grad():
        state = model(ids[:1], return_lstm_state=True).lstm_state
    with pytest.raises(ValueError, match="lstm_state"):
        model(ids, lstm_state=state)
