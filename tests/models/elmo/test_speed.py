"""The fast paths outside the kernels: the char-CNN token cache, bf16, and the stateful (windowed) mode."""

import numpy as np
import pytest
import torch

from basic_tokenization_elmo import BOS_WORD, EOS_WORD, word_to_char_ids

from conftest import FIXTURES, char_cnn_rows_counted, load_fixture
from reference_elmo import load_hdf5, reference_sentence
from tolerance import assert_close_to_reference

WORDS = "the cat sat on the mat and the dog sat on the cat".split()


def encode(tokenizer, sentences):
    return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


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
