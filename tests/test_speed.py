"""The fast paths: which GEMMs run, the char-CNN token cache, bf16, and the stateful (windowed) mode."""

import numpy as np
import pytest
import torch
from conftest import FIXTURES, load_fixture
from reference_elmo import load_hdf5, reference_sentence
from tolerance import assert_close_to_reference

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
    monkeypatch.setattr(torch, "bmm", lambda x, mat2: (mat2.shape[-1] == gates and gemm_rows.append(x.shape[1])) or real_bmm(x, mat2))
    model.bilm.char_cnn.register_forward_hook(lambda m, args, out: char_cnn_rows.append(args[0].shape[0]))
    monkeypatch.setattr(modeling_elmo, "GATES_BLOCK_ELEMENTS", 2 * len(sentences) * 4 * model.config.lstm_dim * 4)
    monkeypatch.setattr(modeling_elmo, "COMPILED_CELL_MIN_DIM", model.config.lstm_dim)
    cell_calls = []
    real_cell = modeling_elmo.compiled_lstm_cell
    monkeypatch.setattr(modeling_elmo, "compiled_lstm_cell", lambda *a: cell_calls.append(1) or real_cell(*a))
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    assert_close_to_reference(torch.stack(out.hidden_states), expected["bilm_activations"], what="fast path vs AllenNLP")

    running = [sum(n > t for n in lengths) for t in range(steps)]
    per_layer = []
    for start in range(0, steps, 4):  # an input GEMM over each block of 4 steps, then that block's state GEMMs
        per_layer += [running[start] * len(running[start : start + 4])] + running[start : start + 4]
    assert gemm_rows == per_layer * model.config.n_layers
    assert len(cell_calls) == steps * model.config.n_layers
    # The compiled cell was used (or, where inductor cannot build it, e.g. under ATEN_CPU_CAPABILITY=default with
    # torch 2.13, its logged eager fallback: same numbers, checked above).
    assert modeling_elmo._compiled_cells
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


# ----- int8 inference -------------------------------------------------------------------------------------------------


def hidden_states(model, enc):
    with torch.no_grad():
        return torch.stack(model(**enc, output_hidden_states=True).hidden_states)


def layer_cosines(out, ref, mask):
    """Cosine of each real word's vector per biLM layer: [layers, words]."""
    return torch.nn.functional.cosine_similarity(out[:, mask], ref[:, mask], dim=-1)


def test_int8_stays_close_to_fp32_on_fixture(tiny_model_dir, tiny):
    from modeling_elmo import ElmoModel

    model, tokenizer = tiny
    sentences, _, _ = load_fixture("allennlp-tiny")
    enc = encode(tokenizer, sentences)
    int8 = ElmoModel.from_pretrained(tiny_model_dir).eval().quantize_int8()
    out = hidden_states(int8, enc)
    assert out.dtype == torch.float32
    cos = layer_cosines(out, hidden_states(model, enc), enc["attention_mask"].bool())
    # Random fixture weights: per-layer median >= 0.999, worst word >= 0.98 (the top layer carries the most error).
    assert (cos.median(dim=1).values >= 0.999).all(), cos.median(dim=1).values
    assert cos.min() >= 0.98, cos.min(dim=1).values
    assert not torch.equal(out, hidden_states(model, enc)), "int8 mode did not change the GEMMs"


def test_int8_stays_close_to_fp32_on_the_default_model(monkeypatch):
    """The shipped model's ELMo vectors on real sentences (median cosine >= 0.999 in every layer)."""
    from conftest import SHIPPED
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    monkeypatch.setattr(modeling_elmo, "COMPILED_CELL_MIN_DIM", None)  # eager cell: no compilation in this test
    folder = SHIPPED
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    fp32 = ElmoModel.from_pretrained(folder, dtype=torch.float32).eval()
    int8 = ElmoModel.from_pretrained(folder, dtype=torch.float32).eval().quantize_int8()
    sentences = [
        "Sir Walter Elliot , of Kellynch Hall , in Somersetshire , was a man who , for his own amusement , never "
        "took up any book but the Baronetage .".split(),
        "She put the money in the bank and sat down by the river .".split(),
        "It is a truth universally acknowledged .".split(),
    ]
    enc = encode(tokenizer, sentences)
    cos = layer_cosines(hidden_states(int8, enc), hidden_states(fp32, enc), enc["attention_mask"].bool())
    assert (cos.median(dim=1).values >= 0.999).all(), cos.median(dim=1).values
    assert cos.min() >= 0.99, cos.min(dim=1).values


