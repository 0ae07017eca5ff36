"""Text pairs trained: `Trainer` on a `datasets` dataset with two text columns through `DataCollatorWithPadding`,
and `finetune sequence-classification --text-pair-column`."""

import json
import random

import datasets
import pytest
import torch
from conftest import one_line, run
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer, TrainingArguments

import elmo_transformers
from modeling_elmo import ElmoForSequenceClassification
from tokenization_elmo import ElmoTokenizer

NOUNS = ["cat", "dog", "bird", "fish"]


def toy_pairs(n, seed):
    """Premise "the X sees the Y ." and hypothesis "a Z runs": "same" when Z is X or Y."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        x, y, z = rng.choice(NOUNS), rng.choice(NOUNS), rng.choice(NOUNS)
        rows.append(
            {
                "premise": f"the {x} sees the {y} .",
                "hypothesis": f"a {z} runs",
                "label": "same" if z in (x, y) else "other",
            }
        )
    return rows


@pytest.mark.slow
def test_trainer_trains_a_pair_head_from_two_text_columns(tiny_model_dir, tmp_path):
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    model = ElmoForSequenceClassification.from_pretrained(
        tiny_model_dir,
        num_labels=2,
        id2label={0: "other", 1: "same"},
        label2id={"other": 0, "same": 1},
        pair_encoder_dim=16,
        dropout=0.0,
    )
    raw = datasets.Dataset.from_list(toy_pairs(96, seed=0))

    def encode(batch):
        encoded = tokenizer(batch["premise"], batch["hypothesis"])
        encoded["labels"] = [int(label == "same") for label in batch["label"]]
        return encoded

    train = raw.map(encode, batched=True, remove_columns=raw.column_names)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        report_to=[],
        per_device_train_batch_size=16,
        learning_rate=1e-2,
        max_steps=6,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train,
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
    )
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer.train()
    for name, p in model.named_parameters():  # the ELMo recipe: the biLM frozen, the mix and the pair layers trained
        assert torch.equal(p, before[name]) == name.startswith("elmo.bilm."), name
    held_out = toy_pairs(16, seed=1)
    batch = tokenizer(
        [r["premise"] for r in held_out], [r["hypothesis"] for r in held_out], padding=True, return_tensors="pt"
    )
    model.eval()
    trainer.save_model(tmp_path / "saved")
    elmo_transformers.register()  # AutoModel* finds the installed classes, as the package registers them
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "saved").eval()
    assert type(loaded).__name__ == "ElmoForSequenceClassification" and loaded.config.pair_encoder_dim == 16
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_finetune_takes_a_text_pair_column(tiny_model_dir, tmp_path, capsys):
    data = write_jsonl(tmp_path / "train.jsonl", toy_pairs(8, seed=0))
    base = [
        "finetune",
        "sequence-classification",
        "--model-name-or-path",
        tiny_model_dir,
        "--train-file",
        data,
        "--text-column",
        "premise",
        "--do-train",
        "--max-steps",
        "2",
        "--report-to",
        "none",
    ]
    assert (
        run(
            [*base, "--text-pair-column", "hypothesis", "--pair-encoder-dim", "8", "--output-dir", tmp_path / "out"],
            capsys,
        )[0]
        == 0
    )
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["pair_encoder_dim"] == 8 and config["pair_alignment"] is True
    assert sorted(config["label2id"]) == ["other", "same"]
    trained = ElmoForSequenceClassification.from_pretrained(tmp_path / "out")
    assert trained.pair_encoder is not None
    one_line(
        *run([*base, "--text-pair-column", "nosuch", "--output-dir", tmp_path / "out2"], capsys),
        "--text-pair-column 'nosuch': no such column in the data",
    )


def test_an_example_without_a_text_is_named_by_its_column(tiny_model_dir, tmp_path, capsys):
    """A pair whose second text is null or a number: one line naming the option of its column and the example (it
    said "the text column cannot be tokenized" of either column)."""
    rows = [{"premise": "a b", "hypothesis": "c", "label": "x"}, {"premise": "d", "hypothesis": "e", "label": "y"}]
    base = ["finetune", "sequence-classification", "--model-name-or-path", tiny_model_dir, "--text-column", "premise"]
    base += ["--text-pair-column", "hypothesis", "--do-train", "--max-steps", "1", "--report-to", "none"]
    for column, value, message in [
        ("hypothesis", None, "--text-pair-column 'hypothesis': train example 1 holds None, not a text"),
        ("premise", 5, "--text-column 'premise': train example 1 holds 5, not a text"),
    ]:
        data = write_jsonl(tmp_path / f"{column}.jsonl", [rows[0], {**rows[1], column: value}])
        one_line(*run([*base, "--train-file", data, "--output-dir", tmp_path / column], capsys), message)
