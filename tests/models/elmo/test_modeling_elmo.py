"""Behaviour of ElmoModel beyond the reference numbers: statelessness, batching, empty input, bad input, loading."""

import numpy as np
import pytest
import torch
from conftest import load_fixture
from tolerance import assert_close_to_reference

from configuration_elmo import ElmoConfig
from modeling_elmo import ElmoModel

SENTENCES = [["The", "cat", "sat", "."], ["ELMo"], ["A", "much", "longer", "sentence", "than", "the", "others", "!"]]


def encode(tokenizer, sentences):
    return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


@pytest.mark.slow
@pytest.mark.fidelity
def test_same_batch_twice_is_identical(tiny):
    """AllenNLP's second call differs by up to 3.9 (stateful LSTM); ours must not differ at all."""
    model, tokenizer = tiny
    sentences, expected, _ = load_fixture("allennlp-tiny")
    enc = encode(tokenizer, sentences)
    with torch.no_grad():
        first, second = model(**enc).last_hidden_state, model(**enc).last_hidden_state
    assert torch.equal(first, second)
    assert np.abs(expected["elmo_representation_second_call"] - first.numpy()).max() > 1.0


@pytest.mark.fidelity
def test_sentence_alone_equals_sentence_in_padded_batch(tiny):
    model, tokenizer = tiny
    with torch.no_grad():
        batch = model(**encode(tokenizer, SENTENCES), output_hidden_states=True)
        for i, words in enumerate(SENTENCES):
            alone = model(**encode(tokenizer, [words]), output_hidden_states=True)
            for a, b in zip(alone.hidden_states, batch.hidden_states):
                assert_close_to_reference(b[i, : len(words)], a[0], f"sentence {i} in a batch")
            assert_close_to_reference(batch.last_hidden_state[i, : len(words)], alone.last_hidden_state[0],
                                      f"sentence {i}")


@pytest.mark.fidelity
def test_empty_sentence_in_batch_gives_zeros(tiny):
    model, tokenizer = tiny
    with torch.no_grad():
        out = model(**encode(tokenizer, [["a", "b"], [], ["c"]]), output_hidden_states=True)
        alone = model(**encode(tokenizer, [["a", "b"]]))
    assert out.mask.tolist() == [[True, True], [False, False], [True, False]]
    assert not out.last_hidden_state[1].any() and all(not h[1].any() for h in out.hidden_states)
    assert_close_to_reference(out.last_hidden_state[0], alone.last_hidden_state[0])


