"""ElmoModel and the heads (modeling_elmo.py): behaviour beyond the reference numbers (statelessness, batching, empty
input, bad input, loading); the arguments every transformers encoder takes, for the base model, the heads and the
language model (output_attentions=False is accepted and changes nothing, True is a clear error: ELMo has no
attention; output_hidden_states and return_dict as in transformers, the hidden states on the gradient path; the input
embeddings); and the fast paths outside the kernels (the char-CNN token cache, bf16, the stateful (windowed) mode).
ElmoModelTester (a tiny config and random char ids) checks what each class returns and in which shapes, as
transformers' BertModelTester does; test_transformers_suites.py runs transformers' ModelTesterMixin with it. The
kernels' own tests are in test_kernels_elmo.py."""

import copy
import unittest

import numpy as np
import pytest
import torch
from conftest import FIXTURES, char_cnn_rows_counted, load_fixture
from reference_elmo import load_hdf5, reference_sentence
from tolerance import assert_close_to_reference

from basic_tokenization_elmo import BOS_WORD, EOS_WORD, word_to_char_ids
from configuration_elmo import ElmoConfig
from modeling_elmo import (
    DEFAULT_BOS_ID,
    ElmoForLanguageModeling,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
)
from tokenization_elmo import ElmoTokenizer

WORDS = "the cat sat on the mat and the dog sat on the cat".split()
SENTENCES = [["The", "cat", "sat", "."], ["ELMo"], ["A", "much", "longer", "sentence", "than", "the", "others", "!"]]


def encode(tokenizer, sentences):
    return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")


