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
        finetune(["token-classification", "--model_name_or_path", str(tiny_model_dir), "--train_file", train,
                  "--output_dir", str(tmp_path / "out"), "--do_train", *COMMON])


@pytest.mark.slow
def test_data_errors_print_one_line(tiny_model_dir, tmp_path, run_cli):
    (tmp_path / "empty.jsonl").write_text("")
    code, _, err = run_cli("finetune", "sequence-classification", "--model_name_or_path", tiny_model_dir,
                           "--train_file", tmp_path / "empty.jsonl", "--output_dir", tmp_path / "o", "--do_train",
                           *COMMON)
    assert code == 1
    assert err.strip().splitlines()[-1] == f"error: {tmp_path / 'empty.jsonl'}: the file is empty (no examples)"
    assert "Traceback" not in err


@pytest.mark.slow
def test_resumed_bilm_training_keeps_the_checkpoint_vocabulary(tmp_path):
    """Resuming with other --min_count / --vocab_size must not rebuild vocab.txt under the checkpoint's softmax."""
    from elmo_transformers.cli import pretrain as train_bilm

    words = "the cat sees a dog and the bird likes the cat".split()
    (tmp_path / "train.txt").write_text("\n".join(" ".join(words[i:] + words[:i]) for i in range(11)) + "\n")
    common = ["--train_file", str(tmp_path / "train.txt"), "--do_train", "--per_device_train_batch_size", "4",
              "--report_to", "none", "--disable_tqdm", "true", "--output_dir", str(tmp_path / "run"),
              "--char_embedding_dim", "4", "--filters", "[[1,4],[2,4]]", "--lstm_dim", "8", "--projection_dim", "4",
              "--save_strategy", "steps", "--save_steps", "2"]
    train_bilm.main(common + ["--max_steps", "2"])
    checkpoint = tmp_path / "run" / "checkpoint-2"
    vocab = (checkpoint / "vocab.txt").read_text()

    trainer = train_bilm.main(common + ["--max_steps", "3", "--min_count", "2", "--vocab_size", "5",
                                        "--resume_from_checkpoint", str(checkpoint)])
    assert (tmp_path / "run" / "vocab.txt").read_text() == vocab
    assert trainer.model.config.lm_vocab_size == len(vocab.split())

    (tmp_path / "other.txt").write_text("<S>\n</S>\n<UNK>\ncat\n")
    with pytest.raises(DataError, match="differs from the vocabulary of the checkpoint"):
        train_bilm.main(common + ["--max_steps", "3", "--vocab_file", str(tmp_path / "other.txt"),
                                  "--resume_from_checkpoint", str(checkpoint)])
