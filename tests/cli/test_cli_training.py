"""What `pretrain` and `finetune` share (their argument parsing, the training functions' words, the model
options and training data they refuse): --help before torch, one line for a bad value."""

import pytest
from conftest import one_line, run, run_entry_point

from elmo_transformers.errors import DataError


@pytest.mark.parametrize("argv", [["pretrain", "--help"], ["finetune", "token-classification", "--help"]], ids=" ".join)
def test_training_commands_help_lists_the_elmo_options_without_importing_torch(argv, tmp_path):
    """--help answers from the argument dataclasses: the ELMo options first, then where Trainer's are."""
    status, loaded, out, err = run_entry_point(argv, tmp_path, ["torch", "transformers"])
    assert (status, loaded) == (0, []), err[-2000:]
    assert "--model-name-or-path" in out and "--output-dir" in out and "--help-trainer" in out, out
    assert len(out.splitlines()) < 200 and out.index("--model-name-or-path") < out.index("--help-trainer` lists")


@pytest.mark.parametrize(
    "argv",
    [
        ["pretrain", "--help-trainer"],
        ["pretrain", "--no-such-option"],
        ["finetune", "sequence-classification", "--learning-rate", "abc"],
    ],
    ids=" ".join,
)
@pytest.mark.slow
def test_training_commands_parse_before_the_model_and_data_code(argv, tmp_path):
    """--help-trainer lists Trainer's options, so it imports transformers' TrainingArguments (and torch with it),
    but not Trainer, datasets or the model code; an unknown option or a bad value is the error alone after a short
    usage line, not the usage of every Trainer option."""
    status, loaded, out, err = run_entry_point(argv, tmp_path, ["datasets", "modeling_elmo", "transformers.trainer"])
    assert (status, loaded) == ({"--help-trainer": 0, "--no-such-option": 1}.get(argv[1], 2), []), err[-2000:]
    if "--help-trainer" in argv:
        assert "--per_device_train_batch_size" in out
    elif status == 1:
        assert err.strip().splitlines() == [
            "error: unknown options ['--no-such-option']: `elmo-transformers pretrain --help` lists them"
        ], err
    else:
        assert err.strip().splitlines() == [
            "usage: elmo-transformers finetune sequence-classification [--help] [--help-trainer] [OPTIONS]",
            "elmo-transformers finetune sequence-classification: error: argument --learning_rate/--learning-rate: "
            "invalid float value: 'abc'",
        ], err


