"""The training commands refuse data they cannot use as given, by name, and never change what a label means."""

import json

import pytest
import torch
from transformers import AutoModelForSequenceClassification

from elmo_transformers.errors import DataError
from tokenization_elmo import ElmoTokenizer

COMMON = ["--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true", "--max_steps", "2"]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def polarity_rows(labels, n=6):
    words = {"pos": "good fine great", "neg": "bad awful poor", "neutral": "so so"}
    return [{"text": words[label], "label": label} for label in labels for _ in range(n)]


def run_sequence(model, output, train=None, valid=None, extra=()):
    from elmo_transformers.cli.finetune import main as finetune

    args = ["--model_name_or_path", str(model), "--output_dir", str(output), *COMMON, *extra]
    for flag, path in (("--train_file", train), ("--validation_file", valid)):
        args += [flag, path] if path else []
    return finetune(["sequence-classification", *args])


@pytest.fixture(scope="module")
def polarity_head(tiny_model_dir, tmp_path_factory):
    """A sequence head trained on labels neg/pos (saved id2label {0: neg, 1: pos})."""
    folder = tmp_path_factory.mktemp("polarity")
    train = write_jsonl(folder / "train.jsonl", polarity_rows(["pos", "neg"]))
    run_sequence(tiny_model_dir, folder / "head", train, extra=["--do_train"])
    return folder / "head"


def test_saved_head_keeps_its_label_mapping_on_data_with_one_class(polarity_head, tmp_path):
    """Data with only "pos" would sort to {pos: 0}; the head's own mapping says pos is 1 and must win."""
    valid = write_jsonl(tmp_path / "valid.jsonl", polarity_rows(["pos"]))
    run_sequence(polarity_head, tmp_path / "eval", valid=valid, extra=["--do_eval"])
    accuracy = json.loads((tmp_path / "eval" / "eval_results.json").read_text())["eval_accuracy"]

    model = AutoModelForSequenceClassification.from_pretrained(polarity_head, trust_remote_code=True).eval()
    tokenizer = ElmoTokenizer.from_pretrained(polarity_head)
    with torch.no_grad():
        predicted = model(**tokenizer(["good fine great"], return_tensors="pt")).logits.argmax(-1).item()
    assert model.config.id2label == {0: "neg", 1: "pos"}
    assert accuracy == float(predicted == model.config.label2id["pos"])


def test_label_the_head_does_not_know_is_named(polarity_head, tmp_path):
    valid = write_jsonl(tmp_path / "valid.jsonl", polarity_rows(["pos"], 2) + polarity_rows(["neutral"], 1))
    with pytest.raises(DataError, match=r"validation example 2: label 'neutral' is not one of the model's labels"):
        run_sequence(polarity_head, tmp_path / "eval", valid=valid, extra=["--do_eval"])


def test_null_label_and_empty_file_are_named(tiny_model_dir, tmp_path):
    rows = polarity_rows(["pos", "neg"], 2)
    rows[3]["label"] = None
    train = write_jsonl(tmp_path / "null.jsonl", rows)
    with pytest.raises(DataError, match="example 3: missing label"):
        run_sequence(tiny_model_dir, tmp_path / "out", train, extra=["--do_train"])
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataError, match="empty.jsonl: the file is empty"):
        run_sequence(tiny_model_dir, tmp_path / "out", str(tmp_path / "empty.jsonl"), extra=["--do_train"])


@pytest.mark.parametrize("tags, words", [(["DET", "NOUN", "VERB", "X"], 3), (["DET", "NOUN"], 3)])
def test_tag_count_must_equal_word_count(tiny_model_dir, tmp_path, tags, words):
    from elmo_transformers.cli.finetune import main as finetune

    rows = [{"tokens": ["the", "cat", "sat"], "tags": ["DET", "NOUN", "VERB"]}] * 2
    rows.append({"tokens": ["the", "cat", "sat"][:words], "tags": tags})
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    with pytest.raises(DataError, match=rf"train example 2: {words} words but {len(tags)} tags"):
        finetune(
            [
                "token-classification",
                "--model_name_or_path",
                str(tiny_model_dir),
                "--train_file",
                train,
                "--output_dir",
                str(tmp_path / "out"),
                "--do_train",
                *COMMON,
            ]
        )