class ElmoModelTester:
    """A tiny ElmoConfig and random char ids, as transformers' model testers make them (BertModelTester in its
    tests/models/bert/test_modeling_bert.py), and a `create_and_check_*` method per model class: what each returns
    and in which shapes. test_transformers_suites.py runs transformers' ModelTesterMixin with this tester."""

    def __init__(
        self,
        parent,
        batch_size=3,
        seq_length=6,
        max_characters_per_token=10,
        projection_dim=8,
        lstm_dim=16,
        num_hidden_layers=2,
        lm_vocab_size=99,
        num_labels=3,
        is_training=True,
    ):
        self.parent = parent
        self.batch_size, self.seq_length = batch_size, seq_length
        self.max_characters_per_token = max_characters_per_token
        self.projection_dim, self.lstm_dim, self.num_hidden_layers = projection_dim, lstm_dim, num_hidden_layers
        self.hidden_size = 2 * projection_dim  # an ELMo vector: forward and backward halves
        self.lm_vocab_size, self.num_labels, self.is_training = lm_vocab_size, num_labels, is_training
        self.vocab_size = 262  # the char ids

    def get_config(self):
        return ElmoConfig(
            char_embedding_dim=4,
            filters=[[1, 4], [2, 4], [3, 8]],
            n_highway=1,
            max_characters_per_token=self.max_characters_per_token,
            lstm_dim=self.lstm_dim,
            projection_dim=self.projection_dim,
            n_layers=self.num_hidden_layers,
            lm_vocab_size=self.lm_vocab_size,
            num_labels=self.num_labels,
            freeze_bilm=False,
        )

    def prepare_config_and_inputs(self):
        """(config, input_ids, attention_mask, sequence_labels, token_labels, lm_labels)."""
        # Every word is a real word (no all-zero row); the last sentence ends two words early (padding on the right).
        input_ids = torch.randint(1, self.vocab_size, (self.batch_size, self.seq_length, self.max_characters_per_token))
        attention_mask = torch.ones(self.batch_size, self.seq_length, dtype=torch.long)
        attention_mask[-1, -2:] = 0
        sequence_labels = torch.randint(0, self.num_labels, (self.batch_size,))
        token_labels = torch.randint(0, self.num_labels, (self.batch_size, self.seq_length))
        token_labels = token_labels.masked_fill(attention_mask == 0, -100)
        return (
            self.get_config(),
            input_ids,
            attention_mask,
            sequence_labels,
            token_labels,
            self.prepare_lm_labels(attention_mask),
        )

    def prepare_lm_labels(self, attention_mask):
        """ElmoForLanguageModeling's labels [batch, words + 1]: each sentence's word ids then </S>, -100 after."""
        labels = torch.randint(0, self.lm_vocab_size, (self.batch_size, self.seq_length + 1))
        lengths = attention_mask.sum(dim=1)
        return labels.masked_fill(torch.arange(self.seq_length + 1) > lengths[:, None], -100)

    def prepare_config_and_inputs_for_common(self):
        config, input_ids, attention_mask, *_ = self.prepare_config_and_inputs()
        return config, {"input_ids": input_ids, "attention_mask": attention_mask}

    def check_same_outputs(self, as_tuple, as_dict):
        """A call's tuple (return_dict=False) and its ModelOutput's to_tuple() hold the same outputs; a bool tensor
        (ElmoModelOutput.mask: which positions are words, bool as AllenNLP's Elmo gives it) is compared by
        equality."""
        if isinstance(as_tuple, (list, tuple)):
            self.parent.assertEqual(len(as_tuple), len(as_dict))
            for one, other in zip(as_tuple, as_dict):
                self.check_same_outputs(one, other)
        elif as_tuple is None:
            self.parent.assertIsNone(as_dict)
        elif as_tuple.dtype == torch.bool:
            self.parent.assertTrue(torch.equal(as_tuple, as_dict))
        else:  # transformers' own rule for this check: torch.allclose's, atol 1e-5 (and its default rtol 1e-5)
            torch.testing.assert_close(as_tuple, as_dict, atol=1e-5, rtol=1e-5, equal_nan=True)

    def check_hidden_states(self, hidden_states, attention_mask):
        """The n_layers + 1 biLM layers [batch, words, 2P], zeros at padded positions."""
        self.parent.assertEqual(len(hidden_states), self.num_hidden_layers + 1)
        for layer in hidden_states:
            self.parent.assertEqual(layer.shape, (self.batch_size, self.seq_length, self.hidden_size))
            self.parent.assertFalse(layer[attention_mask == 0].any())

    def create_and_check_model(self, config, input_ids, attention_mask, sequence_labels, token_labels, lm_labels):
        model = ElmoModel(config).eval()
        with torch.no_grad():
            result = model(input_ids, attention_mask=attention_mask)
            as_tuple = model(input_ids, attention_mask=attention_mask, return_dict=False)
            with_layers = model(
                input_ids, attention_mask=attention_mask, output_hidden_states=True, return_lstm_state=True
            )
            without_mask = model(input_ids)
        self.parent.assertEqual(set(result.keys()), {"last_hidden_state", "elmo_representations", "mask"})
        self.parent.assertEqual(result.last_hidden_state.shape, (self.batch_size, self.seq_length, self.hidden_size))
        self.parent.assertFalse(result.last_hidden_state[attention_mask == 0].any())
        self.parent.assertEqual(len(result.elmo_representations), config.num_output_representations)
        for representation in result.elmo_representations:
            self.parent.assertEqual(representation.shape, result.last_hidden_state.shape)
        self.parent.assertTrue(torch.equal(result.elmo_representations[0], result.last_hidden_state))
        self.parent.assertEqual(result.mask.dtype, torch.bool)
        self.parent.assertTrue(torch.equal(result.mask, attention_mask.bool()))
        self.parent.assertTrue(without_mask.mask.all())  # every row of char ids is a word
        self.parent.assertIsInstance(as_tuple, tuple)
        self.check_same_outputs(as_tuple, result.to_tuple())
        self.check_hidden_states(with_layers.hidden_states, attention_mask)
        # Per biLM layer the final (h [2, batch, P], c [2, batch, lstm_dim]), dim 0 forward and backward.
        self.parent.assertEqual(len(with_layers.lstm_state), self.num_hidden_layers)
        for h, c in with_layers.lstm_state:
            self.parent.assertEqual(h.shape, (2, self.batch_size, self.projection_dim))
            self.parent.assertEqual(c.shape, (2, self.batch_size, self.lstm_dim))

    def create_and_check_for_language_modeling(
        self, config, input_ids, attention_mask, sequence_labels, token_labels, lm_labels
    ):
        model = ElmoForLanguageModeling(config).eval()
        with torch.no_grad():
            scores = model(input_ids, attention_mask=attention_mask)
            result = model(input_ids, attention_mask=attention_mask, labels=lm_labels, output_hidden_states=True)
            as_tuple = model(input_ids, attention_mask=attention_mask, labels=lm_labels, return_dict=False)
        # Without labels, the full softmax's logits at every position: <S> and the words (forward), the words and
        # </S> (backward).
        for logits in (scores.forward_logits, scores.backward_logits):
            self.parent.assertEqual(logits.shape, (self.batch_size, self.seq_length + 1, self.lm_vocab_size))
        self.parent.assertIsNone(scores.loss)
        self.parent.assertEqual(result.loss.shape, ())
        for nll in (result.forward_nll, result.backward_nll):
            self.parent.assertEqual(nll.shape, (self.batch_size,))
        self.parent.assertEqual(result.num_predictions.tolist(), (attention_mask.sum(dim=1) + 1).tolist())
        for perplexity in (result.forward_perplexity, result.backward_perplexity, result.perplexity):
            self.parent.assertEqual(perplexity.shape, ())
        self.parent.assertIsNone(result.forward_logits)
        self.check_hidden_states(result.hidden_states, attention_mask)
        # The logits are aligned with the targets: forward position j predicts label j, backward position j label
        # j - 1 (<S> before the first word).
        bos = getattr(config, "bos_token_id", None)
        bos = DEFAULT_BOS_ID if bos is None else bos
        for i, n in enumerate(result.num_predictions.tolist()):
            forward = torch.nn.functional.cross_entropy(scores.forward_logits[i, :n], lm_labels[i, :n], reduction="sum")
            backward_targets = torch.tensor([bos, *lm_labels[i, : n - 1].tolist()])
            backward = torch.nn.functional.cross_entropy(
                scores.backward_logits[i, :n], backward_targets, reduction="sum"
            )
            torch.testing.assert_close(result.forward_nll[i], forward)
            torch.testing.assert_close(result.backward_nll[i], backward)
        self.check_same_outputs(as_tuple, model(input_ids, attention_mask=attention_mask, labels=lm_labels).to_tuple())

    def create_and_check_for_token_classification(
        self, config, input_ids, attention_mask, sequence_labels, token_labels, lm_labels
    ):
        config.num_labels = self.num_labels
        model = ElmoForTokenClassification(config).eval()
        with torch.no_grad():
            result = model(input_ids, attention_mask=attention_mask, labels=token_labels, output_hidden_states=True)
            unlabelled = model(input_ids, attention_mask=attention_mask)
            as_tuple = model(input_ids, attention_mask=attention_mask, labels=token_labels, return_dict=False)
        self.parent.assertEqual(result.logits.shape, (self.batch_size, self.seq_length, self.num_labels))
        self.parent.assertEqual(result.loss.shape, ())
        self.parent.assertIsNone(unlabelled.loss)
        self.parent.assertIsNone(unlabelled.hidden_states)
        self.parent.assertTrue(torch.equal(unlabelled.logits, result.logits))
        self.check_hidden_states(result.hidden_states, attention_mask)
        self.check_same_outputs(as_tuple, (result.loss, result.logits))

    def create_and_check_for_sequence_classification(
        self, config, input_ids, attention_mask, sequence_labels, token_labels, lm_labels
    ):
        config.num_labels = self.num_labels
        model = ElmoForSequenceClassification(config).eval()
        with torch.no_grad():
            result = model(input_ids, attention_mask=attention_mask, labels=sequence_labels, output_hidden_states=True)
            unlabelled = model(input_ids, attention_mask=attention_mask)
            as_tuple = model(input_ids, attention_mask=attention_mask, labels=sequence_labels, return_dict=False)
        self.parent.assertEqual(result.logits.shape, (self.batch_size, self.num_labels))
        self.parent.assertEqual(result.loss.shape, ())
        self.parent.assertIsNone(unlabelled.loss)
        self.parent.assertIsNone(unlabelled.hidden_states)
        self.parent.assertTrue(torch.equal(unlabelled.logits, result.logits))
        self.check_hidden_states(result.hidden_states, attention_mask)
        self.check_same_outputs(as_tuple, (result.loss, result.logits))


