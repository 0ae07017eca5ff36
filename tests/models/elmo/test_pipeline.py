"""The three pipelines (pipeline_elmo.py; the installed classes through `pipeline_class=`, as one process runs one
copy of the code; the folder's copies with trust_remote_code: test_hub_download.py, test_push_to_hub.py) at batch
sizes 1 and 8 give what direct model calls give: AllenNLP's ELMo vectors, the heads' labels and scores, word-level
entities with character offsets into the input string."""

import numpy as np
import pytest
import torch
from conftest import SHIPPED, TOKEN_LABELS, load_fixture
from tolerance import assert_close_to_reference
from transformers import pipeline

from elmo_transformers import (
    ElmoFeatureExtractionPipeline,
    ElmoTextClassificationPipeline,
    ElmoTokenClassificationPipeline,
)
from modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification, ElmoModel, masked_mean
from tokenization_elmo import ElmoTokenizer

# Odd whitespace on purpose (tab, double space, newline, no-break space): offsets must point into the raw string.
TEXTS = [
    "He sat on the bank of the river .",
    "New  York\tis big",
    "",
    "ELMo",
    "a b c d e f g h i j k",
    "caf\u00e9 \u00a0na\u00efve\nr\u00e9sum\u00e9 !",
]


def direct(model_class, folder, texts):
    model = model_class.from_pretrained(folder).eval()
    batch = ElmoTokenizer.from_pretrained(folder)(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch)


@pytest.mark.slow
@pytest.mark.fidelity
@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("which", ["tiny", "shipped"])
def test_feature_extraction_equals_the_model(which, batch_size, tiny_model_dir):
    folder = str(tiny_model_dir if which == "tiny" else SHIPPED)
    extractor = pipeline("feature-extraction", model=folder, pipeline_class=ElmoFeatureExtractionPipeline)
    assert type(extractor).__name__ == "ElmoFeatureExtractionPipeline"
    got = extractor(TEXTS, batch_size=batch_size, return_tensors=True)
    want = direct(ElmoModel, folder, TEXTS)
    for i, text in enumerate(TEXTS):
        n = len(text.split())
        assert got[i].shape == (1, n, want.last_hidden_state.shape[-1])
        assert_close_to_reference(got[i][0], want.last_hidden_state[i, :n], what=f"{which}, text {i}")


@pytest.mark.slow
@pytest.mark.fidelity
def test_feature_extraction_gives_allennlp_elmo_vectors(tiny_model_dir):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    extractor = pipeline("feature-extraction", model=str(tiny_model_dir), pipeline_class=ElmoFeatureExtractionPipeline)
    chosen = (0, 1, 3, 5, 9)  # ASCII, one word, accents, emoji + ZWJ, a long mixed sentence
    got = extractor([" ".join(sentences[i]) for i in chosen], batch_size=8)
    for i, vectors in zip(chosen, got):
        n = int(expected["n_tokens"][i])
        assert np.array(vectors).shape == (1, n, 16)
        assert_close_to_reference(np.array(vectors)[0], expected["elmo_representation"][i, :n], what=f"sentence {i}")