@pytest.mark.slow
def test_data_errors_print_one_line(tiny_model_dir, tmp_path, run_cli):
    (tmp_path / "empty.jsonl").write_text("")
    code, _, err = run_cli(
        "finetune",
        "sequence-classification",
        "--model_name_or_path",
        tiny_model_dir,
        "--train_file",
        tmp_path / "empty.jsonl",
        "--output_dir",
        tmp_path / "o",
        "--do_train",
        *COMMON,
    )
    assert code == 1
    assert err.strip().splitlines()[-1] == f"error: {tmp_path / 'empty.jsonl'}: the file is empty (no examples)"
    assert "Traceback" not in err


@pytest.mark.slow
def test_resumed_bilm_training_keeps_the_checkpoint_vocabulary(tmp_path):
    """Resuming with other --min_count / --vocab_size must not rebuild vocab.txt under the checkpoint's softmax."""
    from elmo_transformers.cli import pretrain as train_bilm

    words = "the cat sees a dog and the bird likes the cat".split()
    (tmp_path / "train.txt").write_text("\n".join(" ".join(words[i:] + words[:i]) for i in range(11)) + "\n")
    common = [
        "--train_file",
        str(tmp_path / "train.txt"),
        "--do_train",
        "--per_device_train_batch_size",
        "4",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(tmp_path / "run"),
        "--char_embedding_dim",
        "4",
        "--filters",
        "[[1,4],[2,4]]",
        "--lstm_dim",
        "8",
        "--projection_dim",
        "4",
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
    ]
    train_bilm.main(common + ["--max_steps", "2"])
    checkpoint = tmp_path / "run" / "checkpoint-2"
    vocab = (checkpoint / "vocab.txt").read_text()

    trainer = train_bilm.main(
        common
        + ["--max_steps", "3", "--min_count", "2", "--vocab_size", "5", "--resume_from_checkpoint", str(checkpoint)]
    )
    assert (tmp_path / "run" / "vocab.txt").read_text() == vocab
    assert trainer.model.config.lm_vocab_size == len(vocab.split())

    (tmp_path / "other.txt").write_text("<S>\n</S>\n<UNK>\ncat\n")
    with pytest.raises(DataError, match="differs from the vocabulary of the checkpoint"):
        train_bilm.main(
            common
            + [
                "--max_steps",
                "3",
                "--vocab_file",
                str(tmp_path / "other.txt"),
                "--resume_from_checkpoint",
                str(checkpoint),
            ]
        )


def test_one_label_is_refused(tiny_model_dir, tmp_path, capsys):
    """One label trained a head of one output, which transformers takes for regression (problem_type regression)."""
    from conftest import one_line, run

    train = write_jsonl(tmp_path / "train.jsonl", polarity_rows(["pos"], 2))
    one_line(
        *run(
            [
                "finetune",
                "sequence-classification",
                "--model_name_or_path",
                tiny_model_dir,
                "--train_file",
                train,
                "--output_dir",
                tmp_path / "out",
                "--do_train",
                *COMMON,
            ],
            capsys,
        ),
        "error: the column 'label' holds one label ('pos') in the train split: a classifier needs at least two "
        "classes; give data with examples of two or more labels",
    )
    assert not (tmp_path / "out").exists()
    valid = write_jsonl(tmp_path / "valid.jsonl", polarity_rows(["pos", "neg"], 2))  # another label, never trained
    one_line(
        *run(
            [
                "finetune",
                "sequence-classification",
                "--model_name_or_path",
                tiny_model_dir,
                "--train_file",
                train,
                "--validation_file",
                valid,
                "--output_dir",
                tmp_path / "out",
                "--do_train",
                "--do_eval",
                *COMMON,
            ],
            capsys,
        ),
        "error: the column 'label' holds one label ('pos') in the train split: a classifier needs",
    )