def test_int8_is_inference_only(tiny_model_dir, tiny):
    from modeling_elmo import ElmoModel

    _, tokenizer = tiny
    enc = encode(tokenizer, [WORDS])
    model = ElmoModel.from_pretrained(tiny_model_dir).quantize_int8().train()
    with pytest.raises(RuntimeError, match="inference only"):
        model(**enc)
    model.quantize_int8(False)  # back to the float weights: trains as before
    model(**enc).last_hidden_state.sum().backward()
    with pytest.raises(RuntimeError, match="float32"):
        ElmoModel.from_pretrained(tiny_model_dir, dtype=torch.bfloat16).quantize_int8()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_int8_then_another_dtype_says_int8_and_what_to_do(tiny_model_dir, tiny, dtype):
    """quantize_int8(), then .to(torch.bfloat16), then a forward: the error names int8 and the two ways out (it was
    the quantized engine's "expected scalar type Float but found BFloat16"); both ways out work."""
    from modeling_elmo import ElmoModel

    _, tokenizer = tiny
    enc = encode(tokenizer, [WORDS])
    model = ElmoModel.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        want = model.quantize_int8()(**enc).last_hidden_state
        model.to(dtype)
        with pytest.raises(RuntimeError, match=r"quantized to int8 .* now torch\.\w+: call model\.to\(torch\.float32\)"
                                               r" to keep int8, or model\.quantize_int8\(False\)"):
            model(**enc)
        # int8 again (the weights went through `dtype` and back: close to the first int8 run, not bit-equal)
        again = model.to(torch.float32)(**enc).last_hidden_state
        assert torch.nn.functional.cosine_similarity(again, want, dim=-1).min() > 0.99
        assert model.to(dtype).quantize_int8(False)(**enc).last_hidden_state.dtype == dtype


def test_int8_needs_a_quantized_engine(tiny_model_dir, monkeypatch):
    from modeling_elmo import ElmoModel

    model = ElmoModel.from_pretrained(tiny_model_dir).eval()
    monkeypatch.setattr(type(torch.backends.quantized), "supported_engines", property(lambda self: ["none"]))
    with pytest.raises(RuntimeError, match="no quantized engine"):
        model.quantize_int8()
    assert not any(getattr(m, "int8", False) for m in model.modules())


def test_int8_save_pretrained_saves_the_float_weights(tiny_model_dir, tiny, tmp_path):
    from modeling_elmo import ElmoModel

    model, tokenizer = tiny
    enc = encode(tokenizer, [WORDS])
    int8 = ElmoModel.from_pretrained(tiny_model_dir).eval().quantize_int8()
    int8.save_pretrained(tmp_path)
    reloaded = ElmoModel.from_pretrained(tmp_path).eval()
    assert not any(getattr(m, "int8", False) for m in reloaded.modules())  # the mode is not saved
    for name, tensor in model.state_dict().items():
        assert torch.equal(reloaded.state_dict()[name], tensor), name
    assert torch.equal(hidden_states(reloaded, enc), hidden_states(model, enc))


def test_int8_weights_follow_weight_changes(tiny_model_dir, tiny):
    """The int8 copies are made again when a float weight changes in place or is replaced: the result then equals a
    model quantized from the new weights."""
    from modeling_elmo import ElmoModel

    _, tokenizer = tiny
    enc = encode(tokenizer, [WORDS, ["a", "dog"]])
    model = ElmoModel.from_pretrained(tiny_model_dir).eval().quantize_int8()
    before = hidden_states(model, enc)
    packs = [m.int8_cache for m in model.modules() if getattr(m, "int8", False)]
    assert hidden_states(model, enc).equal(before)
    assert [m.int8_cache for m in model.modules() if getattr(m, "int8", False)] == packs  # packed once

    changed = ElmoModel.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        for p in changed.bilm.parameters():
            p.mul_(0.9)
    model.load_state_dict(changed.state_dict())  # in place
    fresh = changed.quantize_int8()
    expected = hidden_states(fresh, enc)
    assert not expected.equal(before)
    assert hidden_states(model, enc).equal(expected)

    model.bilm.layers[0].state_weight = torch.nn.Parameter(model.bilm.layers[0].state_weight * 1.1)  # replaced
    fresh.bilm.layers[0].state_weight = torch.nn.Parameter(fresh.bilm.layers[0].state_weight * 1.1)
    assert hidden_states(model, enc).equal(hidden_states(fresh, enc))
    assert not hidden_states(model, enc).equal(expected)


