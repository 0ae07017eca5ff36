"""ElmoForTokenClassification / ElmoForSequenceClassification: the ELMo recipe (frozen biLM, trained mix), loading
from a base ElmoModel folder, Auto classes with trust_remote_code, and the two fine-tuning commands."""

import json
import random

import datasets
import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    DataCollatorForTokenClassification,
    Trainer,
    TrainingArguments,
)

from tolerance import assert_close_to_reference

from modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification, masked_mean

TAGS = {
    "the": "DET",
    "a": "DET",
    "cat": "NOUN",
    "dog": "NOUN",
    "bird": "NOUN",
    "sees": "VERB",
    "likes": "VERB",
    "and": "CONJ",
    ".": "PUNCT",
}
LABELS = sorted(set(TAGS.values()))


def toy_tagged(n, seed):
    """Sentences of the toy language with their word-class tags (a rule the tagger can learn)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [
            rng.choice(["the", "a"]),
            rng.choice(["cat", "dog", "bird"]),
            rng.choice(["sees", "likes"]),
            rng.choice(["the", "a"]),
            rng.choice(["cat", "dog", "bird"]),
        ]
        if rng.random() < 0.4:
            words += ["and", rng.choice(["the", "a"]), rng.choice(["cat", "dog"]), rng.choice(["sees", "likes"])]
        out.append(words + ["."])
    return out


def tag_dataset(tokenizer, sentences):
    enc = tokenizer(sentences, is_split_into_words=True)
    labels = [[LABELS.index(TAGS[w]) for w in s] for s in sentences]
    return datasets.Dataset.from_dict({"input_ids": enc["input_ids"], "labels": labels})


def head_kwargs(**kwargs):
    label2id = {label: i for i, label in enumerate(LABELS)}
    return dict(num_labels=len(LABELS), id2label=dict(enumerate(LABELS)), label2id=label2id, **kwargs)


def train(model, tokenizer, dataset, tmp_path, **kwargs):
    args = dict(
        output_dir=str(tmp_path),
        report_to=[],
        per_device_train_batch_size=8,
        learning_rate=3e-2,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        max_steps=30,
        logging_steps=10,
    )
    args.update(kwargs)
    trainer = Trainer(
        model=model,
        args=TrainingArguments(**args),
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer),
    )
    trainer.train()
    return trainer


@pytest.mark.slow
def test_token_classifier_from_base_folder_learns_rule_with_frozen_bilm(tiny_model_dir, tiny, tmp_path):
    """The ELMo recipe: the biLM (loaded from a base ElmoModel folder) is bit-identical after training, the mix
    weights and gamma moved, and the tagger learned the toy rule on held-out sentences."""
    base, tokenizer = tiny
    # dropout 0: 0.5 (the default) on 16-dim vectors would need many more steps than a unit test affords
    model = ElmoForTokenClassification.from_pretrained(
        tiny_model_dir, **head_kwargs(task_encoder="lstm", task_encoder_dim=16, dropout=0.0)
    )
    assert all(torch.equal(model.elmo.state_dict()[k], v) for k, v in base.state_dict().items())
    assert not any(p.requires_grad for p in model.elmo.bilm.parameters())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    train(
        model,
        tokenizer,
        tag_dataset(tokenizer, toy_tagged(64, seed=0)),
        tmp_path,
        max_steps=60,
        learning_rate=0.03,
        per_device_train_batch_size=16,
    )
    after = model.state_dict()
    for name in before:
        if name.startswith("elmo.bilm."):
            assert torch.equal(after[name], before[name]), name
    for name in ("elmo.scalar_mixes.0.scalar_parameters", "elmo.scalar_mixes.0.gamma"):
        assert not torch.equal(after[name], before[name]), name

    held_out = toy_tagged(20, seed=1)
    enc = tokenizer(held_out, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        predicted = model.eval()(**enc).logits.argmax(-1)
    gold = [[LABELS.index(TAGS[w]) for w in s] for s in held_out]
    correct = sum(int(predicted[i, j] == g) for i, s in enumerate(gold) for j, g in enumerate(s))
    assert correct / sum(map(len, gold)) > 0.95


@pytest.mark.slow
def test_full_fine_tuning_changes_the_bilm(tiny_model_dir, tiny, tmp_path):
    _, tokenizer = tiny
    model = ElmoForTokenClassification.from_pretrained(tiny_model_dir, **head_kwargs(freeze_bilm=False))
    before = model.elmo.bilm.layers[0].input_weight.detach().clone()
    assert all(p.requires_grad for p in model.parameters())
    train(model, tokenizer, tag_dataset(tokenizer, toy_tagged(16, seed=0)), tmp_path, max_steps=2)
    assert not torch.equal(model.elmo.bilm.layers[0].input_weight, before)


def test_bilstm_encoder_tagger_masks_padding_and_matches_single_sentences(tiny_model_dir, tiny):
    _, tokenizer = tiny
    model = ElmoForTokenClassification.from_pretrained(
        tiny_model_dir, **head_kwargs(task_encoder="lstm", task_encoder_dim=6)
    ).eval()
    sentences = [["the", "cat", "sees", "a", "dog"], ["a", "bird"], []]
    with torch.no_grad():
        batch = model(**tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")).logits
        for i, words in enumerate(sentences[:2]):
            alone = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt")).logits
            assert_close_to_reference(batch[i, : len(words)], alone[0], f"sentence {i} in a batch")
    # Padded words: the encoder output is zero there, so the logits are the classifier bias.
    torch.testing.assert_close(batch[1, 2:], model.classifier.bias.expand(3, -1), atol=0, rtol=0)


def test_sequence_classifier_is_linear_on_masked_mean_of_elmo_vectors(tiny_model_dir, tiny):
    base, tokenizer = tiny
    model = ElmoForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=2).eval()
    enc = tokenizer(["the cat sees a dog", "a bird", ""], padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
        vectors = base(**enc)
    expected = masked_mean(vectors.last_hidden_state, vectors.mask) @ model.classifier.weight.T + model.classifier.bias
    assert_close_to_reference(logits, expected)
    # A sentence's words averaged by hand, and an empty sentence gives the bias alone.
    by_hand = vectors.last_hidden_state[1, :2].mean(0) @ model.classifier.weight.T + model.classifier.bias
    assert_close_to_reference(logits[1], by_hand)
    torch.testing.assert_close(logits[2], model.classifier.bias, atol=0, rtol=0)


def test_mix_l2_penalty_is_added_in_training_only(tiny_model_dir, tiny):
    _, tokenizer = tiny
    plain = ElmoForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=2, dropout=0.0)
    penalised = ElmoForSequenceClassification.from_pretrained(
        tiny_model_dir, num_labels=2, dropout=0.0, mix_l2_lambda=0.001
    )
    penalised.load_state_dict(plain.state_dict())
    with torch.no_grad():
        for model in (plain, penalised):
            model.elmo.scalar_mixes[0].scalar_parameters.copy_(torch.tensor([1.0, -2.0, 0.5]))
    enc = tokenizer(["the cat", "a dog sees"], padding=True, return_tensors="pt")
    labels = torch.tensor([0, 1])
    difference = penalised.train()(**enc, labels=labels).loss - plain.train()(**enc, labels=labels).loss
    assert difference.item() == pytest.approx(0.001 * (1 + 4 + 0.25), rel=1e-4)
    evaluated = penalised.eval()(**enc, labels=labels).loss.item()
    assert evaluated == pytest.approx(plain.eval()(**enc, labels=labels).loss.item())


def test_labels_shape_is_checked(tiny_model_dir, tiny):
    _, tokenizer = tiny
    model = ElmoForTokenClassification.from_pretrained(tiny_model_dir, **head_kwargs())
    enc = tokenizer([["the", "cat"]], is_split_into_words=True, return_tensors="pt")
    with pytest.raises(ValueError, match=r"labels must have shape \[batch, words\] = \[1, 2\]"):
        model(**enc, labels=torch.tensor([[0, 1, 2]]))


@pytest.mark.parametrize(
    "auto_class, head, kwargs",
    [
        (
            AutoModelForTokenClassification,
            ElmoForTokenClassification,
            head_kwargs(task_encoder="lstm", task_encoder_dim=4),
        ),
        (AutoModelForSequenceClassification, ElmoForSequenceClassification, dict(num_labels=3)),
    ],
)
def test_save_and_reload_with_auto_class_gives_identical_predictions(
    tiny_model_dir, tiny, tmp_path, auto_class, head, kwargs
):
    _, tokenizer = tiny
    # The base folder loads straight into the head through the Auto class (one auto_map lists every head).
    model = auto_class.from_pretrained(tiny_model_dir, trust_remote_code=True, **kwargs).eval()
    assert type(model).__name__ == head.__name__
    with torch.no_grad():
        model.classifier.weight.normal_()
    model.save_pretrained(tmp_path / "saved")
    tokenizer.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert {
        "AutoModel",
        "AutoModelForTokenClassification",
        "AutoModelForSequenceClassification",
        "AutoModelForPreTraining",
    } <= set(config["auto_map"])
    loaded = auto_class.from_pretrained(tmp_path / "saved", trust_remote_code=True).eval()
    assert not any(p.requires_grad for p in loaded.elmo.bilm.parameters())  # still frozen after loading
    enc = tokenizer(["the cat sees a dog", "a bird"], padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(loaded(**enc).logits, model(**enc).logits, atol=0, rtol=0)


def test_labels_that_would_be_misread_are_refused(tiny_model_dir, tiny):
    from modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification

    _, tokenizer = tiny
    enc = tokenizer(["a b c", "d"], padding=True, return_tensors="pt")
    token = ElmoForTokenClassification.from_pretrained(tiny_model_dir, num_labels=3)
    sequence = ElmoForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=3)
    cases = [
        (token, torch.zeros(2, 3), TypeError, r"integer class ids \[batch, words\], got torch.float32"),
        (token, torch.zeros(2, 3, dtype=torch.bool), TypeError, "got torch.bool"),
        (token, [[0, 0, 0], [0, 0, 0]], TypeError, "got list"),
        (token, torch.full((2, 3), 3), ValueError, r"class ids in \[0, 2\] or -100 \(ignored\), got \[3, 3, 3\]"),
        (token, torch.full((2, 3), -5), ValueError, r"got \[-5, -5, -5\]"),
        (sequence, torch.tensor([7, 0]), ValueError, r"got \[7\]"),
        (sequence, torch.tensor([-1, 0]), ValueError, r"got \[-1\]"),
        (sequence, [1, 0], TypeError, "got list"),
    ]
    for model, labels, error, match in cases:
        with pytest.raises(error, match=match):
            model(**enc, labels=labels)
    # Integer labels of any width are class ids (int16 too, not multi-label targets), read exactly.
    want = sequence(**enc, labels=torch.tensor([2, 0])).loss
    assert torch.equal(sequence(**enc, labels=torch.tensor([2, 0], dtype=torch.int16)).loss, want)
    assert torch.equal(
        token(**enc, labels=torch.tensor([[2, 0, 1], [1, -100, -100]], dtype=torch.int32)).loss,
        token(**enc, labels=torch.tensor([[2, 0, 1], [1, -100, -100]])).loss,
    )


def test_bio_span_f1():
    """Span scores by the conlleval rule, counted by hand: an I- after O (or after another type) starts a chunk."""
    from elmo_transformers.training.finetuning import token_metrics
    from transformers import EvalPrediction

    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    ids = {tag: i for i, tag in enumerate(labels)}

    def scores(gold, predicted):
        width = max(map(len, gold))

        def pad(rows, fill):
            return np.array([[ids[t] for t in r] + [fill] * (width - len(r)) for r in rows])

        logits = np.eye(len(labels))[pad(predicted, 0)]
        return token_metrics(labels)(EvalPrediction(predictions=logits, label_ids=pad(gold, -100)))

    # gold chunks: PER 0-2, LOC 3-4, PER 0-1; predicted: PER 0-2 (right), LOC 3-5 (wrong end), LOC 0-1 (wrong type)
    got = scores(
        [["B-PER", "I-PER", "O", "B-LOC", "O"], ["B-PER"]], [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-LOC"]]
    )
    assert got["precision"] == pytest.approx(1 / 3) and got["recall"] == pytest.approx(1 / 3)
    assert got["f1"] == pytest.approx(1 / 3) and got["accuracy"] == pytest.approx(4 / 6)
    # I-PER I-PER B-PER is two chunks, PER 0-2 and PER 2-3: both found in the same tags written with B-
    got = scores([["B-PER", "I-PER", "B-PER"]], [["I-PER", "I-PER", "B-PER"]])
    assert got["precision"] == got["recall"] == got["f1"] == 1.0


@pytest.mark.slow
def test_token_classification_script_on_conll(tiny_model_dir, tmp_path):
    from elmo_transformers.cli.finetune import main as finetune

    def write(path, sentences):
        path.write_text("".join("".join(f"{w}\t{TAGS[w]}\n" for w in s) + "\n" for s in sentences))

    write(tmp_path / "train.conll", toy_tagged(32, seed=0))
    write(tmp_path / "valid.conll", toy_tagged(8, seed=1))
    trainer = finetune(
        [
            "token-classification",
            "--model_name_or_path",
            str(tiny_model_dir),
            "--train_file",
            str(tmp_path / "train.conll"),
            "--validation_file",
            str(tmp_path / "valid.conll"),
            "--output_dir",
            str(tmp_path / "out"),
            "--do_train",
            "--do_eval",
            "--max_steps",
            "3",
            "--report_to",
            "none",
            "--save_strategy",
            "no",
            "--disable_tqdm",
            "true",
            "--task_encoder_dim",
            "4",
        ]
    )
    metrics = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert 0 <= metrics["eval_accuracy"] <= 1 and "eval_f1" not in metrics  # POS-like tags: accuracy only
    loaded = AutoModelForTokenClassification.from_pretrained(tmp_path / "out", trust_remote_code=True).eval()
    assert loaded.config.id2label == {i: label for i, label in enumerate(LABELS)}
    assert loaded.config.task_encoder == "lstm"
    assert not torch.equal(loaded.elmo.scalar_mixes[0].gamma, torch.ones(1))  # trained and saved
    assert trainer.model.config.freeze_bilm


@pytest.mark.slow
def test_sequence_classification_script_on_jsonl(tiny_model_dir, tmp_path, caplog, capfd, recwarn):
    """Also: on a CPU, fine-tuning prints no pin_memory warning and no special-token notice."""
    from elmo_transformers.cli.finetune import main as finetune

    rng = random.Random(0)
    words = {"pos": ["good", "fine", "great"], "neg": ["bad", "awful", "poor"]}
    rows = [
        {"text": " ".join(rng.choice(words[label]) for _ in range(3)), "label": label}
        for label in ("pos", "neg")
        for _ in range(12)
    ]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    finetune(
        [
            "sequence-classification",
            "--model_name_or_path",
            str(tiny_model_dir),
            "--train_file",
            str(tmp_path / "train.jsonl"),
            "--validation_file",
            str(tmp_path / "train.jsonl"),
            "--test_file",
            str(tmp_path / "train.jsonl"),
            "--output_dir",
            str(tmp_path / "out"),
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--max_steps",
            "2",
            "--report_to",
            "none",
            "--save_strategy",
            "no",
            "--disable_tqdm",
            "true",
        ]
    )
    for split in ("eval", "test"):
        metrics = json.loads((tmp_path / "out" / f"{split}_results.json").read_text())
        assert {f"{split}_accuracy", f"{split}_macro_f1"} <= set(metrics)
    noise = [str(w.message) for w in recwarn] + [r.getMessage() for r in caplog.records] + [capfd.readouterr().err]
    assert not [n for n in noise if "pin_memory" in n or "PAD/BOS/EOS" in n], noise
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "out", trust_remote_code=True)
    assert loaded.config.id2label == {0: "neg", 1: "pos"}


def test_macro_f1_by_hand():
    from elmo_transformers.training.finetuning import sequence_metrics as compute_metrics
    from transformers import EvalPrediction

    logits = np.eye(3)[[0, 0, 1, 2]]  # predicted 0, 0, 1, 2
    metrics = compute_metrics(EvalPrediction(predictions=logits, label_ids=np.array([0, 1, 1, 2])))
    assert metrics["accuracy"] == 0.75
    assert metrics["macro_f1"] == pytest.approx(np.mean([2 / 3, 2 / 3, 1.0]))
