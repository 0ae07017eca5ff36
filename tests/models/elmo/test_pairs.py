"""Text pairs through ElmoForSequenceClassification: each sentence through the biLM on its own, ESIM's soft
alignment computed as its paper writes it, single sentences unchanged, and the text-classification pipeline on
`{"text", "text_pair"}` at batch sizes 1 and 8 giving what the head gives."""

import math

import pytest
import torch
from tolerance import assert_close_to_reference
from transformers import pipeline

from elmo_transformers import ElmoTextClassificationPipeline
from modeling_elmo import ElmoForSequenceClassification
from tokenization_elmo import ElmoTokenizer

PAIRS = [
    ("A man is sleeping on a bench .", "Nobody sleeps ."),
    ("Two dogs run", "Animals are outside in the park"),
    ("", "an empty first sentence"),
    ("one", ""),
]
LABELS = {
    "id2label": {0: "entailment", 1: "neutral", 2: "contradiction"},
    "label2id": {"entailment": 0, "neutral": 1, "contradiction": 2},
}


@pytest.fixture(scope="module")
def pair_head(tiny_model_dir, tmp_path_factory):
    """A pair head on the tiny model (seeded random layers), saved with its tokenizer as fine-tuning saves it."""
    torch.manual_seed(0)
    model = ElmoForSequenceClassification.from_pretrained(
        tiny_model_dir, pair_encoder_dim=6, dropout=0.0, **LABELS
    ).eval()
    folder = tmp_path_factory.mktemp("pair-head")
    model.save_pretrained(folder)
    ElmoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(folder)
    return model, ElmoTokenizer.from_pretrained(folder), folder


def test_each_sentence_gets_the_elmo_vectors_it_gets_alone(pair_head, tiny):
    model, tokenizer, _ = pair_head
    base, _ = tiny
    seen = []
    hook = model.elmo.register_forward_hook(lambda module, args, output: seen.append(output))
    batch = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    with torch.no_grad():
        model(**batch)
    hook.remove()
    assert len(seen) == 2  # one biLM run per sequence, never the two joined
    for i, (first, second) in enumerate(PAIRS):
        for output, text in zip(seen, (first, second)):
            n = len(text.split())
            with torch.no_grad():
                alone = base(**tokenizer([text], return_tensors="pt")).last_hidden_state[0, :n]
            assert int(output.mask[i].sum()) == n
            assert_close_to_reference(output.last_hidden_state[i, :n], alone, what=f"pair {i}: {text!r}")


def esim_by_hand(encoder, a, b):
    """ESIM's equations (Chen et al. 2017, eqs. 11-16 and the pooling of eqs. 18-21) for one pair without padding,
    written word by word, with the attention scores scaled by 1/sqrt(width) as a Transformer's."""
    rows = []
    for x, y in ((a, b), (b, a)):
        aligned = []
        for i in range(len(x)):
            e = torch.stack([x[i] @ y[j] for j in range(len(y))]) / math.sqrt(len(x[i]))
            aligned.append(
                sum(w * y[j] for j, w in enumerate(torch.softmax(e, 0))) if len(y) else torch.zeros_like(x[i])
            )
        aligned = torch.stack(aligned)
        m = torch.cat([x, aligned, x - aligned, x * aligned], dim=-1)
        v, _ = encoder.composition(torch.relu(encoder.projection(m)).unsqueeze(0))
        rows += [v[0].mean(0), v[0].max(0).values]
    return torch.tanh(encoder.hidden(torch.cat(rows)))


def test_the_pair_encoder_is_esim_and_ignores_padding(pair_head):
    model, tokenizer, _ = pair_head
    torch.manual_seed(1)
    a, b = torch.randn(4, 16), torch.randn(3, 16)
    padded_a, padded_b = torch.zeros(2, 6, 16), torch.zeros(2, 5, 16)
    padded_a[0, :4], padded_b[0, :3] = a, b
    padded_a[1], padded_b[1] = torch.randn(6, 16), torch.randn(5, 16)  # a longer neighbour in the batch
    masks = torch.zeros(2, 6, dtype=torch.bool), torch.zeros(2, 5, dtype=torch.bool)
    masks[0][0, :4], masks[1][0, :3], masks[0][1], masks[1][1] = True, True, True, True
    with torch.no_grad():
        got = model.pair_encoder(padded_a, masks[0], padded_b, masks[1])[0]
        assert_close_to_reference(got, esim_by_hand(model.pair_encoder, a, b), what="ESIM")
        model.pair_encoder.alignment = False  # the baseline: a and b composed alone
        try:
            alone = model.pair_encoder(padded_a, masks[0], padded_b, masks[1])[0]
        finally:
            model.pair_encoder.alignment = True
    assert (alone - got).abs().max() > 1e-3