def test_batch_of_only_empty_sentences_gives_empty_outputs(tiny):
    """AllenNLP crashes here (IndexError); we return [batch, 0, 2P] outputs and an empty mask."""
    model, tokenizer = tiny
    enc = tokenizer(["", "   "], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    assert out.last_hidden_state.shape == (2, 0, 16) and out.mask.shape == (2, 0)
    assert len(out.hidden_states) == 3 and all(h.shape == (2, 0, 16) for h in out.hidden_states)


def test_thousand_character_token_uses_first_48_bytes(tiny):
    model, tokenizer = tiny
    with torch.no_grad():
        long = model(**encode(tokenizer, [["x" * 1000, "y"]])).last_hidden_state
        cut = model(**encode(tokenizer, [["x" * 48, "y"]])).last_hidden_state
    assert torch.equal(long, cut)


@pytest.mark.parametrize(
    "make_ids, match",
    [
        (lambda: torch.zeros(0, 3, 50, dtype=torch.long), "empty batch"),
        (lambda: torch.zeros(2, 3, dtype=torch.long), r"shape \[batch, words, 50\]"),
        (lambda: torch.zeros(2, 3, 49, dtype=torch.long), r"shape \[batch, words, 50\]"),
        (lambda: torch.full((1, 2, 50), 300), r"char ids in \[0, 261\]"),
        (lambda: torch.full((1, 2, 50), -1), r"char ids in \[0, 261\]"),
        (lambda: torch.ones(1, 2, 50), "integer char ids"),
    ],
)
def test_bad_input_ids_are_named(tiny, make_ids, match):
    model, _ = tiny
    with pytest.raises(ValueError, match=match):
        model(make_ids())


@pytest.mark.parametrize(
    "make_inputs, error, match",
    [
        (lambda ids: (ids[:, :, 0], {"attention_mask": torch.ones(2, 3)}), ValueError, r"shape \[batch, words, 50\]"),
        (lambda ids: (ids, {"attention_mask": torch.ones(1, 3)}), ValueError,
         r"attention_mask must have shape \[batch, words\] = \[2, 3\]"),
        (lambda ids: (ids, {"attention_mask": torch.ones(3)}), ValueError, "attention_mask must have shape"),
        (lambda ids: (ids, {"attention_mask": torch.ones(2, 4)}), ValueError, "attention_mask must have shape"),
        (lambda ids: (ids, {"attention_mask": [[1, 1, 1], [1, 1, 0]]}), TypeError,
         "attention_mask must be a torch.Tensor"),
        (lambda ids: (ids.numpy(), {}), TypeError, "return_tensors='pt'"),
        (lambda ids: (ids.tolist(), {}), TypeError, "return_tensors='pt'"),
    ],
)
def test_bad_input_forms_are_named(tiny, make_inputs, error, match):
    model, tokenizer = tiny
    ids, kwargs = make_inputs(encode(tokenizer, [["a", "b", "c"], ["d", "e"]])["input_ids"])
    with pytest.raises(error, match=match):
        model(ids, **kwargs)


@pytest.mark.fidelity
def test_narrow_integer_ids_give_the_same_vectors(tiny):
    model, tokenizer = tiny
    enc = encode(tokenizer, [["a", "b", "c"], ["d", "e"]])
    with torch.no_grad():
        want = model(**enc).last_hidden_state
        for dtype in (torch.int16, torch.int32):
            got = model(enc["input_ids"].to(dtype), attention_mask=enc["attention_mask"]).last_hidden_state
            assert torch.equal(got, want), dtype


def test_left_padding_is_refused(tiny):
    model, tokenizer = tiny
    ids = encode(tokenizer, [["a", "b"], ["c"]])["input_ids"]
    with pytest.raises(ValueError, match="padding must be on the right"):
        model(ids.flip(1))


@pytest.mark.fidelity
def test_attention_mask_removes_words(tiny):
    model, tokenizer = tiny
    enc = encode(tokenizer, [["a", "b", "c"]])
    with torch.no_grad():
        masked = model(enc["input_ids"], attention_mask=torch.tensor([[1, 1, 0]])).last_hidden_state
        short = model(**encode(tokenizer, [["a", "b"]])).last_hidden_state
    assert_close_to_reference(masked[0, :2], short[0])
    assert not masked[0, 2].any()


def test_tuple_output_and_field_names(tiny):
    model, tokenizer = tiny
    enc = encode(tokenizer, SENTENCES)
    with torch.no_grad():
        out = model(**enc)
        as_tuple = model(**enc, return_dict=False)
    assert set(out.keys()) == {"last_hidden_state", "elmo_representations", "mask"}
    assert torch.equal(as_tuple[0], out.last_hidden_state)


def test_several_representations_and_layer_norm(tiny_model_dir, tiny):
    base, tokenizer = tiny
    model = ElmoModel.from_pretrained(tiny_model_dir, num_output_representations=2, do_layer_norm=True).eval()
    with torch.no_grad():
        out = model(**encode(tokenizer, SENTENCES), output_hidden_states=True)
    assert len(out.elmo_representations) == 2
    torch.testing.assert_close(out.elmo_representations[0], out.elmo_representations[1])
    # Hidden states do not depend on the mix settings.
    with torch.no_grad():
        plain = base(**encode(tokenizer, SENTENCES), output_hidden_states=True)
    for a, b in zip(out.hidden_states, plain.hidden_states):
        torch.testing.assert_close(a, b)


def test_a_second_scalar_mix_loads_silently(tiny_model_dir, caplog, capfd):
    """The README's migration line (num_output_representations=2) on a folder saved with one mix: the new mix starts
    as AllenNLP's (weights 0, gamma 1) and loading reports nothing (it printed a LOAD REPORT with MISSING
    scalar_mixes.1.* and "Consider training on your downstream task")."""
    capfd.readouterr()
    model = ElmoModel.from_pretrained(tiny_model_dir, num_output_representations=2)
    said = capfd.readouterr().err + "".join(r.getMessage() for r in caplog.records)
    assert "MISSING" not in said and "scalar_mixes" not in said and "LOAD REPORT" not in said, said
    assert torch.equal(model.scalar_mixes[1].scalar_parameters, torch.zeros(3))
    assert torch.equal(model.scalar_mixes[1].gamma, torch.ones(1))


@pytest.mark.fidelity
def test_fixed_scalar_mix_parameters_are_frozen(tiny_model_dir, tiny):
    _, tokenizer = tiny
    model = ElmoModel.from_pretrained(tiny_model_dir, scalar_mix_parameters=[-30.0, 30.0, -30.0]).eval()
    mix = model.scalar_mixes[0]
    assert not list(mix.parameters())
    with torch.no_grad():
        out = model(**encode(tokenizer, SENTENCES), output_hidden_states=True)
    torch.testing.assert_close(out.last_hidden_state, out.hidden_states[1], atol=1e-4, rtol=0)


def test_dropout_only_in_training(tiny_model_dir, tiny):
    _, tokenizer = tiny
    model = ElmoModel.from_pretrained(tiny_model_dir)
    enc = encode(tokenizer, SENTENCES)
    model.train()
    train_out = model(**enc).last_hidden_state
    model.eval()
    with torch.no_grad():
        eval_out = model(**enc).last_hidden_state
    zeroed = (train_out == 0) & (eval_out != 0)
    assert 0.3 < zeroed.float().sum() / (eval_out != 0).sum() < 0.7


def test_from_pretrained_has_no_garbage_and_honours_dtype(tiny_model_dir, tiny):
    model, tokenizer = tiny
    enc = encode(tokenizer, SENTENCES)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert not model.bilm.char_cnn.char_embedding.weight[0].any()
    bf16 = ElmoModel.from_pretrained(tiny_model_dir, dtype=torch.bfloat16).eval()
    assert all(p.dtype == torch.bfloat16 for p in bf16.parameters())
    with torch.no_grad():
        out = bf16(**enc).last_hidden_state
        ref = model(**enc).last_hidden_state
    assert out.dtype == torch.bfloat16
    cos = torch.nn.functional.cosine_similarity(out.float()[ref.abs().sum(-1) > 0], ref[ref.abs().sum(-1) > 0], dim=-1)
    assert cos.min() > 0.99


def test_random_init_is_trainable_and_follows_bilm_tf():
    config = ElmoConfig(char_embedding_dim=4, filters=[[1, 4], [2, 4]], n_highway=1, lstm_dim=8, projection_dim=4)
    model = ElmoModel(config)
    layer = model.bilm.layers[0]
    assert torch.equal(layer.bias[..., 8:16], torch.ones(2, 1, 8)) and not layer.bias[..., :8].any()
    assert torch.equal(model.bilm.char_cnn.highways[0].bias, torch.tensor([0.0] * 8 + [-2.0] * 8))
    assert (model.bilm.char_cnn.char_embedding.weight[1:].abs().max() <= 1
            and not model.bilm.char_cnn.char_embedding.weight[0].any())
    ids = torch.randint(1, 262, (2, 3, 50))
    model(ids).last_hidden_state.sum().backward()
    assert all(p.grad is not None for p in model.bilm.parameters())


@pytest.mark.fidelity
def test_activation_checkpointing_gives_same_gradients(tiny_model_dir, tiny):
    _, tokenizer = tiny
    enc = encode(tokenizer, SENTENCES)
    grads = []
    for checkpointing in (False, True):
        model = ElmoModel.from_pretrained(tiny_model_dir, dropout=0.0)
        if checkpointing:
            model.activation_checkpointing_enable()
        model.train()
        model(**enc).last_hidden_state.pow(2).sum().backward()
        grads.append(model.bilm.layers[0].state_weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


def test_inputs_that_would_be_read_wrongly_are_refused_or_converted_exactly(tiny):
    """A hostile user's inputs: every one is refused by name, or converted without changing a value."""
    model, tokenizer = tiny
    enc = encode(tokenizer, SENTENCES)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    with torch.no_grad():
        want = model(ids, mask).last_hidden_state
        for exact in (dict(input_ids=ids.int()), dict(input_ids=ids.short()),
                      dict(input_ids=ids, attention_mask=mask.bool()), dict(input_ids=ids, attention_mask=mask.float()),
                      dict(input_ids=ids, attention_mask=mask.to(torch.uint8))):
            assert torch.equal(model(**exact).last_hidden_state, want), list(exact)
        refused = [
            (dict(input_ids=ids.float()), ValueError, "integer char ids, got dtype torch.float32"),
            (dict(input_ids=ids - 300), ValueError, r"char ids in \[0, 261\]"),
            (dict(input_ids=ids + 300), ValueError, r"char ids in \[0, 261\]"),
            (dict(input_ids=ids.to(torch.uint8)), ValueError, "uint8 cannot hold this model's ids"),
            (dict(input_ids=ids.tolist()), TypeError, "must be a torch.Tensor"),
            (dict(input_ids=None), TypeError, "got NoneType"),
            (dict(input_ids=ids[0]), ValueError, r"shape \[batch, words, 50\]"),
            (dict(input_ids=ids, attention_mask=mask * 0.5), ValueError, r"attention_mask must hold 1 for words and 0"),
            (dict(input_ids=ids, attention_mask=mask * 2), ValueError, r"such as \[2, 2, 2\]"),
            (dict(input_ids=ids, attention_mask=-mask), ValueError, "attention_mask must hold"),
            (dict(input_ids=ids, attention_mask=mask.tolist()), TypeError, "attention_mask must be a torch.Tensor"),
            (dict(input_ids=ids, output_hidden_states="no"), TypeError, "output_hidden_states must be True, False"),
            (dict(input_ids=ids, return_lstm_state="yes"), TypeError, "return_lstm_state must be True, False"),
            (dict(input_ids=ids, lstm_state="x"), ValueError, "lstm_state must be the lstm_state output"),
            (dict(input_ids=ids, lstm_state=((torch.zeros(2, 3, 8), torch.zeros(2, 3, 5)),) * 2), ValueError,
             r"pairs \(h \[2, 3, 8\], c \[2, 3, 16\]\)"),
        ]
        for kwargs, error, match in refused:
            with pytest.raises(error, match=match):
                model(**kwargs)