@pytest.mark.parametrize(
    "argv, error",
    [
        (
            ["pretrain", "--output-dir", "out", "--learning-rate", "abc"],
            "argument --learning_rate/--learning-rate: invalid float value: 'abc'",
        ),  # Trainer's
        (
            ["finetune", "token-classification", "--output-dir", "out", "--max-words", "x"],
            "argument --max_words/--max-words: invalid int value: 'x'",
        ),  # the command's own
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
@pytest.mark.slow
def test_a_number_option_that_is_not_a_number_is_one_usage_error(argv, error, tmp_path):
    """HfArgumentParser's usage error (a short usage line, then the error), before any model or data code."""
    status, loaded, out, err = run_entry_point(argv, tmp_path, ["datasets", "modeling_elmo", "transformers.trainer"])
    prog = "elmo-transformers " + " ".join(argv[: argv.index("--output-dir")])
    assert (status, loaded) == (2, []), err[-2000:]
    assert err.strip().splitlines() == [
        f"usage: {prog} [--help] [--help-trainer] [OPTIONS]",
        f"{prog}: error: {error}",
    ], err
    assert not (tmp_path / "out").exists()


def test_the_training_functions_name_arguments_and_the_commands_name_flags(text, tiny_model_dir, tmp_path, capsys):
    """A Python caller of the training functions (the argument dataclasses, TrainingArguments) reads the arguments'
    names and no command-line flag; the command says the same with its flags."""
    from transformers import TrainingArguments

    from elmo_transformers.training.arguments import (
        FinetuneDataArguments,
        HeadArguments,
        PretrainDataArguments,
        PretrainModelArguments,
    )
    from elmo_transformers.training.finetuning import sequence_classification
    from elmo_transformers.training.pretraining import pretrain

    training_args = TrainingArguments(output_dir=str(tmp_path / "out"), do_train=True, report_to="none")
    data = tmp_path / "train.jsonl"
    data.write_text('{"sentence": "a good film .", "label": "pos"}\n')
    cases = [
        (
            lambda: pretrain(
                PretrainModelArguments(add_words=5), PretrainDataArguments(train_file=[str(text)]), training_args
            ),
            ["pretrain", "--add-words", "5", "--train-file", text],
            "add_words extends the starting model's own softmax: it needs a language model (with its vocab.txt) to "
            "start from, training, and no other vocabulary file",
            "--add-words extends the starting model's own softmax: it needs a language model (with its vocab.txt) to "
            "start from, training, and no other vocabulary file",
        ),
        (
            lambda: pretrain(
                PretrainModelArguments(), PretrainDataArguments(train_file=[str(text)], max_words=0), training_args
            ),
            ["pretrain", "--max-words", "0", "--train-file", text],
            "max_words 0: must be at least 1 (the words of a training window)",
            "--max-words 0: must be at least 1 (the words of a training window)",
        ),
        (
            lambda: sequence_classification(
                HeadArguments(model_name_or_path=str(tiny_model_dir)),
                FinetuneDataArguments(train_file=str(data)),
                training_args,
            ),
            ["finetune", "sequence-classification", "--model-name-or-path", tiny_model_dir, "--train-file", data],
            "text_column 'text': no such column in the data (its columns: ['sentence', 'label'])",
            "--text-column 'text': no such column in the data (its columns: ['sentence', 'label'])",
        ),
    ]
    for call, argv, python_message, command_message in cases:
        with pytest.raises(DataError) as refused:
            call()
        assert str(refused.value) == python_message
        code, err = run([*argv, "--output-dir", tmp_path / "out", "--do-train", "--report-to", "none"], capsys)
        assert one_line(code, err) == f"error: {command_message}"
    assert not (tmp_path / "out").exists()


def test_model_options_the_configuration_refuses_are_one_line(text, tiny_model_dir, tmp_path, capsys):
    """A value ElmoConfig refuses, a JSON option that is not JSON, and options Trainer refuses together are one line
    naming the option (a refused field by the flag that set it, never ElmoConfig's name for it), in pretrain and
    finetune alike."""
    pretrain = ["pretrain", "--train-file", text, "--do-train", "--max-steps", "1", "--report-to", "none"]
    one_line(
        *run([*pretrain, "--output-dir", tmp_path / "a", "--lstm-dim", "0"], capsys),
        "error: --lstm-dim must be an integer from 1 to",
    )
    one_line(
        *run([*pretrain, "--output-dir", tmp_path / "b", "--filters", "[[1, 4]"], capsys),
        "--filters '[[1, 4]' is not JSON",
    )
    one_line(
        *run([*pretrain, "--output-dir", tmp_path / "c", "--lm-dropout", "1.5"], capsys),
        "error: --lm-dropout must be in [0, 1), got 1.5",
    )
    one_line(
        *run(
            [
                *pretrain,
                "--output-dir",
                tmp_path / "d",
                "--eval-strategy",
                "steps",
                "--save-strategy",
                "epoch",
                "--load-best-model-at-end",
            ],
            capsys,
        ),
        "load_best_model_at_end",
    )
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a good film .", "label": "pos"}\n{"text": "a bad film .", "label": "neg"}\n')
    finetune = [
        "finetune",
        "sequence-classification",
        "--model-name-or-path",
        tiny_model_dir,
        "--train-file",
        data,
        "--do-train",
        "--max-steps",
        "1",
        "--report-to",
        "none",
    ]
    for flag, value, message in [
        ("--dropout", "1.5", "must be in [0, 1), got 1.5"),  # (refused by the config, not by torch's Dropout)
        ("--mix-l2-lambda", "-1", "must be a non-negative finite number, got -1"),  # (once trained silently)
        ("--task-encoder", "gru", "expected one of ('linear', 'lstm'), got gru"),
        ("--pair-encoder-dim", "0", "must be an integer from 1 to"),
    ]:
        pair = ["--text-pair-column", "text"] if flag == "--pair-encoder-dim" else []
        err = run([*finetune, *pair, "--output-dir", tmp_path / "e", flag, value], capsys)
        assert one_line(*err, message).startswith(f"error: {flag} {message}")
    one_line(
        *run([*finetune, "--output-dir", tmp_path / "f", "--scalar-mix-parameters", "x"], capsys),
        "--scalar-mix-parameters 'x' is not JSON",
    )


def test_training_data_the_commands_cannot_use_is_one_line(tiny_model_dir, tmp_path, capsys):
    """Training data the commands cannot use (mixed label types, a missing column...) is one line, no traceback."""
    finetune = [
        "finetune",
        "sequence-classification",
        "--model-name-or-path",
        tiny_model_dir,
        "--do-train",
        "--max-steps",
        "1",
        "--report-to",
        "none",
    ]
    cases = [
        ('{"text": "a b", "label": 1}\n{"text": "c d", "label": "pos"}\n', "mix types (int, str)"),
        ('{"txt": "a b", "label": "x"}\n', "--text-column 'text': no such column in the data"),
        (
            '{"text": null, "label": "x"}\n{"text": "a", "label": "y"}\n',
            "--text-column 'text': train example 0 holds None",
        ),
        ('{"text": "a b", "label": [1]}\n', "a label must be one string or number"),
    ]
    for n, (rows, fragment) in enumerate(cases):
        data = tmp_path / f"data{n}.jsonl"
        data.write_text(rows)
        one_line(*run([*finetune, "--train-file", data, "--output-dir", tmp_path / f"out{n}"], capsys), fragment)
    conll = tmp_path / "bad.conll"
    conll.write_text("a\tB\nb\n\nc\tO\n")
    one_line(
        *run(
            [
                "finetune",
                "token-classification",
                "--model-name-or-path",
                tiny_model_dir,
                "--train-file",
                conll,
                "--output-dir",
                tmp_path / "tc",
                "--do-train",
            ],
            capsys,
        ),
        "bad.conll:2: expected 'token<TAB>tag'",
    )
    text, empty = tmp_path / "t.txt", tmp_path / "empty.txt"
    text.write_text("the cat sat .\n")
    empty.write_text("")
    pretrain = ["pretrain", "--train-file", text, "--do-train", "--validation-split-percentage", "0"]
    one_line(
        *run([*pretrain, "--output-dir", tmp_path / "p1", "--max-words", "0"], capsys),
        "--max-words 0: must be at least 1",
    )
    one_line(
        *run([*pretrain, "--output-dir", tmp_path / "p2", "--vocab-file", empty], capsys), f"--vocab-file {empty}: "
    )
    assert not any((tmp_path / name).exists() for name in ("out0", "out1", "out2", "out3", "tc", "p1"))


def test_the_command_opens_the_model_once_into_a_field_of_its_own(tiny_model_dir, tmp_path):
    """--model-name-or-path stays the user's string; the ModelFolder the command opened is `model`, no option of its
    own, which the training function loads instead of opening the folder again."""
    from elmo_transformers.cli.training_arguments import finetune_arguments, pretrain_arguments
    from elmo_transformers.model_folder import ModelFolder

    head, _, _ = finetune_arguments(
        [
            "--model-name-or-path",
            str(tiny_model_dir),
            "--output-dir",
            str(tmp_path / "head"),
            "--train-file",
            "train.jsonl",
        ]
    )
    assert head.model_name_or_path == str(tiny_model_dir)
    assert isinstance(head.model, ModelFolder) and head.model.path == str(tiny_model_dir)
    lm, _, _ = pretrain_arguments(["--output-dir", str(tmp_path / "lm"), "--train-file", "text.txt"])
    assert lm.model_name_or_path is None and lm.model is None  # from scratch