def label_mapping_of(splits, nested=False):
    import datasets

    from elmo_transformers.training.finetuning import label_mapping

    raw = datasets.DatasetDict({name: datasets.Dataset.from_dict(columns) for name, columns in splits.items()})
    no_head = type("Config", (), {"architectures": None})
    return label_mapping(raw, "label", nested, no_head, AutoModelForSequenceClassification)


def test_labels_of_other_splits_the_train_split_lacks_are_named(caplog):
    """They became classes silently, never trained, every example of them an error in the metrics."""
    with caplog.at_level("WARNING", logger="elmo_transformers.training.finetuning"):
        labels = label_mapping_of({"train": {"label": ["pos", "neg"]}, "validation": {"label": ["meh", "pos", "bad"]}})
    assert labels == ["bad", "meh", "neg", "pos"]
    assert [record.getMessage() for record in caplog.records] == [
        "the validation split has labels the train split lacks ('bad', 'meh'): the model never learns them, so their "
        "examples count as errors; add training examples of them or leave those examples out"
    ]


def test_integer_labels_stay_integers(tiny_model_dir, tmp_path):
    """A column of integers that `datasets` holds as floats (one written 0.0, or a split of floats) gave the classes
    "0.0" and "1.0"; integer tags failed in the metrics ('int' object is not subscriptable)."""
    from elmo_transformers.cli.finetune import main as finetune

    assert label_mapping_of({"train": {"label": [1.0, 0.0, 10.0]}}) == ["0", "1", "10"]
    assert label_mapping_of({"train": {"label": [0.5, 1.0]}}) == ["0.5", "1"]
    with pytest.raises(DataError, match=r"the labels of column 'label' mix types \(int, str\)"):
        label_mapping_of({"train": {"label": ["1", "0"]}, "validation": {"label": [1, 0]}})
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": "good fine", "label": 1}, {"text": "bad", "label": 0.0}])
    trainer = run_sequence(tiny_model_dir, tmp_path / "out", train, extra=["--do_train"])
    assert trainer.model.config.id2label == {0: "0", 1: "1"}
    tags = write_jsonl(tmp_path / "tags.jsonl", [{"tokens": ["the", "cat"], "tags": [0, 1]}] * 2)
    trainer = finetune(
        [
            "token-classification",
            "--model_name_or_path",
            str(tiny_model_dir),
            "--train_file",
            tags,
            "--validation_file",
            tags,
            "--output_dir",
            str(tmp_path / "tags"),
            "--do_train",
            "--do_eval",
            *COMMON,
        ]
    )
    assert trainer.model.config.id2label == {0: "0", 1: "1"}


def test_resume_from_checkpoint_true_is_the_last_checkpoint(tiny_model_dir, tmp_path, capsys):
    """ "true" was taken for a folder's name: a traceback. It is Trainer.train's True, the last checkpoint of
    output_dir; a folder that is not a checkpoint is one line."""
    from conftest import one_line, run

    train = write_jsonl(tmp_path / "train.jsonl", polarity_rows(["pos", "neg"], 2))
    args = [
        "finetune",
        "sequence-classification",
        "--model_name_or_path",
        tiny_model_dir,
        "--train_file",
        train,
        "--output_dir",
        tmp_path / "out",
        "--do_train",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
    ]
    one_line(
        *run([*args, "--max_steps", "1", "--resume_from_checkpoint", "true"], capsys),
        f"error: resume_from_checkpoint true: output_dir {tmp_path / 'out'} holds no checkpoint-N folder",
    )
    one_line(
        *run([*args, "--max_steps", "1", "--resume_from_checkpoint", tmp_path], capsys),
        f"error: resume_from_checkpoint {tmp_path}: not a checkpoint of Trainer (no trainer_state.json)",
    )
    assert run([*args, "--max_steps", "1"], capsys)[0] == 0
    first = (tmp_path / "out" / "checkpoint-1" / "trainer_state.json").stat().st_mtime_ns
    assert run([*args, "--max_steps", "2", "--resume_from_checkpoint", "true"], capsys)[0] == 0
    state = json.loads((tmp_path / "out" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2  # step 2 only: a run from the start would have saved checkpoint-1 again
    assert (tmp_path / "out" / "checkpoint-1" / "trainer_state.json").stat().st_mtime_ns == first