class ElmoModelTest(unittest.TestCase):
    """The tester's checks of each class, as transformers' BertModelTest runs them (without transformers' suites,
    which test_transformers_suites.py adds)."""

    def setUp(self):
        self.model_tester = ElmoModelTester(self)

    def test_model(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_model(*config_and_inputs)

    def test_model_with_several_representations(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        config_and_inputs[0].num_output_representations = 2
        self.model_tester.create_and_check_model(*config_and_inputs)

    def test_for_language_modeling(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_for_language_modeling(*config_and_inputs)

    def test_for_token_classification(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_for_token_classification(*config_and_inputs)

    def test_for_sequence_classification(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_for_sequence_classification(*config_and_inputs)

    def test_heads_with_a_task_encoder(self):
        """The "lstm" task encoder (a BiLSTM between the ELMo vectors and the classifier) changes no output shape."""
        for create_and_check in (
            self.model_tester.create_and_check_for_token_classification,
            self.model_tester.create_and_check_for_sequence_classification,
        ):
            config_and_inputs = self.model_tester.prepare_config_and_inputs()
            config_and_inputs[0].task_encoder, config_and_inputs[0].task_encoder_dim = "lstm", 5
            create_and_check(*config_and_inputs)


# -- ElmoModel beyond the reference numbers --------------------------------------------------------------------------


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
            assert_close_to_reference(
                batch.last_hidden_state[i, : len(words)], alone.last_hidden_state[0], f"sentence {i}"
            )


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
        (
            lambda ids: (ids, {"attention_mask": torch.ones(1, 3)}),
            ValueError,
            r"attention_mask must have shape \[batch, words\] = \[2, 3\]",
        ),
        (lambda ids: (ids, {"attention_mask": torch.ones(3)}), ValueError, "attention_mask must have shape"),
        (lambda ids: (ids, {"attention_mask": torch.ones(2, 4)}), ValueError, "attention_mask must have shape"),
        (
            lambda ids: (ids, {"attention_mask": [[1, 1, 1], [1, 1, 0]]}),
            TypeError,
            "attention_mask must be a torch.Tensor",
        ),
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
    assert (
        model.bilm.char_cnn.char_embedding.weight[1:].abs().max() <= 1
        and not model.bilm.char_cnn.char_embedding.weight[0].any()
    )
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
        for exact in (
            dict(input_ids=ids.int()),
            dict(input_ids=ids.short()),
            dict(input_ids=ids, attention_mask=mask.bool()),
            dict(input_ids=ids, attention_mask=mask.float()),
            dict(input_ids=ids, attention_mask=mask.to(torch.uint8)),
        ):
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
            (
                dict(input_ids=ids, lstm_state=((torch.zeros(2, 3, 8), torch.zeros(2, 3, 5)),) * 2),
                ValueError,
                r"pairs \(h \[2, 3, 8\], c \[2, 3, 16\]\)",
            ),
        ]
        for kwargs, error, match in refused:
            with pytest.raises(error, match=match):
                model(**kwargs)


# -- the arguments every transformers encoder takes ------------------------------------------------------------------


def test_output_attentions(tiny, tiny_heads_dir):
    model, tokenizer = tiny
    batch = tokenizer(["The cat sat .", "ELMo"], padding=True, return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(model(**batch, output_attentions=False).last_hidden_state, model(**batch).last_hidden_state)
        with pytest.raises(ValueError, match="no attention"):
            model(**batch, output_attentions=True)
        for head_class, name in ((ElmoForTokenClassification, "token"), (ElmoForSequenceClassification, "sequence")):
            head = head_class.from_pretrained(tiny_heads_dir / name).eval()
            assert torch.equal(head(**batch, output_attentions=False).logits, head(**batch).logits)
            with pytest.raises(ValueError, match="no attention"):
                head(**batch, output_attentions=True)


def classes_on_the_tiny_biLM(tiny_model_dir, tiny_heads_dir, lm_dir, **kwargs):
    """Every model class, loaded as a user loads it: ElmoModel and the two heads on the tiny fixture's biLM (so their
    biLM layers are AllenNLP's `bilm_activations`), and ElmoForLanguageModeling on the LM fixture."""
    return [
        ElmoModel.from_pretrained(tiny_model_dir, **kwargs),
        ElmoForTokenClassification.from_pretrained(tiny_heads_dir / "token", **kwargs),
        ElmoForSequenceClassification.from_pretrained(tiny_heads_dir / "sequence", **kwargs),
        ElmoForLanguageModeling.from_pretrained(lm_dir, **kwargs),
    ]


@pytest.mark.fidelity
def test_every_class_honours_output_hidden_states_and_return_dict(tiny, tiny_model_dir, tiny_heads_dir, lm_dir):
    """output_hidden_states (the argument, or the config's) gives the biLM layers on every class, the heads and the
    language model too. return_dict=False (argument or config) gives the same as a tuple."""
    _, tokenizer = tiny
    sentences, expected, _ = load_fixture("allennlp-tiny")
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    by_argument = classes_on_the_tiny_biLM(tiny_model_dir, tiny_heads_dir, lm_dir)
    by_config = classes_on_the_tiny_biLM(tiny_model_dir, tiny_heads_dir, lm_dir, output_hidden_states=True)
    with torch.no_grad():
        for plain, configured in zip(by_argument, by_config):
            plain.eval(), configured.eval()
            assert plain(**batch).hidden_states is None
            for out in (plain(**batch, output_hidden_states=True), configured(**batch)):
                layers = torch.stack(out.hidden_states)
                if isinstance(plain, ElmoForLanguageModeling):  # another biLM: the base model's layers
                    base = ElmoModel.from_pretrained(lm_dir).eval()(**batch, output_hidden_states=True)
                    assert torch.equal(layers, torch.stack(base.hidden_states))
                else:
                    assert_close_to_reference(layers, expected["bilm_activations"], type(plain).__name__)
            as_dict = plain(**batch, output_hidden_states=True)
            as_tuple = plain(**batch, output_hidden_states=True, return_dict=False)
            assert isinstance(as_tuple, tuple) and len(as_tuple) == len(as_dict.to_tuple())
            for got, want in zip(as_tuple, as_dict.to_tuple()):
                assert all(map(torch.equal, got, want)) if isinstance(got, tuple) else torch.equal(got, want)
            plain.config.return_dict = False
            assert isinstance(plain(**batch), tuple)


def test_hidden_states_are_on_the_gradient_path(tiny, tiny_model_dir, tiny_heads_dir, lm_dir):
    """`retain_grad()` on the returned layers, then backward: each gets the gradient the outputs send it (the layers
    are on the path, not masked copies off it whose .grad stays None, which attribution tools would read as nothing).
    The mixes read every layer; the language model's softmax reads the top one. A frozen biLM takes gradients with
    enable_input_require_grads, as transformers' models do."""
    _, tokenizer = tiny
    batch = tokenizer(["The cat sat .", "ELMo"], padding=True, return_tensors="pt")
    for model in classes_on_the_tiny_biLM(tiny_model_dir, tiny_heads_dir, lm_dir):
        model.eval().enable_input_require_grads()
        out = model(**batch, output_hidden_states=True)
        for layer in out.hidden_states:
            layer.retain_grad()
        (out.forward_logits if isinstance(model, ElmoForLanguageModeling) else out[0]).square().sum().backward()
        read = out.hidden_states[-1:] if isinstance(model, ElmoForLanguageModeling) else out.hidden_states
        for index, layer in enumerate(read):
            assert layer.grad is not None and layer.grad[batch["attention_mask"].bool()].abs().sum() > 0, (
                type(model).__name__,
                index,
            )


def test_input_embeddings_are_the_char_embedding_and_can_be_replaced(tiny):
    model, tokenizer = tiny
    batch = tokenizer(["a b", "ba"], padding=True, return_tensors="pt")
    embedding = model.get_input_embeddings()
    assert embedding is model.bilm.char_cnn.char_embedding and embedding.num_embeddings == 262
    replaced = copy.deepcopy(model)
    new = torch.nn.Embedding.from_pretrained(embedding.weight.detach().clone(), freeze=False, padding_idx=0)
    replaced.set_input_embeddings(new)
    assert replaced.get_input_embeddings() is new
    with torch.no_grad():
        assert torch.equal(replaced(**batch).last_hidden_state, model(**batch).last_hidden_state)
        new.weight[ord("a") + 1] += 1  # the char id of "a" (its byte + 1): every word's vector changes (in context)
        changed = (replaced(**batch).last_hidden_state - model(**batch).last_hidden_state).abs().sum(-1)
    assert (changed[batch["attention_mask"].bool()] > 0).all()


# -- the fast paths outside the kernels: the token cache, bf16, windows ----------------------------------------------


def test_token_cache_gives_same_numbers_without_char_cnn(tiny_model_dir):
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
        windows = [
            torch.stack(out.hidden_states)[:, 0] for out in model.forward_windows(ids, k, output_hidden_states=True)
        ]
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
