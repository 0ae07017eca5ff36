"""Extractive question answering trained: SQuAD's official scores, SQuAD-format files and `datasets` columns read,
answers mapped to word positions, and `finetune question-answering`."""

import json

import datasets
import pytest
from conftest import REPO, one_line, run

from elmo_transformers.training.data import is_squad_file, read_squad
from elmo_transformers.training.finetuning import answer_words, normalize_answer, squad_scores
from tokenization_elmo import ElmoTokenizer

SQUAD_SAMPLE = REPO.parent / "shared" / "data" / "labeled" / "squad-sample"


def test_squad_normalisation_and_scores_are_the_official_ones():
    # SQuAD v1.1's evaluate script: lower case, punctuation and the articles a / an / the removed, one space.
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("an apple, a Pear and THE end.") == "apple pear and end"
    assert normalize_answer("theory") == "theory"  # an article only as a word
    assert squad_scores("Denver Broncos", ["the Denver Broncos", "Broncos"]) == (1.0, 1.0)
    exact, f1 = squad_scores("Broncos of Denver", ["Denver Broncos"])  # 2 common words: P 2/3, R 1
    assert exact == 0.0 and f1 == pytest.approx(0.8)
    assert squad_scores("nothing alike", ["Denver"]) == (0.0, 0.0)
    assert squad_scores("", ["Denver"]) == (0.0, 0.0)


def test_answers_become_word_positions():
    spans = [(0, 3), (4, 9), (11, 15)]  # "New York, is"-like: words and their character spans
    assert answer_words(spans, 4, "York") == (1, 1)
    assert answer_words(spans, 0, "New York") == (0, 1)
    assert answer_words(spans, 5, "ork") == (1, 1)  # part of a word: that word
    assert answer_words(spans, 20, "x") == (-1, -1)  # outside the words: ignored by the loss


@pytest.mark.skipif(not SQUAD_SAMPLE.is_dir(), reason="the SQuAD sample is in ../shared, beside the checkout")
def test_squad_files_are_read_as_squad_rows():
    validation = SQUAD_SAMPLE / "validation.json"
    assert is_squad_file(str(validation))
    rows = list(read_squad([validation]))
    assert len(rows) == 98 and set(rows[0]) == {"id", "question", "context", "answers"}
    for row in rows:
        for text, start in zip(row["answers"]["text"], row["answers"]["answer_start"]):
            assert row["context"][start : start + len(text)] == text


def squad_file(path, examples):
    """A SQuAD-format file of (question, context, answer) triples, the answer's first occurrence as answer_start."""
    paragraphs = [
        {"context": c, "qas": [{"id": str(i), "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}]}
        for i, (q, c, a) in enumerate(examples)
    ]
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))
    return path


EXAMPLES = [
    ("Who sat ?", "He sat on the bank .", "He"),
    ("Where did he sit ?", "He sat on the bank .", "the bank"),
    ("What flows ?", "The river flows past the town", "The river"),
]


def test_finetune_question_answering_reads_squad_files(tiny_model_dir, tmp_path, capsys):
    train = squad_file(tmp_path / "train.json", EXAMPLES)
    base = [
        "finetune",
        "question-answering",
        "--model-name-or-path",
        tiny_model_dir,
        "--train-file",
        train,
        "--validation-file",
        train,
        "--do-train",
        "--do-eval",
        "--max-steps",
        "1",
        "--report-to",
        "none",
        "--task-encoder-dim",
        "4",
    ]
    assert run([*base, "--output-dir", tmp_path / "out"], capsys)[0] == 0
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["ElmoForQuestionAnswering"]
    assert config["auto_map"]["AutoModelForQuestionAnswering"] == "modeling_elmo.ElmoForQuestionAnswering"
    metrics = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert 0 <= metrics["eval_exact_match"] <= metrics["eval_f1"] <= 100
    columns = tmp_path / "columns.jsonl"
    columns.write_text('{"question": "Who ?", "context": "He sat", "label": "He"}\n')
    one_line(
        *run(
            [
                "finetune",
                "question-answering",
                "--model-name-or-path",
                tiny_model_dir,
                "--train-file",
                columns,
                "--do-train",
                "--output-dir",
                tmp_path / "out2",
                "--report-to",
                "none",
            ],
            capsys,
        ),
        "the data has no 'answers' column (its columns: ['question', 'context', 'label']): question answering reads",
    )


def test_question_answering_from_a_dataset_with_squad_columns(tiny_model_dir, tmp_path, monkeypatch):
    from transformers import TrainingArguments

    from elmo_transformers.training import finetuning
    from elmo_transformers.training.arguments import FinetuneDataArguments, HeadArguments

    rows = [
        {"id": str(i), "question": q, "context": c, "answers": {"text": [a], "answer_start": [c.index(a)]}}
        for i, (q, c, a) in enumerate(EXAMPLES)
    ]
    dataset = datasets.Dataset.from_list(rows)
    monkeypatch.setattr(
        finetuning, "load_splits", lambda *args: datasets.DatasetDict(train=dataset, validation=dataset)
    )
    trainer = finetuning.question_answering(
        HeadArguments(model_name_or_path=str(tiny_model_dir), task_encoder_dim=4),
        FinetuneDataArguments(dataset_name="squad"),
        TrainingArguments(output_dir=str(tmp_path / "out"), do_train=True, do_eval=True, max_steps=1, report_to=[]),
    )
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    encoded = trainer.train_dataset
    assert encoded["start_positions"] == [0, 3, 0] and encoded["end_positions"] == [0, 4, 1]
    assert encoded["pair_input_ids"][1] == tokenizer("He sat on the bank .")["input_ids"]
    assert "eval_f1" in json.loads((tmp_path / "out" / "eval_results.json").read_text())


def squad_paragraph(paragraph=None, **changes):
    """A SQuAD-format file's JSON of one paragraph (`paragraph`, else one of one question whose record has `changes`
    made to it: a value None removes the key)."""
    qa = {"id": "q0", "question": "Where did he sit ?", "answers": [{"text": "the bank", "answer_start": 10}]}
    qa = {k: v for k, v in {**qa, **changes}.items() if v is not None}
    paragraph = paragraph or {"context": "He sat on the bank of the river .", "qas": [qa]}
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [paragraph]}]}