@pytest.mark.slow
def test_sentence_vectors_are_the_masked_mean(tiny):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    model, tokenizer = tiny
    batch = tokenizer(sentences[:4], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    want = [expected["elmo_representation"][i, : expected["n_tokens"][i]].mean(axis=0) for i in range(4)]
    assert_close_to_reference(masked_mean(out.last_hidden_state, out.mask), np.stack(want), what="sentence vectors")
    empty = model(**tokenizer([""], return_tensors="pt"))
    assert masked_mean(empty.last_hidden_state, empty.mask).abs().sum() == 0  # no words: zeros, not NaN


@pytest.fixture(scope="module")
def shipped_sequence_head(tmp_path_factory):
    """A sequence head on the shipped model (seeded random classifier), saved as fine-tuning saves it."""
    folder = tmp_path_factory.mktemp("shipped-head")
    torch.manual_seed(0)
    model = ElmoForSequenceClassification.from_pretrained(
        SHIPPED, id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1}
    )
    model.save_pretrained(folder)
    ElmoTokenizer.from_pretrained(SHIPPED).save_pretrained(folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("which", ["tiny", "shipped"])
def test_text_classification_equals_the_head(which, batch_size, tiny_heads_dir, request):
    folder = tiny_heads_dir / "sequence" if which == "tiny" else request.getfixturevalue("shipped_sequence_head")
    classifier = pipeline(
        "text-classification", model=str(folder), pipeline_class=ElmoTextClassificationPipeline, top_k=None
    )
    assert type(classifier).__name__ == "ElmoTextClassificationPipeline"
    got = classifier(TEXTS, batch_size=batch_size)
    probabilities = torch.softmax(direct(ElmoForSequenceClassification, folder, TEXTS).logits, dim=-1)
    for i, result in enumerate(got):
        scores = {r["label"]: r["score"] for r in result}
        assert_close_to_reference([scores["negative"], scores["positive"]], probabilities[i], what=f"text {i}")


def word_spans(text):
    """Character spans of the whitespace-separated words, found by walking the string (independent of the code)."""
    spans, start = [], None
    for i, ch in enumerate(text + " "):
        if ch.isspace() and start is not None:
            spans.append((start, i))
            start = None
        elif not ch.isspace() and start is None:
            start = i
    return spans


def expected_groups(labels, spans):
    """transformers' documented "simple" grouping: adjacent words of one entity type, a B- tag starts a new group,
    O is left out. Returns (type, start, end) triples."""
    groups = []
    for label, (start, end) in zip(labels, spans):
        if label == "O":
            previous = None
            continue
        tag, kind = label.split("-")
        if groups and previous == kind and tag == "I":
            groups[-1] = (kind, groups[-1][1], end)
        else:
            groups.append((kind, start, end))
        previous = kind
    return groups


@pytest.mark.parametrize("batch_size", [1, 8])
def test_token_classification_gives_word_entities_with_offsets(tiny_heads_dir, batch_size):
    folder = tiny_heads_dir / "token"
    tagger = pipeline("token-classification", model=str(folder), pipeline_class=ElmoTokenClassificationPipeline)
    assert type(tagger).__name__ == "ElmoTokenClassificationPipeline"
    logits = direct(ElmoForTokenClassification, folder, TEXTS).logits
    probabilities = torch.softmax(logits, dim=-1)
    got = {
        strategy: tagger(TEXTS, batch_size=batch_size, aggregation_strategy=strategy, ignore_labels=[])
        for strategy in ("none", "simple", "first")
    }
    n_groups = 0
    for i, text in enumerate(TEXTS):
        spans = word_spans(text)
        labels = [TOKEN_LABELS[k] for k in logits[i, : len(spans)].argmax(-1).tolist()]
        # none: one entity per word, the head's argmax and probability, the word's offsets in the raw text.
        words = got["none"][i]
        assert [(e["index"], e["entity"], e["start"], e["end"]) for e in words] == [
            (j, label, *span) for j, (label, span) in enumerate(zip(labels, spans))
        ]
        assert all(e["word"] == text[e["start"] : e["end"]] for e in words)
        assert_close_to_reference(
            [e["score"] for e in words], probabilities[i, : len(spans)].max(-1).values, what=f"text {i} scores"
        )
        # simple: adjacent words grouped by entity type; first is the same for whole-word tokens.
        groups = [(e["entity_group"], e["start"], e["end"]) for e in got["simple"][i] if e["entity_group"] != "O"]
        assert groups == expected_groups(labels, spans)
        assert all(e["word"] == text[e["start"] : e["end"]] for e in got["simple"][i])
        assert [(e["entity_group"], e["start"], e["end"]) for e in got["first"][i]] == [
            (e["entity_group"], e["start"], e["end"]) for e in got["simple"][i]
        ]
        n_groups += sum(len(text[start:end].split()) > 1 for _, start, end in groups)
    assert n_groups > 0, "no multi-word group: the grouping was not exercised"


def test_token_classification_of_pretokenized_words_and_default_ignore(tiny_heads_dir):
    tagger = pipeline(
        "token-classification", model=str(tiny_heads_dir / "token"), pipeline_class=ElmoTokenClassificationPipeline
    )
    words = ["He", "sat", "on", "the", "bank"]
    (got,) = tagger(words, is_split_into_words=True, ignore_labels=[])  # a list of one result, as the stock pipeline
    assert [(e["word"], e["start"], e["end"]) for e in got] == [
        ("He", 0, 2),
        ("sat", 3, 6),
        ("on", 7, 9),
        ("the", 10, 13),
        ("bank", 14, 18),
    ]
    assert [e for e in got if e["entity"] != "O"] == tagger(" ".join(words))  # by default "O" is left out