def test_single_sentences_are_unchanged_and_a_single_head_refuses_pairs(pair_head, tiny_heads_dir):
    model, tokenizer, _ = pair_head
    batch = tokenizer(["a b c", "d"], padding=True, return_tensors="pt")
    single = ElmoForSequenceClassification.from_pretrained(tiny_heads_dir / "sequence").eval()
    assert single.pair_encoder is None and not any("pair" in name for name in single.state_dict())
    pairs = tokenizer(["a b c", "d"], ["e", "f g"], padding=True, return_tensors="pt")
    with pytest.raises(
        ValueError,
        match=r"this head reads single sentences \(it has no pair encoder\): text pairs need a head trained with",
    ):
        single(**pairs)
    with pytest.raises(ValueError, match="pair_attention_mask was given without pair_input_ids"):
        model(**batch, pair_attention_mask=pairs["pair_attention_mask"])
    three = tokenizer(["a", "b", "c"], ["d", "e", "f"], return_tensors="pt")
    with pytest.raises(ValueError, match=r"pair_input_ids holds 3 second sentences for 2 first ones \(input_ids\)"):
        model(**batch, pair_input_ids=three["pair_input_ids"], pair_attention_mask=three["pair_attention_mask"])
    with torch.no_grad():  # a pair head reads a single sentence as the single head does: the mean, the classifier
        out = model(**batch, output_hidden_states=True)
        vectors = model.elmo(**batch).last_hidden_state
    mean = (vectors * batch["attention_mask"].unsqueeze(-1)).sum(1) / batch["attention_mask"].sum(1, keepdim=True)
    assert_close_to_reference(out.logits, model.classifier(mean), what="single sentences")


def test_pairs_give_a_loss_and_gradients_to_every_trainable_layer(pair_head, tiny_model_dir):
    _, tokenizer, folder = pair_head
    model = ElmoForSequenceClassification.from_pretrained(folder).train()
    batch = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    out = model(**batch, labels=torch.tensor([0, 1, 2, 0]))
    assert out.logits.shape == (4, 3) and out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert any(name.startswith("pair_encoder.") for name in trainable)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("batch_size", [1, 8])
def test_text_classification_pipeline_takes_text_pairs(pair_head, batch_size):
    model, tokenizer, folder = pair_head
    classifier = pipeline(
        "text-classification", model=str(folder), pipeline_class=ElmoTextClassificationPipeline, top_k=None
    )
    inputs = [{"text": a, "text_pair": b} for a, b in PAIRS]
    got = classifier(inputs, batch_size=batch_size)
    with torch.no_grad():
        batch = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
        probabilities = torch.softmax(model(**batch).logits, dim=-1)
    assert len(got) == len(PAIRS)
    for i, result in enumerate(got):
        scores = {r["label"]: r["score"] for r in result}
        assert_close_to_reference([scores[LABELS["id2label"][k]] for k in range(3)], probabilities[i], what=f"{i}")
    alone = classifier(inputs[0])  # one dict: one result, its labels' scores
    assert [r["label"] for r in alone] == [r["label"] for r in got[0]]
    assert_close_to_reference([r["score"] for r in alone], [r["score"] for r in got[0]], what="one pair")
    stock = classifier(PAIRS[0][0], text_pair=PAIRS[0][1])  # the stock way to give a pair: the pair, not the text
    assert_close_to_reference([r["score"] for r in stock[0]], [r["score"] for r in alone], what="text_pair=")
    with pytest.raises(ValueError, match='a text pair as {"text": str, "text_pair": str}'):
        classifier({"text": "a", "pair": "b"})