# ----- The compiled LSTM cell -----------------------------------------------------------------------------------------


@torch._dynamo.config.patch(fail_on_recompile_limit_hit=True)
def test_compiled_cell_never_reaches_the_recompile_limit(monkeypatch):
    """One process mixing dtypes, batch sizes (1 and larger), clip values and int8's per-direction state gates: each
    combination compiles at most twice (batch 1, larger) in a compiled cell of its own, and none falls back to eager
    mode (Dynamo's recompile_limit is 8 per code object; failing on it instead of falling back makes it visible)."""
    from torch._dynamo.utils import counters

    monkeypatch.setattr(modeling_elmo, "COMPILE_BACKEND", "eager")  # Dynamo's guards and graphs, no code generation
    monkeypatch.setattr(modeling_elmo, "_compiled_cells", {})
    monkeypatch.setattr(modeling_elmo, "_compile_failed", False)
    graphs = counters["stats"]["unique_graphs"]
    hidden, combinations = 4, 0
    for gates_dtype, cell_dtype in ((torch.float32, torch.float32), (torch.bfloat16, torch.float32),
                                    (torch.float16, torch.float32), (torch.float64, torch.float64)):
        for pair in (False, True):
            for clip in (None, 3.0, 50.0):
                combinations += 1
                for n in (1, 2, 5, 32, 3):
                    state_gates = torch.randn(2, n, 4 * hidden, dtype=gates_dtype)
                    args = (torch.randn(2, n, 4 * hidden, dtype=gates_dtype), tuple(state_gates) if pair else state_gates,
                            torch.randn(2, 1, 4 * hidden, dtype=gates_dtype), torch.randn(2, n, hidden, dtype=cell_dtype), clip)
                    c, out = modeling_elmo.compiled_lstm_cell(*args)
                    args = (args[0], state_gates, *args[2:])
                    expected = modeling_elmo.lstm_cell(*args)
                    torch.testing.assert_close(c, expected[0])
                    torch.testing.assert_close(out, expected[1])
    assert not modeling_elmo._compile_failed
    assert len(modeling_elmo._compiled_cells) == combinations
    assert counters["stats"]["unique_graphs"] - graphs == 2 * combinations


@torch._dynamo.config.patch(fail_on_recompile_limit_hit=True)
def test_lstm_layers_compile_a_bounded_number_of_graphs(tiny_model_dir, tiny, monkeypatch):
    """The biLM over batches of many sizes and lengths (sentences finishing at different steps, several gate blocks),
    in fp32 and int8: the compiled cells see only contiguous tensors, so they compile at most twice each."""
    from torch._dynamo.utils import counters

    from modeling_elmo import ElmoModel

    model, tokenizer = tiny
    monkeypatch.setattr(modeling_elmo, "COMPILE_BACKEND", "eager")
    monkeypatch.setattr(modeling_elmo, "COMPILED_CELL_MIN_DIM", model.config.lstm_dim)
    monkeypatch.setattr(modeling_elmo, "GATES_BLOCK_ELEMENTS", 2 * 4 * model.config.lstm_dim * 12)
    monkeypatch.setattr(modeling_elmo, "_compiled_cells", {})
    monkeypatch.setattr(modeling_elmo, "_compile_failed", False)
    int8 = ElmoModel.from_pretrained(tiny_model_dir).eval().quantize_int8()
    graphs = counters["stats"]["unique_graphs"]
    for n_sentences in (1, 2, 3, 5, 7, 4):
        batch = [WORDS[: 1 + (3 * i + n_sentences) % len(WORDS)] for i in range(n_sentences)]
        for m in (model, int8):
            hidden_states(m, encode(tokenizer, batch))
    assert not modeling_elmo._compile_failed
    assert len(modeling_elmo._compiled_cells) == 2  # fp32 gates, int8's per-direction state gates
    assert counters["stats"]["unique_graphs"] - graphs <= 2 * len(modeling_elmo._compiled_cells)