@pytest.mark.parametrize(
    "data, fragments",
    [
        (squad_paragraph(paragraph={"context": "He sat ."}), ["article 0, paragraph 0: qas is missing", "a list"]),
        (squad_paragraph(paragraph="He sat ."), ["article 0, paragraph 0: context is missing"]),
        (squad_paragraph(question=None), ["paragraph 0: question 0: question is missing", "a str"]),
        (squad_paragraph(answers=[{"text": "He", "answer_start": "0"}]), ["answer 0: answer_start is a str"]),
        (squad_paragraph(answers=[{"text": "the bank", "answer_start": 3}]), ["its answer 'the bank' is not at its"]),
        (squad_paragraph(answers=[{"text": "He", "answer_start": 500}]), ["'He' is not at its answer_start 500"]),
        (squad_paragraph(answers=[], is_impossible=True), ["no answer (SQuAD 2.0's unanswerable questions"]),
    ],
)
def test_squad_files_the_head_cannot_learn_from_are_one_line(tiny_model_dir, tmp_path, capsys, data, fragments):
    """A SQuAD file with a field missing or of another type, an answer not where its answer_start says (the head
    would learn another span) or an unanswerable question: refused in one line naming where, before training."""
    train = tmp_path / "train.json"
    train.write_text(json.dumps(data))
    argv = ["finetune", "question-answering", "--model-name-or-path", tiny_model_dir, "--train-file", train]
    argv += ["--do-train", "--output-dir", tmp_path / "out", "--report-to", "none", "--max-steps", "1"]
    one_line(*run(argv, capsys), *fragments)
    assert not (tmp_path / "out" / "config.json").exists()


def test_options_question_answering_does_not_read_are_refused(tiny_model_dir, tmp_path, capsys):
    """Options of the other tasks (the text, pair and label columns) and counts below 1 are refused by flag, not
    ignored; a trained question-answering head is trained further only in the shape of its weights."""
    train = squad_file(tmp_path / "train.json", EXAMPLES)
    common = ["--train-file", train, "--do-train", "--report-to", "none", "--max-steps", "1"]
    base = ["finetune", "question-answering", "--model-name-or-path", tiny_model_dir, *common]
    base += ["--output-dir", tmp_path / "out"]
    for flags, message in [
        (["--text-pair-column", "context"], "--text-pair-column 'context': question answering reads SQuAD's columns"),
        (["--text-column", "question"], "--text-column 'question': question answering reads SQuAD's columns"),
        (["--label-column", "answers"], "--label-column 'answers': question answering reads SQuAD's columns"),
        (["--max-answer-words", "0"], "--max-answer-words 0: must be at least 1 (words)"),
        (["--max-words", "0"], "--max-words 0: must be at least 1 (words)"),
    ]:
        assert one_line(*run([*base, *flags], capsys)).startswith(f"error: {message}")
    assert run([*base, "--task-encoder-dim", "4"], capsys)[0] == 0
    further = ["finetune", "question-answering", "--model-name-or-path", tmp_path / "out", *common]
    further += ["--output-dir", tmp_path / "further"]
    one_line(
        *run(further, capsys),
        f"--task-encoder-dim 128: {tmp_path / 'out'} is an ElmoForQuestionAnswering trained with 4 there, the shape "
        "of its weights: give 4 to train it further",
    )
    assert run([*further, "--task-encoder-dim", "4"], capsys)[0] == 0


def test_answers_past_the_words_kept_are_counted_and_all_of_them_refused(tiny_model_dir, tmp_path, capsys, caplog):
    """--max-words that cuts every training answer off leaves nothing to learn (the loss was NaN, then 0, and the run
    ended well): refused; cutting some is a warning that counts them."""
    args = ["--do-train", "--report-to", "none", "--max-steps", "1", "--task-encoder-dim", "4", "--max-words", "2"]
    for examples, name in [(EXAMPLES[1:2], "all"), (EXAMPLES[:2], "some")]:  # the bank: words 3-4; He: word 0
        train = squad_file(tmp_path / f"{name}.json", examples)
        argv = ["finetune", "question-answering", "--model-name-or-path", tiny_model_dir, "--train-file", train]
        code, err = run([*argv, *args, "--output-dir", tmp_path / name], capsys)
        if name == "all":
            one_line(code, err, "--max-words 2: no train example's answer lies within its context's first 2 words")
    assert code == 0
    assert "1 of 2 train examples have no answer within their context's words kept (the first 2)" in caplog.text
