"""ElmoForLanguageModeling: targets, full and sampled softmax, Trainer (perplexity, gradient accumulation, activation
checkpointing, bf16, resume) and `elmo-transformers pretrain`, on tiny models."""

import json
import math
import random

import datasets
import numpy as np
import pytest
import torch
from conftest import FIXTURES, load_fixture
from reference_elmo import load_hdf5, reference_sentence
from transformers import AutoModelForPreTraining, Trainer, TrainingArguments

from configuration_elmo import ElmoConfig
from modeling_elmo import ElmoForLanguageModeling, lm_perplexities, log_uniform_candidates
from tokenization_elmo import ElmoTokenizer

from elmo_transformers.training.pretraining import compute_metrics
from elmo_transformers.training.data import DataCollatorForElmoLanguageModeling, build_vocabulary, split_into_windows
from elmo_transformers.training.pretraining import frequent_new_words

NOUNS = ["cat", "dog", "bird", "fish", "cow"]
VERBS = ["sees", "likes", "chases", "bites"]


def toy_sentences(n, seed):
    """A learnable toy language: `the NOUN VERB the NOUN .`, sometimes with `and the NOUN VERB the NOUN .` added."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(n):
        words = ["the", rng.choice(NOUNS), rng.choice(VERBS), "the", rng.choice(NOUNS)]
        if rng.random() < 0.5:
            words += ["and", "the", rng.choice(NOUNS), rng.choice(VERBS), "the", rng.choice(NOUNS)]
        sentences.append(words + ["."])
    return sentences


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """(tokenizer, train windows, held-out windows) of the toy language; the vocabulary built from the train text."""
    train = datasets.Dataset.from_dict({"words": toy_sentences(64, seed=0)})
    held_out = datasets.Dataset.from_dict({"words": toy_sentences(16, seed=1)})
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    build_vocabulary(train, path)
    return ElmoTokenizer(vocab_file=str(path)), train, held_out


def tiny_lm(vocab_size, **kwargs):
    torch.manual_seed(0)
    config = ElmoConfig(
        char_embedding_dim=4,
        filters=[[1, 4], [2, 4]],
        n_highway=1,
        lstm_dim=16,
        projection_dim=8,
        lm_vocab_size=vocab_size,
        **kwargs,
    )
    return ElmoForLanguageModeling(config)


def trainer_for(model, tokenizer, train, tmp_path, held_out=None, **kwargs):
    args = dict(
        output_dir=str(tmp_path),
        report_to=[],
        remove_unused_columns=False,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=16,
        learning_rate=1e-2,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        logging_steps=1,
    )
    args.update(kwargs)
    return Trainer(
        model=model,
        args=TrainingArguments(**args),
        train_dataset=train,
        eval_dataset=held_out,
        processing_class=tokenizer,
        data_collator=DataCollatorForElmoLanguageModeling(tokenizer),
        compute_metrics=compute_metrics,
    )


def test_vocabulary_file_is_bilm_tf_format(tmp_path):
    words = datasets.Dataset.from_dict({"words": [["b", "a", "b", "<S>"], ["c", "b", "a", "d"]]})
    build_vocabulary(words, tmp_path / "v.txt", vocab_size=6)
    # specials first, then by descending count, ties alphabetical; 6 lines in all; a literal <S> is not counted twice
    assert (tmp_path / "v.txt").read_text().split("\n") == ["<S>", "</S>", "<UNK>", "b", "a", "c", ""]
    build_vocabulary(words, tmp_path / "m.txt", min_count=2)
    assert (tmp_path / "m.txt").read_text().split() == ["<S>", "</S>", "<UNK>", "b", "a"]


def test_mask_and_pad_in_the_text_stay_the_tokenizer_s_added_tokens(tmp_path):
    words = datasets.Dataset.from_dict({"words": [["<mask>", "a", "<pad>", "<mask>"], ["<pad>", "<mask>", "b"]]})
    build_vocabulary(words, tmp_path / "v.txt")
    assert (tmp_path / "v.txt").read_text().split() == ["<S>", "</S>", "<UNK>", "a", "b"]
    tokenizer = ElmoTokenizer(vocab_file=str(tmp_path / "v.txt"))
    assert tokenizer.mask_token_id >= tokenizer.vocab_size and tokenizer.pad_token_id >= tokenizer.vocab_size
    assert frequent_new_words(words, tokenizer.get_vocab(), 10, 1)[0] == []


def test_windows_are_nearly_equal_and_keep_every_word():
    words = [str(i) for i in range(11)]
    assert [len(w) for w in split_into_windows(words, 4)] == [4, 4, 3]
    assert sum(split_into_windows(words, 4), []) == words
    assert split_into_windows([], 4) == []


def test_collator_labels_are_words_then_eos(toy):
    tokenizer, _, _ = toy
    batch = DataCollatorForElmoLanguageModeling(tokenizer)([{"words": ["the", "cat", "zebra"]}, {"words": ["dog"]}])
    vocab = tokenizer.get_vocab()
    assert batch["input_ids"].shape == (2, 3, 50)
    assert batch["labels"].tolist() == [
        [vocab["the"], vocab["cat"], 2, 1],  # zebra is <UNK> (2), then </S> (1)
        [vocab["dog"], 1, -100, -100],
    ]


def test_loss_matches_numpy_reference_with_boundaries(tiny_model_dir):
    """Forward position j (0 = <S>) predicts word j (last: </S>); backward position j predicts word j - 1 (first:
    <S>). Checked against the independent NumPy biLM on the AllenNLP fixture weights, with a new softmax."""
    model = ElmoForLanguageModeling.from_pretrained(tiny_model_dir, lm_vocab_size=7).eval()
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    sentences = [["The", "cat", "sat"], ["Hi"]]
    words = {"The": 3, "cat": 4, "sat": 5, "Hi": 6}
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    labels = torch.tensor([[3, 4, 5, 1], [6, 1, -100, -100]])
    with torch.no_grad():
        out = model(**enc, labels=labels)

    arrays, options = load_hdf5(FIXTURES / "allennlp-tiny" / "weights.hdf5"), load_fixture("allennlp-tiny")[2]
    weight = model.lm_softmax.weight.detach().double().numpy()
    bias = model.lm_softmax.bias.detach().double().numpy()

    def nll(state, target):
        logits = weight @ state + bias
        return np.log(np.exp(logits - logits.max()).sum()) + logits.max() - logits[target]

    total_forward, total_backward, count = [], [], 0
    for i, sentence in enumerate(sentences):
        ids = enc["input_ids"][i, : len(sentence)].numpy()
        top = reference_sentence(arrays, options, ids, keep_boundaries=True)[-1]  # [n + 2, 2P]: <S> words </S>
        targets = [0] + [words[w] for w in sentence] + [1]
        forward = sum(nll(top[p, :8], targets[p + 1]) for p in range(len(sentence) + 1))
        backward = sum(nll(top[p, 8:], targets[p - 1]) for p in range(1, len(sentence) + 2))
        np.testing.assert_allclose(out.forward_nll[i].item(), forward, rtol=1e-5)
        np.testing.assert_allclose(out.backward_nll[i].item(), backward, rtol=1e-5)
        total_forward.append(forward)
        total_backward.append(backward)
        count += len(sentence) + 1
    assert out.num_predictions.tolist() == [4, 2]
    np.testing.assert_allclose(out.loss.item(), (sum(total_forward) + sum(total_backward)) / (2 * count), rtol=1e-5)
    np.testing.assert_allclose(out.forward_perplexity.item(), math.exp(sum(total_forward) / count), rtol=1e-5)
    np.testing.assert_allclose(
        out.perplexity.item(),
        (math.exp(sum(total_forward) / count) + math.exp(sum(total_backward) / count)) / 2,
        rtol=1e-5,
    )


def test_head_loads_biLM_from_base_folder_with_new_softmax(tiny_model_dir, tiny):
    base, _ = tiny
    model = ElmoForLanguageModeling.from_pretrained(tiny_model_dir, lm_vocab_size=11)
    for name, value in base.state_dict().items():
        assert torch.equal(model.elmo.state_dict()[name], value), name
    assert model.lm_softmax.weight.shape == (11, 8) and torch.isfinite(model.lm_softmax.weight).all()
    assert not any(p.requires_grad for p in model.elmo.scalar_mixes.parameters())  # unused by the LM: frozen


def test_without_labels_returns_logits_aligned_with_targets(toy):
    tokenizer, _, _ = toy
    model = tiny_lm(tokenizer.vocab_size).eval()
    batch = DataCollatorForElmoLanguageModeling(tokenizer)([{"words": ["the", "cat", "sees"]}, {"words": ["dog"]}])
    labels = batch.pop("labels")
    with torch.no_grad():
        logits = model(**batch)
        out = model(**batch, labels=labels)
    assert logits.forward_logits.shape == (2, 4, tokenizer.vocab_size)
    forward = torch.nn.functional.cross_entropy(logits.forward_logits[0], labels[0], reduction="sum")
    backward_targets = torch.tensor([0, *labels[0, :3].tolist()])
    backward = torch.nn.functional.cross_entropy(logits.backward_logits[0], backward_targets, reduction="sum")
    torch.testing.assert_close(out.forward_nll[0], forward)
    torch.testing.assert_close(out.backward_nll[0], backward)


def test_bad_labels_are_named(toy):
    tokenizer, _, _ = toy
    model = tiny_lm(tokenizer.vocab_size)
    batch = DataCollatorForElmoLanguageModeling(tokenizer)([{"words": ["the", "cat"]}, {"words": ["dog"]}])
    with pytest.raises(ValueError, match=r"labels must have shape \[batch, words \+ 1\]"):
        model(input_ids=batch["input_ids"], labels=batch["labels"][:, :-1])
    wrong = batch["labels"].clone()
    wrong[1, 2] = 3
    with pytest.raises(ValueError, match="past a sentence's end"):
        model(input_ids=batch["input_ids"], labels=wrong)
    wrong[1, 2] = tokenizer.vocab_size
    with pytest.raises(ValueError, match="word ids in"):
        model(input_ids=batch["input_ids"], labels=wrong)
    ignored = model(input_ids=batch["input_ids"], labels=torch.full_like(batch["labels"], -100))
    assert ignored.loss.item() == 0 and ignored.num_predictions.tolist() == [0, 0]  # nothing to predict: no NaN
    with pytest.raises(ValueError, match="lm_vocab_size"):
        ElmoForLanguageModeling(ElmoConfig(lstm_dim=16, projection_dim=8, filters=[[1, 4]]))


@pytest.mark.slow
def test_sampled_softmax_with_every_word_as_negative_equals_full_softmax(toy):
    """num_sampled >= vocabulary: every word once, expected count 1, so no correction; the accidental hit (the true
    word among the negatives) is removed. Equal to the full softmax up to float32 summation order (1e-5)."""
    tokenizer, train, _ = toy
    batch = DataCollatorForElmoLanguageModeling(tokenizer)([train[i] for i in range(8)])
    full = tiny_lm(tokenizer.vocab_size)
    sampled = tiny_lm(tokenizer.vocab_size, lm_n_negative_samples=tokenizer.vocab_size)
    sampled.load_state_dict(full.state_dict())
    full.train(), sampled.train()  # the sampled softmax is used in training only (no dropout: lm_dropout is 0)
    loss_full, loss_sampled = full(**batch).loss, sampled(**batch).loss
    torch.testing.assert_close(loss_sampled, loss_full, atol=1e-5, rtol=0)
    loss_full.backward(), loss_sampled.backward()
    for (name, a), b in zip(full.named_parameters(), sampled.parameters()):
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-4, msg=name)
    assert sampled.eval()(**batch).loss.item() == pytest.approx(full.eval()(**batch).loss.item(), abs=1e-6)


@pytest.mark.slow
def test_log_uniform_sampler_expected_counts_match_frequencies():
    """The log-Q correction needs `expected_count` close to each word's real inclusion probability. TF's formula
    (conditional on the number of tries) is close when num_sampled is a small part of the vocabulary, as in
    training (it overestimates the most frequent words when num_sampled / vocab is large: 0.94 vs 0.80 for word 0
    with 10 of 200). Compared per band of ten frequency ranks, 2000 seeded draws."""
    torch.manual_seed(0)
    vocab, num_sampled, trials = 1000, 100, 2000
    hits, expected = torch.zeros(vocab), torch.zeros(vocab)
    everyone = torch.arange(vocab)
    for _ in range(trials):
        ids, expected_count = log_uniform_candidates(num_sampled, vocab)
        assert len(set(ids.tolist())) == num_sampled and 0 <= ids.min() and ids.max() < vocab
        hits[ids] += 1
        expected += expected_count(everyone)
    bands = torch.tensor([0, 10, 30, 100, 300, 1000])
    for lo, hi in zip(bands[:-1], bands[1:]):
        assert hits[lo:hi].sum().item() == pytest.approx(expected[lo:hi].sum().item(), rel=0.03), (lo, hi)
    assert hits[:10].mean() > hits[100:110].mean() > hits[-10:].mean()
    # Without duplicates TF uses num_sampled * p (p = log(2) / log(1001) for word 0)
    ids, expected_count = log_uniform_candidates(1, vocab)
    assert expected_count(torch.tensor([0])).item() == pytest.approx(math.log(2) / math.log(1001), rel=1e-6)


@pytest.mark.slow
def test_trainer_lowers_held_out_perplexity(toy, tmp_path):
    tokenizer, train, held_out = toy
    model = tiny_lm(tokenizer.vocab_size, lm_n_negative_samples=8)
    trainer = trainer_for(model, tokenizer, train, tmp_path, held_out, max_steps=60, learning_rate=3e-2)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    # Uniform over the vocabulary would be vocab_size; the toy language allows ~5 words per position on average.
    assert before["eval_perplexity"] > 0.8 * tokenizer.vocab_size
    assert after["eval_perplexity"] < 0.4 * before["eval_perplexity"]
    assert after["eval_forward_perplexity"] < 5 and after["eval_backward_perplexity"] < 5


@pytest.mark.slow
def test_gradient_accumulation_2x4_equals_batch_8(toy, tmp_path):
    """With Trainer's num_items_in_batch the accumulated loss is the batch-8 loss exactly, even though the two
    micro-batches hold different numbers of predictions. SGD with lr 1: update = -gradient."""
    tokenizer, train, _ = toy
    eight = train.select(range(8))
    assert len({len(w) for w in eight["words"]}) > 1  # unequal sentence lengths
    reference = tiny_lm(tokenizer.vocab_size)
    batch = DataCollatorForElmoLanguageModeling(tokenizer)(list(eight))
    reference.train()(**batch).loss.backward()
    start = {k: v.clone() for k, v in reference.state_dict().items()}
    reference_loss = reference(**batch).loss.item()

    for size, steps in ((8, 1), (4, 2)):
        model = tiny_lm(tokenizer.vocab_size)
        trainer = trainer_for(
            model,
            tokenizer,
            eight,
            tmp_path / str(size),
            per_device_train_batch_size=size,
            gradient_accumulation_steps=steps,
            max_steps=1,
            optim="sgd",
            learning_rate=1.0,
            max_grad_norm=0,
            lr_scheduler_type="constant",
            weight_decay=0.0,
        )
        trainer.train()
        assert trainer.state.log_history[-1]["train_loss"] == pytest.approx(reference_loss, rel=1e-5)
        for name, param in model.named_parameters():
            if param.requires_grad:
                grad = reference.get_parameter(name).grad
                torch.testing.assert_close(start[name] - param.detach(), grad, atol=1e-6, rtol=1e-5, msg=name)


@pytest.mark.slow
def test_activation_checkpointing_gives_the_same_gradients(toy, tmp_path):
    tokenizer, train, _ = toy
    batch = DataCollatorForElmoLanguageModeling(tokenizer)([train[i] for i in range(4)])
    plain, checkpointed = tiny_lm(tokenizer.vocab_size), tiny_lm(tokenizer.vocab_size)
    checkpointed.activation_checkpointing_enable()
    calls = []

    def counting(original):
        return lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs)

    for layer in checkpointed.elmo.bilm.layers:
        layer._gradient_checkpointing_func = counting(layer._gradient_checkpointing_func)
    plain.train()(**batch).loss.backward()
    checkpointed.train()(**batch).loss.backward()
    assert len(calls) == 2  # both LSTM layers were checkpointed
    for (name, a), b in zip(plain.named_parameters(), checkpointed.parameters()):
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, atol=1e-6, rtol=1e-5, msg=name)
    model = tiny_lm(tokenizer.vocab_size)
    trainer = trainer_for(model, tokenizer, train, tmp_path, max_steps=2, activation_checkpointing=True)
    trainer.train()
    assert model.is_activation_checkpointing and np.isfinite(trainer.state.log_history[-1]["train_loss"])


@pytest.mark.slow
def test_bf16_training_on_cpu(toy, tmp_path):
    tokenizer, train, held_out = toy
    model = tiny_lm(tokenizer.vocab_size, lm_n_negative_samples=6)
    batch = DataCollatorForElmoLanguageModeling(tokenizer)([held_out[i] for i in range(8)])
    with torch.no_grad():
        full = model.eval()(**batch).loss
        with torch.autocast(model.device.type, dtype=torch.bfloat16):
            half = model(**batch).loss
    assert half.dtype == torch.float32 and abs(half.item() - full.item()) < 0.02 * full.item()
    # Trainer accepts bf16 without an accelerator only with use_cpu (then it autocasts on the CPU).
    use_cpu = not (torch.cuda.is_available() or torch.backends.mps.is_available())
    trainer = trainer_for(model, tokenizer, train, tmp_path, max_steps=3, bf16=True, use_cpu=use_cpu)
    dtypes = []
    model.elmo.bilm.char_cnn.projection.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    trainer.train()
    assert dtypes and set(dtypes) == {torch.bfloat16}  # Trainer really ran the matmuls in bf16
    assert all(np.isfinite(h["loss"]) for h in trainer.state.log_history if "loss" in h)


@pytest.mark.slow
def test_resume_from_checkpoint_continues_exactly(toy, tmp_path):
    """Sampled softmax and dropout draw from the RNG that Trainer saves and restores."""
    tokenizer, train, _ = toy
    common = dict(max_steps=6, save_strategy="steps", save_steps=3, learning_rate=1e-2)
    straight = tiny_lm(tokenizer.vocab_size, lm_n_negative_samples=6, lm_dropout=0.1)
    trainer_for(straight, tokenizer, train, tmp_path / "a", **common).train()
    resumed = tiny_lm(tokenizer.vocab_size, lm_n_negative_samples=6, lm_dropout=0.1)
    trainer_for(resumed, tokenizer, train, tmp_path / "b", **common).train(
        resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-3")
    )
    for (name, a), b in zip(straight.named_parameters(), resumed.parameters()):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=0, msg=name)


def test_perplexities_from_sums():
    out = lm_perplexities(torch.tensor([2.0, 4.0]), torch.tensor([6.0, 0.0]), torch.tensor([3, 3]))
    assert out["forward_perplexity"] == pytest.approx(math.e)
    assert out["backward_perplexity"] == pytest.approx(math.e)
    assert out["perplexity"] == pytest.approx(math.e)


@pytest.mark.slow
def test_train_bilm_script_from_scratch_then_domain_fine_tuning(tmp_path, monkeypatch):
    """The script builds the vocabulary, trains, saves a folder that loads with AutoModelForPreTraining and
    trust_remote_code (same predictions); a second run continues from it, keeping its vocabulary and softmax."""
    from elmo_transformers.cli import pretrain as train_bilm

    lines = [" ".join(s) for s in toy_sentences(40, seed=2)]
    (tmp_path / "train.txt").write_text("\n".join(lines[:32]) + "\n\n")
    (tmp_path / "valid.txt").write_text("\n".join(lines[32:]) + "\n")
    common = [
        "--train_file",
        str(tmp_path / "train.txt"),
        "--validation_file",
        str(tmp_path / "valid.txt"),
        "--do_train",
        "--do_eval",
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "8",
        "--report_to",
        "none",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        "--max_words",
        "6",
    ]
    scratch = train_bilm.main(
        common
        + [
            "--output_dir",
            str(tmp_path / "scratch"),
            "--char_embedding_dim",
            "4",
            "--filters",
            "[[1,4],[2,4]]",
            "--lstm_dim",
            "16",
            "--projection_dim",
            "8",
            "--n_negative_samples",
            "5",
        ]
    )
    folder = tmp_path / "scratch"
    vocab = (folder / "vocab.txt").read_text().split("\n")
    assert vocab[:4] == ["<S>", "</S>", "<UNK>", "the"] and len(vocab) - 1 == scratch.model.config.lm_vocab_size
    metrics = json.loads((folder / "eval_results.json").read_text())
    assert {"eval_forward_perplexity", "eval_backward_perplexity", "eval_perplexity"} <= set(metrics)

    loaded = AutoModelForPreTraining.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    batch = DataCollatorForElmoLanguageModeling(tokenizer)([{"words": ["the", "cat", "sees", "the", "dog"]}])
    model = scratch.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).forward_nll, model(**batch).forward_nll, atol=0, rtol=0)

    tuned = train_bilm.main(common + ["--output_dir", str(tmp_path / "tuned"), "--model_name_or_path", str(folder)])
    assert (tmp_path / "tuned" / "vocab.txt").read_text() == (folder / "vocab.txt").read_text()
    assert tuned.model.config.lm_n_negative_samples == 5  # not given this time: the starting LM's sampled softmax
    assert not torch.equal(tuned.model.lm_softmax.weight.cpu(), model.lm_softmax.weight)  # trained on, not reset


@pytest.mark.slow
def test_train_bilm_from_base_elmo_model_gets_new_softmax(tmp_path, tiny_model_dir, tiny, caplog, capfd, recwarn):
    """Also: pretraining on a CPU prints no special-token notice and no pin_memory warning."""
    from elmo_transformers.cli import pretrain as train_bilm

    (tmp_path / "train.txt").write_text("\n".join(" ".join(s) for s in toy_sentences(16, seed=3)) + "\n")
    trainer = train_bilm.main(
        [
            "--train_file",
            str(tmp_path / "train.txt"),
            "--do_train",
            "--max_steps",
            "1",
            "--output_dir",
            str(tmp_path / "out"),
            "--report_to",
            "none",
            "--save_strategy",
            "no",
            "--model_name_or_path",
            str(tiny_model_dir),
            "--learning_rate",
            "0",
            "--disable_tqdm",
            "true",
        ]
    )
    noise = [str(w.message) for w in recwarn] + [r.getMessage() for r in caplog.records] + [capfd.readouterr().err]
    assert not [n for n in noise if "pin_memory" in n or "PAD/BOS/EOS" in n], noise
    base, _ = tiny
    model = trainer.model
    assert model.config.lm_vocab_size == len((tmp_path / "out" / "vocab.txt").read_text().split())
    for name, value in base.state_dict().items():
        assert torch.equal(model.elmo.state_dict()[name].cpu(), value), name
