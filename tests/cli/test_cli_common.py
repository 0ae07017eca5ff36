"""Every `elmo-transformers` command off the happy path: --help and usage errors answer before torch is imported, and
a model name that is neither a folder nor a Hub repo, a bad argument or a bad file is one line `error: ...`, found
before the work, in every command alike."""

import json
import os
import shutil
import shlex
import subprocess
import sys

import huggingface_hub
import pytest
import torch
from conftest import FIXTURES, REPO, command_env, missing_model_commands, one_line, run
from conftest import command as elmo_command
from huggingface_hub.errors import RepositoryNotFoundError

from configuration_elmo import ElmoConfig
from elmo_transformers import model_folder
from elmo_transformers.errors import ModelError


QUICK = [
    ["--help"],
    ["no-such-command"],
    *([name, "--help"] for name in ("convert", "embed", "push", "perplexity", "demo", "finetune", "export")),
    ["convert", "allennlp", "--help"],
    ["embed", "in.txt"],
    ["perplexity", "in.txt", "--max-words", "0"],
    ["finetune", "no-such-task"],
]


@pytest.mark.parametrize("argv", QUICK, ids=" ".join)
def test_help_and_usage_errors_answer_before_torch_is_imported(argv, tmp_path):
    """Through the console entry point (elmo_transformers_cli), as `elmo-transformers ARGS` runs it."""
    code = (
        "import json, sys, elmo_transformers_cli\n"
        "try:\n    status = elmo_transformers_cli.main(sys.argv[1:])\n"
        "except SystemExit as e:\n    status = e.code\n"
        "print(json.dumps({'status': status, 'loaded': sorted({'torch', 'transformers'} & set(sys.modules))}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=tmp_path,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["status"] == (0 if "--help" in argv else 2), done.stderr[-2000:]
    assert result["loaded"] == [], result
    assert "usage" in done.stdout + done.stderr, done.stdout[:500]


def test_the_entry_point_registers_elmo_before_the_work(tmp_path):
    """The package's __init__, deferred while parsing, runs before a command works: the demo loads the shipped
    model with AutoModel (no trust_remote_code), which needs the registration."""
    code = "import sys, elmo_transformers_cli\nsys.exit(elmo_transformers_cli.main(['demo']))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=command_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and 'The word "bank" in 4 places' in done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize("command", ["demo", "embed", "perplexity", "finetune", "pretrain"])
def test_a_missing_model_is_one_line_in_every_command(command, tmp_path, capsys, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("offline: the Hub must not be asked")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", no_network)
    (tmp_path / "a-file").write_text("")
    option = "--model-name-or-path" if command in ("finetune", "pretrain") else "--model"
    for name, why in [
        ("nosuch", "not in the local cache (HF_HUB_OFFLINE is set)"),
        ("a/b/c", "not a Hub repo id"),
        (str(tmp_path / "a-file"), "is a file"),
    ]:
        code, err = run(missing_model_commands(tmp_path, name)[command], capsys)
        one_line(code, err, f"{option} {name}", why)
    assert not (tmp_path / "out.hdf5").exists() and not (tmp_path / "ft").exists() and not (tmp_path / "pt").exists()


def test_an_unreachable_or_missing_hub_repo_is_one_line_without_retries(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    asked = []

    def unreachable(self, name, **kwargs):
        asked.append(name)
        raise ConnectionError("[Errno -2] Name or service not known")  # what a machine without DNS answers

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    with pytest.raises(
        ModelError,
        match=r"^me/nosuch: no such folder, and the Hub cannot be reached "
        r"\(\[Errno -2\] Name or service not known\): give a local folder$",
    ) as error:
        model_folder.open_model("me/nosuch")
    assert asked == ["me/nosuch"] and error.value.value == "me/nosuch"  # one request, no retries; the value carried

    def missing(self, name, **kwargs):
        error = RepositoryNotFoundError.__new__(RepositoryNotFoundError)  # as the Hub's 404 answer makes it
        Exception.__init__(error, "404 Client Error: Repository Not Found")
        raise error

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", missing)
    with pytest.raises(ModelError, match="the Hub has no model me/nosuch that this token may read"):
        model_folder.open_model("me/nosuch")


def test_a_cached_hub_repo_resolves_offline_to_its_snapshot(tmp_path, monkeypatch):
    snapshot = tmp_path / "models--me--tiny" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"model_type": "elmo"}')
    (tmp_path / "models--me--tiny" / "refs").mkdir()
    (tmp_path / "models--me--tiny" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert model_folder.open_model("me/tiny").path == str(snapshot)


def test_text_in_another_encoding_is_one_line_naming_it(text, lm_dir, tmp_path, capsys):
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes("the cat sat .\n".encode("utf-16-le"))  # no byte-order mark: decodes as UTF-8 with NULs
    one_line(*run(["perplexity", utf16, "--model", lm_dir], capsys), "line 1: NUL characters", "UTF-16LE")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café au lait .\n".encode("latin-1"))
    one_line(*run(["perplexity", latin, "--model", lm_dir], capsys), "not UTF-8 text (byte 0xe9)")
    one_line(
        *run(["pretrain", "--train-file", utf16, "--output-dir", tmp_path / "pt", "--do-train"], capsys),
        "likely UTF-16LE",
    )
    lm = FIXTURES / "allennlp-lm-tiny"
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes("<S>\n</S>\n<UNK>\nthe\n".encode("utf-16-le"))  # read (and refused) before its size is checked
    one_line(
        *run(
            [
                "convert",
                "allennlp",
                "--options",
                lm / "options.json",
                "--weights",
                lm / "weights.hdf5",
                "--softmax-weights",
                lm / "softmax.hdf5",
                "--vocab",
                vocab,
                "--output",
                tmp_path / "lm",
            ],
            capsys,
        ),
        f"{vocab}, line 1: NUL characters in the text, so it is likely UTF-16LE",
    )


def test_a_json_file_of_word_lists_is_one_line(lm_dir, tmp_path, capsys):
    """The AllenNLP fixtures' sentences.json (lists of words): the text column must hold strings."""
    words = FIXTURES / "allennlp-lm-tiny" / "sentences.json"
    one_line(*run(["perplexity", words, "--model", lm_dir], capsys), "holds List(Value('string')), not lines of text")
    one_line(
        *run(["pretrain", "--train-file", words, "--output-dir", tmp_path / "pt", "--do-train"], capsys),
        "not lines of text",
    )


def test_a_device_torch_cannot_use_is_one_line(text, tiny_model_dir, lm_dir, tmp_path, capsys):
    embed = ["embed", text, tmp_path / "out.hdf5", "--top", "--model", tiny_model_dir]
    assert one_line(*run([*embed, "--device", "banana"], capsys)).startswith("error: --device banana: not usable here")
    one_line(*run(["perplexity", text, "--model", lm_dir, "--device", "banana"], capsys), "--device banana")
    if not torch.cuda.is_available():  # a CPU-only torch, as on the test machines
        assert one_line(*run([*embed, "--device", "cuda"], capsys)).startswith("error: --device cuda: not usable here")
    assert one_line(*run([*embed, "--device", "meta", "--dtype", "int8"], capsys)) == (
        "error: --device meta: int8 inference runs on the CPU only: leave the device out, or compute in bfloat16 on "
        "an accelerator"  # (it read "--device int8 inference runs ..., or use dtype=torch.bfloat16")
    )
    assert not (tmp_path / "out.hdf5").exists()


def test_a_config_dtype_torch_lacks_is_one_line(lm_dir, tmp_path, capsys):
    with pytest.raises(ValueError, match="ElmoConfig.dtype 'banana' is not a torch dtype"):
        ElmoConfig(dtype="banana")
    model = shutil.copytree(lm_dir, tmp_path / "model")  # a language model: perplexity refuses a biLM first
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "dtype": "banana"}))
    for command in ("demo", "perplexity", "embed", "finetune", "pretrain"):
        argv = missing_model_commands(tmp_path, str(model))[command]
        one_line(*run(argv, capsys), "'banana' is not a torch dtype")


