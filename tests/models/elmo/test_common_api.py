"""Arguments every transformers encoder takes, for the base model, the heads and the language model:
output_attentions=False is accepted and changes nothing, True is a clear error (ELMo has no attention);
output_hidden_states and return_dict as in transformers, the hidden states on the gradient path; the input
embeddings."""

import copy

import pytest
import torch
from conftest import load_fixture
from tolerance import assert_close_to_reference

from modeling_elmo import ElmoForLanguageModeling, ElmoForSequenceClassification, ElmoForTokenClassification, ElmoModel


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
    return [ElmoModel.from_pretrained(tiny_model_dir, **kwargs),
            ElmoForTokenClassification.from_pretrained(tiny_heads_dir / "token", **kwargs),
            ElmoForSequenceClassification.from_pretrained(tiny_heads_dir / "sequence", **kwargs),
            ElmoForLanguageModeling.from_pretrained(lm_dir, **kwargs)]


@pytest.mark.fidelity
def test_every_class_honours_output_hidden_states_and_return_dict(tiny, tiny_model_dir, tiny_heads_dir, lm_dir):
    """output_hidden_states (the argument, or the config's) gives the biLM layers on every class; they were None on
    the heads and missing on the language model. return_dict=False (argument or config) gives the same as a tuple."""
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
    """`retain_grad()` on the returned layers, then backward: each gets the gradient the outputs send it (they were
    masked copies off the path: every .grad None, so attribution tools silently got nothing). The mixes read every
    layer; the language model's softmax reads the top one. A frozen biLM takes gradients with
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
                type(model).__name__, index)


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
