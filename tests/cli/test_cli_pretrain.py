"""`elmo-transformers pretrain` off the happy path: one line, nothing written."""

import shutil

from conftest import one_line, run


def test_pretrain_refuses_a_negative_add_words(text, tmp_path, capsys):
    one_line(
        *run(
            ["pretrain", "--train-file", text, "--output-dir", tmp_path / "pt", "--do-train", "--add-words", "-5"],
            capsys,
        ),
        "--add-words -5: must be 0 (none) or more",
    )
    assert not (tmp_path / "pt").exists()


def test_an_output_dir_that_holds_files_is_refused_unless_asked(tmp_path, capsys):
    """Trainer writes into --output-dir whatever is there; the commands ask first."""
    text, output = tmp_path / "t.txt", tmp_path / "run"
    text.write_text("the cat sat .\nthe dog sat .\n")
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    pretrain = [
        "pretrain",
        "--train-file",
        text,
        "--do-train",
        "--validation-split-percentage",
        "0",
        "--max-steps",
        "1",
        "--report-to",
        "none",
        "--lstm-dim",
        "8",
        "--projection-dim",
        "4",
        "--filters",
        "[[1, 4]]",
        "--output-dir",
        output,
    ]
    one_line(*run(pretrain, capsys), f"--output-dir {output} already holds files", "--overwrite-output-dir")
    assert sorted(p.name for p in output.iterdir()) == ["notes.txt"]
    assert run([*pretrain, "--overwrite-output-dir"], capsys)[0] == 0
    assert (output / "model.safetensors").is_file() and (output / "notes.txt").read_text() == "mine"


def test_pretrain_on_too_few_lines_to_hold_out_validation_is_one_line(text, tmp_path, capsys):
    assert one_line(
        *run(
            [
                "pretrain",
                "--train-file",
                text,
                "--output-dir",
                tmp_path / "pt",
                "--do-train",
                "--validation-split-percentage",
                "60",
            ],
            capsys,
        )
    ) == (
        "error: --validation-split-percentage 60.0: cannot hold out 60.0% of 2 training lines for validation (each "
        "part needs a line): give 0 to hold out none, or a validation file"
    )


def test_pretrain_add_words_refusals_write_nothing(text, lm_dir, tmp_path, capsys):
    """Refused before the vocabulary is built into --output-dir, so the corrected command finds it empty."""
    output = tmp_path / "pt"
    pretrain = [
        "pretrain",
        "--train-file",
        text,
        "--do-train",
        "--add-words",
        "5",
        "--output-dir",
        output,
        "--validation-split-percentage",
        "0",
    ]
    one_line(*run(pretrain, capsys), "--add-words extends the starting model's own softmax")
    assert not output.exists()
    model = shutil.copytree(lm_dir, tmp_path / "lm")
    with open(model / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra\n")
    one_line(*run([*pretrain, "--model-name-or-path", model], capsys), "restore its vocab.txt")
    assert not output.exists()