def test_a_weight_file_that_is_not_safetensors_is_one_line(lm_dir, tmp_path, capsys):
    model = shutil.copytree(lm_dir, tmp_path / "model")
    (model / "model.safetensors").write_text("garbage\n")
    for command in ("demo", "perplexity", "embed"):
        argv = missing_model_commands(tmp_path, str(model))[command]
        one_line(
            *run(argv, capsys),
            f"--model {model}/model.safetensors is not a safetensors file (its header does "
            "not parse): save the model again",
        )


def rewrite_keeping_the_time_stamp(path, content):
    times = path.stat()
    path.write_text(content)
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def test_figures_come_from_the_content_not_from_a_cache_keyed_by_path_and_time(text, lm_dir, tmp_path, capsys):
    """`datasets` keys local files by path and modification time: a file rewritten in the same second (or copied
    with its time stamp) must still be read anew, for perplexity, pre-training and fine-tuning alike."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert run(["perplexity", text, "--model", lm_dir, "--output", first], capsys)[0] == 0
    rewrite_keeping_the_time_stamp(text, "zebra quantum ox .\n")
    assert run(["perplexity", text, "--model", lm_dir, "--output", second], capsys)[0] == 0
    assert json.loads(first.read_text())[str(text)]["words"] == 11
    assert json.loads(second.read_text())[str(text)]["words"] == 4

    from elmo_transformers.training.data import load_splits

    conll = tmp_path / "train.conll"
    conll.write_text("a\tO\nb\tB-X\n")
    assert load_splits(data_files={"train": [str(conll)]})["train"]["tokens"] == [["a", "b"]]
    rewrite_keeping_the_time_stamp(conll, "c\tO\n")
    assert load_splits(data_files={"train": [str(conll)]})["train"]["tokens"] == [["c"]]


def edited_copy(source, tmp_path, name, file, edit):
    """A copy of the model folder `source` whose `file` (JSON) is replaced by `edit(its dict)` (a str: the text)."""
    model = shutil.copytree(source, tmp_path / name)
    value = edit(json.loads((model / file).read_text()))
    (model / file).write_text(value if isinstance(value, str) else json.dumps(value))
    return model


def test_a_config_or_tokenizer_that_does_not_fit_the_model_is_one_line_and_leaves_nothing(lm_dir, tmp_path, capsys):
    """config.json with another projection size than the weights', a tokenizer_config.json with another
    max_characters_per_token than the model's: transformers' RuntimeError and the first forward pass's ValueError
    were tracebacks, and embed left a run.json that looked like an interrupted run."""
    wider = edited_copy(
        lm_dir,
        tmp_path,
        "wider",
        "config.json",
        lambda config: {**config, "projection_dim": config["projection_dim"] + 4},
    )
    narrower = edited_copy(
        lm_dir, tmp_path, "narrower", "tokenizer_config.json", lambda config: {**config, "max_characters_per_token": 20}
    )
    for command in ("demo", "perplexity", "embed"):
        one_line(
            *run(missing_model_commands(tmp_path, str(wider))[command], capsys),
            f"--model {wider}: cannot load it: its config.json does not fit its weights",
            "restore the config.json saved with these weights",
        )
        one_line(
            *run(missing_model_commands(tmp_path, str(narrower))[command], capsys),
            f"--model {narrower}: cannot load it: its tokenizer makes 20 ids a word (max_characters_per_token "
            "20 in tokenizer_config.json), the model reads 50 (max_characters_per_token 50 in config.json)",
        )
    assert not list(tmp_path.glob("out.hdf5*")), "embed leaves nothing behind"


@pytest.mark.parametrize(
    "text", ['{"max_characters_per_token": 5', "", "[]", "\udcff"], ids=["cut", "empty", "list", "not-utf-8"]
)
def test_a_cut_tokenizer_config_is_one_line_naming_it(text, lm_dir, tmp_path, capsys):
    model = shutil.copytree(lm_dir, tmp_path / "model")
    (model / "tokenizer_config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    for command in ("demo", "perplexity", "embed"):
        one_line(
            *run(missing_model_commands(tmp_path, str(model))[command], capsys),
            f"--model {model}: {model / 'tokenizer_config.json'} ",
            "restore that file",
        )
    assert not list(tmp_path.glob("out.hdf5*"))


def test_a_folder_of_another_architecture_is_one_line_in_every_command(tmp_path, capsys):
    """A BERT folder (its config.json as transformers writes it): refused by model_folder before anything loads,
    in every command alike (demo printed ELMo's explanation of BERT's vectors; finetune and pretrain ended in a
    traceback)."""
    from transformers import BertConfig

    bert = tmp_path / "bert"
    BertConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=1).save_pretrained(bert)
    for command, argv in missing_model_commands(tmp_path, str(bert)).items():
        option = "--model-name-or-path" if command in ("finetune", "pretrain") else "--model"
        one_line(*run(argv, capsys), f"{option} {bert} is not an ELMo model: its config.json has model_type 'bert'")
    (bert / "config.json").write_text('{"model_type": "elmo", ')  # cut short
    one_line(
        *run(missing_model_commands(tmp_path, str(bert))["demo"], capsys),
        f"--model {bert}: its config.json cannot be read as JSON",
    )
    assert not any((tmp_path / name).exists() for name in ("out.hdf5", "ft", "pt"))


def test_an_error_reads_in_python_words_to_a_caller_and_in_flags_to_a_command():
    """A message is whole where it is raised; only `cli.one_line` names flags: the argument an error starts with, a
    switch a refusal advises, the option that gave a value (once, never also in front of an argument's flag)."""
    from elmo_transformers import cli
    from elmo_transformers.errors import DataError, OutputExistsError, UnfinishedRunError, UserError

    cases = [
        (
            DataError("max_words 0: must be at least 1", 0, argument="max_words"),
            None,
            "max_words 0: must be at least 1",
            "--max-words 0: must be at least 1",
        ),
        (
            UserError("vocab_path v.txt: no such file", "v.txt", argument="vocab_path"),
            None,
            "vocab_path v.txt: no such file",
            "--vocab v.txt: no such file",
        ),
        (
            UserError("device cuda: not usable here", "cuda", argument="device"),
            "--device",
            "device cuda: not usable here",
            "--device cuda: not usable here",
        ),
        (
            UserError("nosuch: no such folder", "nosuch"),
            "--model",
            "nosuch: no such folder",
            "--model nosuch: no such folder",
        ),
        (
            OutputExistsError("out.h5 exists (pass overwrite=True to replace it)", "out.h5"),
            "--output",
            "out.h5 exists (pass overwrite=True to replace it)",
            "--output out.h5 exists (pass --overwrite to replace it)",
        ),
        (
            UnfinishedRunError("o.partial lacks lines [3]: rerun with resume=True", "o.partial"),
            None,
            "o.partial lacks lines [3]: rerun with resume=True",
            "o.partial lacks lines [3]: rerun with --resume",
        ),
    ]
    for error, option, python_words, command_words in cases:
        assert str(error) == python_words
        if option:
            error.option = option  # as `cli.option(FLAG, value)` marks an error about the value FLAG gave
        assert cli.one_line(error) == command_words


def test_embed_refusals_name_the_flags(text, tiny_model_dir, tmp_path, capsys):
    """The embed command's refusals of its flags, each one whole line (as they read, word for word)."""
    embed = ["embed", text, tmp_path / "out.hdf5", "--top", "--model", tiny_model_dir]
    table = tmp_path / "rows.jsonl"
    table.write_text('{"id": 1, "text": "the cat"}\n')
    rows = ["embed", table, tmp_path / "out.hdf5", "--top", "--model", tiny_model_dir]
    cases = [
        (
            [*embed, "--batch-size", "3", "--batch-words", "100"],
            "--batch-size 3: give either the lines or the words of a batch, not both",
        ),
        ([*embed, "--threads", "0"], "--threads 0: must be a positive int"),
        (
            [*embed, "--text-column", "text"],
            f"--text-column text: reads a column of a JSON lines (.jsonl), CSV (.csv), TSV (.tsv) or Parquet "
            f"(.parquet) file, not of {text}; a text file is read one sentence a line without it",
        ),
        (
            rows,
            f"--text-column not given: {table} is a json file (its columns: id, text): name the one to embed, one "
            "row a line",
        ),
        ([*rows, "--text-column", "words"], f"--text-column words: no such column in {table} (it has id, text)"),
    ]
    for argv, line in cases:
        assert one_line(*run(argv, capsys)) == f"error: {line}"
    assert not (tmp_path / "out.hdf5").exists()
    (tmp_path / "out.hdf5").write_text("mine")
    assert one_line(*run(embed, capsys)) == f"error: {tmp_path / 'out.hdf5'} exists (pass --overwrite to replace it)"


def test_debug_variable_prints_the_traceback_behind_the_line(tmp_path, capsys, monkeypatch):
    """The one line stays last; before it the traceback, with the cause the message hid (`from None`)."""
    argv = ["demo", "--model", "a/b/c"]
    code, err = run(argv, capsys)
    assert "Traceback" not in err
    monkeypatch.setenv("ELMO_TRANSFORMERS_DEBUG", "1")
    code, err = run(argv, capsys)
    assert one_line(code, err.splitlines()[-1] + "\n", "--model a/b/c: no such folder")
    assert "Traceback" in err and "HFValidationError" in err, err


def test_help_is_in_a_users_words(capsys):
    """Each command's --help names what a user gives and gets, not the package's modules, classes or constants
    (embed's named partial_run.PartialRun and defaults.BATCH_WORDS, push's model_files.py and hub/deadline.py): those
    live in docs/."""
    import contextlib
    import re

    import elmo_transformers
    from elmo_transformers.cli import COMMANDS, main

    for command in [[name] for name in COMMANDS if name not in ("convert", "export", "finetune")] + [
        ["convert", "allennlp"],
        ["convert", "tensorflow"],
        ["convert", "elmoformanylangs"],
        ["export", "onnx"],
        ["finetune", "token-classification"],
    ]:
        with contextlib.suppress(SystemExit):
            main([*command, "--help"])
        text = capsys.readouterr().out
        internals = re.findall(r"\b[a-z_]+\.py\b|\belmo_transformers\.[a-z_.]+|\b[a-z_]+\.[A-Z][A-Za-z_]+\b", text)
        internals = [
            name
            for name in internals
            if not name.startswith("transformers.")  # (the user's library)
            and name.removeprefix("elmo_transformers.") not in elmo_transformers.__all__
        ]  # (the API)
        assert not internals, (command, internals)


@pytest.mark.slow
def test_a_reader_that_goes_away_stops_nothing(tmp_path, tiny_model_dir):
    """What a command prints is best effort, in the process a shell starts: embed finishes its work when its stderr
    pipe closes (`| head`; no thread that prints dies holding the progress bar's lock) and when stderr is closed
    (`2>&-`; the output file does not take the number 2), and a closed stdin is one line `error: ...`."""
    import h5py

    text = tmp_path / "in.txt"
    text.write_text("".join(f"the cat sat on the mat number {i} .\n" for i in range(300)))
    env = command_env()
    command_line = shlex.join(elmo_command("embed"))  # bash runs it with env
    for redirect, output, last in [
        ("2>&1 >/dev/null | head -c 10; exit ${PIPESTATUS[0]}", "piped.hdf5", 300),
        ("2>&-", "closed.hdf5", 300),
    ]:
        done = subprocess.run(
            [
                "bash",
                "-c",
                f"{command_line} '{text}' '{tmp_path / output}' --model "
                f"'{tiny_model_dir}' --top --batch-size 4 {redirect}",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (redirect, done.stderr[-2000:])
        with h5py.File(tmp_path / output) as f:
            assert len(f) - 1 == last and f["299"].shape == (9, 16)
    done = subprocess.run(
        ["bash", "-c", f"{command_line} - '{tmp_path / 'stdin.hdf5'}' --model '{tiny_model_dir}' --top <&-"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stderr.strip() == (
        "error: -: stdin is closed: give INPUT as a file, or pipe the text into the command"
    ), done.stderr


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "scripts").glob("*.py")))
def test_each_script_runs_its_command(script, capsys, monkeypatch):
    """`python scripts/NAME.py --help` answers with the usage of the command its docstring names."""
    import runpy

    path = REPO / "scripts" / script
    command = " ".join(path.read_text().split()).split("runs `elmo-transformers ", 1)[1].split(" ARGS`", 1)[0]
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(path), run_name="__main__")
    assert exited.value.code == 0
    assert f"usage: elmo-transformers {command} " in " ".join(capsys.readouterr().out.split())


def test_a_command_run_in_process_leaves_the_process_as_it_was(tiny_model_dir, tmp_path, capsys):
    """`cli_in_process` (run_cli, run) puts back what a command changes in the test process, so that no test's
    outcome depends on the one before it: a fine-tuning run sets up logging, seeds Python, NumPy and torch
    (`set_seed`) and draws new layers."""
    import logging
    import random
    import signal

    import numpy as np
    from conftest import cli_in_process

    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a good film .", "label": "pos"}\n{"text": "a bad film .", "label": "neg"}\n')

    def state():
        return (
            random.getstate(),
            np.random.get_state()[1].tolist(),
            torch.get_rng_state().tolist(),
            dict(os.environ),
            os.getcwd(),
            list(logging.getLogger().handlers),
            torch.get_num_threads(),
            signal.getsignal(signal.SIGINT),
        )

    before = state()
    argv = ["finetune", "sequence-classification", "--model-name-or-path", tiny_model_dir, "--train-file", data]
    argv += ["--output-dir", tmp_path / "out", "--do-train", "--max-steps", "1", "--report-to", "none"]
    assert cli_in_process(argv)[0] == 0
    capsys.readouterr()
    assert state() == before
