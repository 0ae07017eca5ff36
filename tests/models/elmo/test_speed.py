"""The fast paths: which GEMMs run, the char-CNN token cache, bf16, and the stateful (windowed) mode."""

import contextlib

import numpy as np
import pytest
import torch

import bilm_elmo
from kernels_elmo import runnable_float_kernels
from basic_tokenization_elmo import BOS_WORD, EOS_WORD, word_to_char_ids

from conftest import FIXTURES, load_fixture
from reference_elmo import load_hdf5, reference_sentence
from tolerance import assert_close_to_reference

WORDS = "the cat sat on the mat and the dog sat on the cat".split()


def encode(tokenizer, sentences):
    return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


@contextlib.contextmanager
def char_cnn_rows_counted(model):
    """The number of words the char CNN encodes in each call, while the block runs."""
    rows = []
    hook = model.bilm.char_cnn.register_forward_hook(lambda module, args, out: rows.append(args[0].shape[0]))
    try:
        yield rows
    finally:
        hook.remove()


@pytest.mark.fidelity
@pytest.mark.parametrize("kernel", runnable_float_kernels())
def test_fixture_runs_through_the_fast_path(tiny_model_dir, monkeypatch, kernel):
    """The fidelity fixture goes through one input GEMM per layer and block, state GEMMs at the shrinking batch size
    (padded steps never computed), the in-place LSTM cell, and one char CNN call over distinct words only; with each
    float kernel this CPU runs (config.float_kernel)."""
    from configuration_elmo import ElmoConfig
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    sentences, expected, _ = load_fixture("allennlp-tiny")
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    gates = 4 * ElmoConfig.from_pretrained(tiny_model_dir).lstm_dim
    # Gate blocks of 4 steps, set through from_pretrained (a config field).
    model = ElmoModel.from_pretrained(
        tiny_model_dir, lstm_gates_block_elements=2 * len(sentences) * gates * 4, float_kernel=kernel
    ).eval()
    enc = encode(tokenizer, sentences)
    lengths = sorted((len(s) + 2 for s in sentences), reverse=True)
    steps = lengths[0]
    gemm_rows, cell_calls = [], []
    gemms = type(model.bilm.layers[0].gemms.for_call(True))  # the class whose GEMMs an inference call runs
    real_input_gates, real_gates, real_cell = gemms.input_gates, gemms.gates, bilm_elmo.inplace_lstm_cell

    def input_gates(self, x):  # records the rows of each gates GEMM (input and state)
        gemm_rows.append(x.shape[1] * x.shape[2])
        return real_input_gates(self, x)

    def state_gates(self, input_gates, step, h):
        gemm_rows.append(h.shape[1])
        return real_gates(self, input_gates, step, h)

    monkeypatch.setattr(gemms, "input_gates", input_gates)
    monkeypatch.setattr(gemms, "gates", state_gates)
    monkeypatch.setattr(bilm_elmo, "inplace_lstm_cell", lambda *a: cell_calls.append(1) or real_cell(*a))
    with torch.no_grad(), char_cnn_rows_counted(model) as char_cnn_rows:
        out = model(**enc, output_hidden_states=True)
    assert_close_to_reference(torch.stack(out.hidden_states), expected["bilm_activations"], what="fast path")

    running = [sum(n > t for n in lengths) for t in range(steps)]
    per_layer = []
    for start in range(0, steps, 4):  # an input GEMM over each block of 4 steps, then that block's state GEMMs
        per_layer += [running[start] * len(running[start : start + 4])] + running[start : start + 4]
    assert gemm_rows == per_layer * model.config.n_layers
    assert len(cell_calls) == steps * model.config.n_layers
    distinct = {tuple(row) for s, n in zip(enc["input_ids"].tolist(), map(len, sentences)) for row in s[:n]}
    assert char_cnn_rows == [len(distinct) + 2]  # + BOS and EOS


@pytest.mark.fidelity
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cell_clip", [None, 0.5])
def test_inplace_cell_gives_the_papers_numbers(dtype, cell_clip):
    """Inference's in-place cell against the cell training runs (bilm_elmo.lstm_cell), on random gates over a
    range that saturates the activations and crosses the clip value; bf16 gates with a float32 cell state."""
    from kernels_elmo import inplace_lstm_cell
    from bilm_elmo import lstm_cell

    generator = torch.Generator().manual_seed(0)
    gates = (torch.randn(2, 5, 4 * 16, generator=generator) * 4).to(dtype)
    c = torch.randn(2, 5, 16, generator=generator)[:, :3]  # a view of a larger batch, as when sentences end
    expected_c, expected_out = lstm_cell(gates[:, :3], c, cell_clip)
    got_c, got_out = inplace_lstm_cell(gates[:, :3].clone(), c, cell_clip)
    assert got_c.dtype == torch.float32 and got_out.dtype == dtype
    assert_close_to_reference(got_c, expected_c, what="cell state")
    if dtype == torch.float32:
        assert_close_to_reference(got_out, expected_out, what="cell output")
    else:  # one bf16 rounding of the same float32 value
        torch.testing.assert_close(got_out, expected_out, atol=0, rtol=2**-8)


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
    with torch.no_grad(), char_cnn_rows_counted(model) as rows:
        cached = model(**enc, output_hidden_states=True)
    assert rows == [1]  # only "unseen" was encoded
    for a, b in zip(cached.hidden_states, plain.hidden_states):
        assert_close_to_reference(a, b, what="token cache vs char CNN")
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


@pytest.mark.fidelity
def test_windows_carry_state_like_one_long_sentence(tiny):
    """Window 2's forward LM continues window 1 exactly (= one sentence `w1..wk </S> <S> wk+1..`), its backward LM
    starts from window 1's backward final state (= the backward LM over `wk+1.. </S> <S> w1..wk`); NumPy reference."""
    model, tokenizer = tiny
    arrays = load_hdf5(FIXTURES / "allennlp-tiny" / "weights.hdf5")
    _, _, options = load_fixture("allennlp-tiny")
    ids = encode(tokenizer, [WORDS])["input_ids"]
    k = 5
    with torch.no_grad():
        windows = [torch.stack(out.hidden_states)[:, 0]
                   for out in model.forward_windows(ids, k, output_hidden_states=True)]
        stateless = torch.stack(model(ids[:, :k], output_hidden_states=True).hidden_states)[:, 0]
    assert [w.shape[1] for w in windows] == [5, 5, 3]
    torch.testing.assert_close(windows[0], stateless, atol=0, rtol=0)

    chars = [word_to_char_ids(w) for w in WORDS]
    bos, eos = word_to_char_ids(BOS_WORD), word_to_char_ids(EOS_WORD)
    forward = reference_sentence(arrays, options, np.array(chars[:k] + [eos, bos] + chars[k : 2 * k]))
    backward = reference_sentence(arrays, options, np.array(chars[k : 2 * k] + [eos, bos] + chars[:k]))
    P = windows[1].shape[-1] // 2
    assert_close_to_reference(windows[1][1:, :, :P], forward[1:, k + 2 :, :P], what="window 2, forward LM")
    assert_close_to_reference(windows[1][1:, :, P:], backward[1:, :k, P:], what="window 2, backward LM")


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
