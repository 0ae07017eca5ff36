"""The `elmo-transformers` commands off the happy path: --help and usage errors answer before torch is imported, and
a model name that is neither a folder nor a Hub repo, a bad argument or a bad file is one line `error: ...`, found
before the work, in every command."""

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES, command_env, convert_lm_fixture
from huggingface_hub.errors import RepositoryNotFoundError

from configuration_elmo import ElmoConfig
from elmo_transformers import DEFAULT_MODEL, ElmoFillMaskPipeline, model_source, output_paths, text_input
from elmo_transformers.cli import main as cli_main
from elmo_transformers.errors import DataError, ModelError


def run(argv, capsys):
    """(exit code, what the user reads on stderr) of a command line run in-process through `cli.main`."""
    try:
        code = cli_main([str(a) for a in argv])
        err = capsys.readouterr().err
    except SystemExit as e:  # argparse's usage errors; a str code is printed by Python itself on exit
        err = capsys.readouterr().err + (e.code if isinstance(e.code, str) else "")
        code = e.code if isinstance(e.code, int) else 1
    return code, err


def one_line(code, err, *fragments):
    """Exit 1 and the last stderr line is `error: ...` holding `fragments` (progress bars may come before it)."""
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert code == 1 and last.startswith("error: ") and "Traceback" not in err, err[-2000:]
    for fragment in fragments:
        assert fragment in last, last
    return last


QUICK = [
    ["--help"], ["no-such-command"],
    *([name, "--help"] for name in ("convert", "embed", "push", "perplexity", "demo", "finetune")),
    ["convert", "allennlp", "--help"], ["embed", "in.txt"], ["perplexity", "in.txt", "--max-words", "0"],
    ["finetune", "no-such-task"],
]


@pytest.mark.parametrize("argv", QUICK, ids=" ".join)
def test_help_and_usage_errors_answer_before_torch_is_imported(argv, tmp_path):
    """Through the console entry point (elmo_transformers_cli), as `elmo-transformers ARGS` runs it."""
    code = ("import json, sys, elmo_transformers_cli\n"
            "try:\n    status = elmo_transformers_cli.main(sys.argv[1:])\n"
            "except SystemExit as e:\n    status = e.code\n"
            "print(json.dumps({'status': status, 'loaded': sorted({'torch', 'transformers'} & set(sys.modules))}))")
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, env=command_env(), capture_output=True,
                          text=True, timeout=120)
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["status"] == (0 if "--help" in argv else 2), done.stderr[-2000:]
    assert result["loaded"] == [], result
    assert ("usage" in done.stdout + done.stderr), done.stdout[:500]


def run_entry_point(argv, cwd, modules):
    """(exit status, which of `modules` got imported, stdout, stderr) of `elmo-transformers ARGV` in a new process."""
    code = ("import json, sys, elmo_transformers_cli\n"
            "try:\n    status = elmo_transformers_cli.main(sys.argv[1:])\n"
            "except SystemExit as e:\n    status = e.code\n"
            f"print(json.dumps({{'status': status, 'loaded': sorted(set({modules}) & set(sys.modules))}}))")
    done = subprocess.run([sys.executable, "-c", code, *map(str, argv)], cwd=cwd, env=command_env(),
                          capture_output=True, text=True, timeout=120)
    result = json.loads(done.stdout.splitlines()[-1])
    return result["status"], result["loaded"], done.stdout, done.stderr


@pytest.mark.parametrize("argv", [["pretrain", "--help"], ["finetune", "token-classification", "--help"]],
                         ids=" ".join)
def test_training_commands_help_lists_the_elmo_options_without_importing_torch(argv, tmp_path):
    """--help answers from the argument dataclasses: the ELMo options first, then where Trainer's are."""
    status, loaded, out, err = run_entry_point(argv, tmp_path, ["torch", "transformers"])
    assert (status, loaded) == (0, []), err[-2000:]
    assert "--model-name-or-path" in out and "--output-dir" in out and "--help-trainer" in out, out
    assert len(out.splitlines()) < 200 and out.index("--model-name-or-path") < out.index("--help-trainer` lists")


@pytest.mark.parametrize("argv", [["pretrain", "--help-trainer"], ["pretrain", "--no-such-option"],
                                  ["finetune", "sequence-classification", "--learning-rate", "abc"]], ids=" ".join)
def test_training_commands_parse_before_the_model_and_data_code(argv, tmp_path):
    """--help-trainer lists Trainer's options, so it imports transformers' TrainingArguments (and torch with it),
    but not Trainer, datasets or the model code; an unknown option or a bad value is the error alone after a short
    usage line, not the usage of every Trainer option."""
    status, loaded, out, err = run_entry_point(argv, tmp_path, ["datasets", "modeling_elmo", "transformers.trainer"])
    assert (status, loaded) == ({"--help-trainer": 0, "--no-such-option": 1}.get(argv[1], 2), []), err[-2000:]
    if "--help-trainer" in argv:
        assert "--per_device_train_batch_size" in out
    elif status == 1:
        assert err.strip().splitlines() == ["error: unknown options ['--no-such-option']: `elmo-transformers "
                                            "pretrain --help` lists them"], err
    else:
        assert err.strip().splitlines() == [
            "usage: elmo-transformers finetune sequence-classification [--help] [--help-trainer] [OPTIONS]",
            "elmo-transformers finetune sequence-classification: error: argument --learning_rate/--learning-rate: "
            "invalid float value: 'abc'"], err


@pytest.mark.parametrize("argv, error", [
    (["pretrain", "--output-dir", "out", "--learning-rate", "abc"],
     "argument --learning_rate/--learning-rate: invalid float value: 'abc'"),  # Trainer's
    (["finetune", "token-classification", "--output-dir", "out", "--max-words", "x"],
     "argument --max_words/--max-words: invalid int value: 'x'"),  # the command's own
], ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_a_number_option_that_is_not_a_number_is_refused_before_torch(argv, error, tmp_path):
    """Trainer's number options are known from transformers' source (training_args.py), read without importing it:
    the same usage error as HfArgumentParser's, without the seconds that importing transformers and torch takes."""
    status, loaded, out, err = run_entry_point(argv, tmp_path, ["torch", "transformers"])
    prog = "elmo-transformers " + " ".join(argv[:argv.index("--output-dir")])
    assert (status, loaded) == (2, []), err[-2000:]
    assert err.strip().splitlines() == [f"usage: {prog} [--help] [--help-trainer] [OPTIONS]",
                                        f"{prog}: error: {error}"], err
    assert not (tmp_path / "out").exists()


def test_trainer_number_options_are_read_from_the_installed_source(tmp_path, monkeypatch, capsys):
    """The number options read from training_args.py are those HfArgumentParser makes of TrainingArguments; where
    that source cannot be read, nothing is checked early and HfArgumentParser refuses the value as before."""
    from transformers import HfArgumentParser, TrainingArguments

    from elmo_transformers.cli import training_arguments

    parsed = {a.dest: a.type for a in HfArgumentParser(TrainingArguments)._actions if a.type in (int, float)}
    assert training_arguments.trainer_number_fields() == parsed and "learning_rate" in parsed
    with monkeypatch.context() as patch:
        patch.setattr(training_arguments.importlib.util, "find_spec",
                      lambda name: type("Spec", (), {"submodule_search_locations": [str(tmp_path)]}))
        assert training_arguments.trainer_number_fields() == {}
    monkeypatch.setattr(training_arguments, "trainer_number_fields", dict)
    code, err = run(["pretrain", "--output-dir", tmp_path / "out", "--learning-rate", "abc"], capsys)
    assert code == 2 and err.strip().splitlines()[-1] == (
        "elmo-transformers pretrain: error: argument --learning_rate/--learning-rate: invalid float value: 'abc'")


def test_the_entry_point_registers_elmo_before_the_work(tmp_path):
    """The package's __init__, deferred while parsing, runs before a command works: the demo loads the shipped
    model with AutoModel (no trust_remote_code), which needs the registration."""
    code = "import sys, elmo_transformers_cli\nsys.exit(elmo_transformers_cli.main(['demo']))"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=command_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and 'The word "bank" in 4 places' in done.stdout, done.stderr[-2000:]


def missing_model_commands(tmp_path, name):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat .\n")
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a b", "label": "x"}\n')
    return {
        "demo": ["demo", "--model", name],
        "embed": ["embed", text, tmp_path / "out.hdf5", "--top", "--model", name],
        "perplexity": ["perplexity", text, "--model", name],
        "finetune": ["finetune", "sequence-classification", "--model-name-or-path", name, "--train-file", data,
                     "--output-dir", tmp_path / "ft", "--do-train"],
        "pretrain": ["pretrain", "--model-name-or-path", name, "--train-file", text, "--output-dir", tmp_path / "pt",
                     "--do-train"],
    }


@pytest.mark.parametrize("command", ["demo", "embed", "perplexity", "finetune", "pretrain"])
def test_a_missing_model_is_one_line_in_every_command(command, tmp_path, capsys, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("offline: the Hub must not be asked")

    monkeypatch.setattr(model_source.HfApi, "model_info", no_network)
    (tmp_path / "a-file").write_text("")
    option = "--model-name-or-path" if command in ("finetune", "pretrain") else "--model"
    for name, why in [("nosuch", "not in the local cache (HF_HUB_OFFLINE is set)"),
                      ("a/b/c", "not a Hub repo id"), (str(tmp_path / "a-file"), "is a file")]:
        code, err = run(missing_model_commands(tmp_path, name)[command], capsys)
        one_line(code, err, f"{option} {name}", why)
    assert not (tmp_path / "out.hdf5").exists() and not (tmp_path / "ft").exists() and not (tmp_path / "pt").exists()


def test_an_unreachable_or_missing_hub_repo_is_one_line_without_retries(monkeypatch):
    monkeypatch.setattr(model_source.constants, "HF_HUB_OFFLINE", False)
    asked = []

    def unreachable(self, name, **kwargs):
        asked.append(name)
        raise ConnectionError("[Errno -2] Name or service not known")  # what a machine without DNS answers

    monkeypatch.setattr(model_source.HfApi, "model_info", unreachable)
    with pytest.raises(ModelError, match=r"^me/nosuch: no such folder, and the Hub cannot be reached "
                                         r"\(\[Errno -2\] Name or service not known\): give a local folder$") as error:
        model_source.resolve_model("me/nosuch")
    assert asked == ["me/nosuch"] and error.value.value == "me/nosuch"  # one request, no retries; the value carried

    def missing(self, name, **kwargs):
        error = RepositoryNotFoundError.__new__(RepositoryNotFoundError)  # as the Hub's 404 answer makes it
        Exception.__init__(error, "404 Client Error: Repository Not Found")
        raise error

    monkeypatch.setattr(model_source.HfApi, "model_info", missing)
    with pytest.raises(ModelError, match="the Hub has no model me/nosuch that this token may read"):
        model_source.resolve_model("me/nosuch")


def test_a_cached_hub_repo_resolves_offline_to_its_snapshot(tmp_path, monkeypatch):
    snapshot = tmp_path / "models--me--tiny" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"model_type": "elmo"}')
    (tmp_path / "models--me--tiny" / "refs").mkdir()
    (tmp_path / "models--me--tiny" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(model_source.constants, "HF_HUB_CACHE", str(tmp_path))
    assert model_source.resolve_model("me/tiny") == str(snapshot)


def test_finetune_defaults_to_the_shipped_model():
    from elmo_transformers.training.arguments import HeadArguments

    assert HeadArguments().model_name_or_path == DEFAULT_MODEL


# -- perplexity ---------------------------------------------------------------------------------------------------


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("the cat sat on the mat .\nthe dog sat .\n")
    return path


def test_perplexity_of_a_model_without_softmax_says_what_to_use(text, tiny_model_dir, capsys):
    one_line(*run(["perplexity", text, "--model", tiny_model_dir], capsys),
             "has no language-model softmax", "the shipped model (omit --model)", "elmo-transformers pretrain")


def test_perplexity_refuses_a_vocab_txt_of_another_size(text, lm_dir, tmp_path, capsys):
    model = shutil.copytree(lm_dir, tmp_path / "lm")
    with open(model / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra\n")
    one_line(*run(["perplexity", text, "--model", model], capsys), "word vocabulary has", "restore that vocab.txt")
    from transformers import pipeline

    with pytest.raises(ValueError, match="word vocabulary has"):
        pipeline("fill-mask", model=str(model), pipeline_class=ElmoFillMaskPipeline)


def test_perplexity_output_follows_the_output_rule_and_is_written_whole(text, lm_dir, tmp_path, capsys,
                                                                       monkeypatch):
    model = shutil.copytree(lm_dir, tmp_path / "lm")
    config = (model / "config.json").read_bytes()
    for output, relation in [(text, "is the input"), (model / "config.json", "is inside the input"),
                             (tmp_path, "contains the input")]:
        one_line(*run(["perplexity", text, "--model", model, "--output", output], capsys), relation)
    assert (model / "config.json").read_bytes() == config
    one_line(*run(["perplexity", text, "--model", model, "--output", tmp_path / "no" / "f.json"], capsys),
             "is not an existing folder")

    def refuse(dir):  # root writes anywhere, so the refusal is simulated where the check meets the file system
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as patch:
        patch.setattr(output_paths.tempfile, "TemporaryFile", refuse)
        patch.setattr("transformers.AutoConfig.from_pretrained", lambda *a, **k: pytest.fail("checked after loading"))
        one_line(*run(["perplexity", text, "--model", model, "--output", tmp_path / "f.json"], capsys),
                 f"--output {tmp_path / 'f.json'}: cannot write into {tmp_path}: Permission denied")

    figures = tmp_path / "figures.json"
    assert run(["perplexity", text, "--model", model, "--output", figures], capsys)[0] == 0
    first = json.loads(figures.read_text())
    assert first[str(text)]["words"] == 11 and first[str(text)]["perplexity"] > 1

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    one_line(*run(["perplexity", text, "--model", model, "--output", figures], capsys),
             f"{figures} exists (pass --overwrite to replace it)")
    monkeypatch.setattr(output_paths.os, "fsync", full_disk)
    one_line(*run(["perplexity", text, "--model", model, "--output", figures, "--max-words", "3", "--overwrite"],
                  capsys), "No space left on device")
    assert json.loads(figures.read_text()) == first  # the earlier figures, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures.json", "lm", "text.txt"]  # no temporary file


@pytest.mark.parametrize("flags", [["--max-words", "0"], ["--max-words", "-5"], ["--batch-size", "0"]])
def test_perplexity_bad_numbers_are_usage_errors(flags, text, capsys):
    code, err = run(["perplexity", text, *flags], capsys)
    assert code == 2 and f"{flags[0]} must be at least 1" in err


def test_text_in_another_encoding_is_one_line_naming_it(text, lm_dir, tmp_path, capsys):
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes("the cat sat .\n".encode("utf-16-le"))  # no byte-order mark: decodes as UTF-8 with NULs
    one_line(*run(["perplexity", utf16, "--model", lm_dir], capsys), "line 1: NUL characters", "UTF-16LE")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café au lait .\n".encode("latin-1"))
    one_line(*run(["perplexity", latin, "--model", lm_dir], capsys), "not UTF-8 text (byte 0xe9)")
    one_line(*run(["pretrain", "--train-file", utf16, "--output-dir", tmp_path / "pt", "--do-train"], capsys),
             "likely UTF-16LE")
    lm = FIXTURES / "allennlp-lm-tiny"
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes("<S>\n</S>\n<UNK>\nthe\n".encode("utf-16-le"))  # read (and refused) before its size is checked
    one_line(*run(["convert", "allennlp", "--options", lm / "options.json", "--weights", lm / "weights.hdf5",
                   "--softmax-weights", lm / "softmax.hdf5", "--vocab", vocab, "--output", tmp_path / "lm"], capsys),
             f"{vocab}, line 1: NUL characters in the text, so it is likely UTF-16LE")


def test_a_json_file_of_word_lists_is_one_line(lm_dir, tmp_path, capsys):
    """The AllenNLP fixtures' sentences.json (lists of words): the text column must hold strings."""
    words = FIXTURES / "allennlp-lm-tiny" / "sentences.json"
    one_line(*run(["perplexity", words, "--model", lm_dir], capsys), "holds List(Value('string')), not lines of text")
    one_line(*run(["pretrain", "--train-file", words, "--output-dir", tmp_path / "pt", "--do-train"], capsys),
             "not lines of text")


def test_a_device_torch_cannot_use_is_one_line(text, tiny_model_dir, lm_dir, tmp_path, capsys):
    embed = ["embed", text, tmp_path / "out.hdf5", "--top", "--model", tiny_model_dir]
    one_line(*run([*embed, "--device", "banana"], capsys), "--device banana: not usable here")
    one_line(*run(["perplexity", text, "--model", lm_dir, "--device", "banana"], capsys), "--device banana")
    if not torch.cuda.is_available():  # a CPU-only torch, as on the test machines
        one_line(*run([*embed, "--device", "cuda"], capsys), "--device cuda: not usable here")
    assert not (tmp_path / "out.hdf5").exists()


# -- broken model folders and files -------------------------------------------------------------------------------


def test_a_config_dtype_torch_lacks_is_one_line(tiny_model_dir, tmp_path, capsys):
    with pytest.raises(ValueError, match="ElmoConfig.dtype 'banana' is not a torch dtype"):
        ElmoConfig(dtype="banana")
    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
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
        one_line(*run(argv, capsys), f"--model {model}: cannot load it: Error while deserializing header")


def test_an_error_of_several_lines_is_printed_as_one(tmp_path, capsys):
    """tarfile lists why each compression failed, one per line; the user reads one line."""
    empty = tmp_path / "module.tar.gz"
    empty.write_bytes(b"")
    code, err = run(["convert", "tensorflow", empty, "--output", tmp_path / "out"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and err.startswith(f"error: cannot unpack {empty}"), err


def test_a_deeply_nested_options_json_is_one_line(tmp_path, capsys):
    options = tmp_path / "options.json"
    options.write_text("[" * 100_000 + "]" * 100_000)
    code, err = run(["convert", "allennlp", "--options", options, "--weights",
                     FIXTURES / "allennlp-tiny" / "weights.hdf5", "--output", tmp_path / "out"], capsys)
    one_line(code, err, "nests lists or objects too deeply")
    assert not (tmp_path / "out").exists()


def test_push_of_a_bogus_architecture_or_to_an_unwritable_staging_dir_is_one_line(tiny_model_dir, tmp_path,
                                                                                   capsys):
    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "architectures": ["Banana"]}))
    one_line(*run(["push", model, "me/x", "--dry-run"], capsys), "config.architectures names 'Banana'")
    (tmp_path / "a-file").write_text("")
    one_line(*run(["push", tiny_model_dir, "me/x", "--dry-run", "--staging-dir", tmp_path / "a-file" / "stage"],
                  capsys), "cannot write into --staging-dir")


def test_the_training_functions_name_arguments_and_the_commands_name_flags(text, tiny_model_dir, tmp_path, capsys):
    """A Python caller of the training functions (the argument dataclasses, TrainingArguments) reads the arguments'
    names and no command-line flag; the command says the same with its flags."""
    from transformers import TrainingArguments

    from elmo_transformers.training.arguments import (FinetuneDataArguments, HeadArguments, PretrainDataArguments,
                                                      PretrainModelArguments)
    from elmo_transformers.training.finetuning import sequence_classification
    from elmo_transformers.training.pretraining import pretrain

    training_args = TrainingArguments(output_dir=str(tmp_path / "out"), do_train=True, report_to="none")
    data = tmp_path / "train.jsonl"
    data.write_text('{"sentence": "a good film .", "label": "pos"}\n')
    cases = [
        (lambda: pretrain(PretrainModelArguments(add_words=5), PretrainDataArguments(train_file=[str(text)]),
                          training_args),
         ["pretrain", "--add-words", "5", "--train-file", text],
         "{add_words} extends the starting model's own softmax: give {model_name_or_path} of a language model (with "
         "its vocab.txt), {do_train}, and no {vocab_file}"),
        (lambda: pretrain(PretrainModelArguments(), PretrainDataArguments(train_file=[str(text)], max_words=0),
                          training_args),
         ["pretrain", "--max-words", "0", "--train-file", text],
         "{max_words} 0: must be at least 1 (the words of a training window)"),
        (lambda: sequence_classification(HeadArguments(model_name_or_path=str(tiny_model_dir)),
                                         FinetuneDataArguments(train_file=str(data)), training_args),
         ["finetune", "sequence-classification", "--model-name-or-path", tiny_model_dir, "--train-file", data],
         "no column 'text' in the data (columns: ['sentence', 'label']); set {text_column}"),
    ]
    for call, argv, template in cases:
        with pytest.raises(DataError) as refused:
            call()
        names = {"add_words", "model_name_or_path", "do_train", "vocab_file", "max_words", "text_column"}
        assert str(refused.value) == template.format(**{name: name for name in names})
        assert "--" not in str(refused.value)
        flags = {name: "--" + name.replace("_", "-") for name in names}
        code, err = run([*argv, "--output-dir", tmp_path / "out", "--do-train", "--report-to", "none"], capsys)
        assert one_line(code, err) == f"error: {template.format(**flags)}"
    assert not (tmp_path / "out").exists()


def test_pretrain_refuses_a_negative_add_words(text, tmp_path, capsys):
    one_line(*run(["pretrain", "--train-file", text, "--output-dir", tmp_path / "pt", "--do-train", "--add-words",
                   "-5"], capsys), "--add-words -5: must be 0 (none) or more")
    assert not (tmp_path / "pt").exists()


def test_model_options_the_configuration_refuses_are_one_line(text, tiny_model_dir, tmp_path, capsys):
    """A value ElmoConfig refuses, a JSON option that is not JSON, and options Trainer refuses together are one line
    naming the field or option, in pretrain and finetune alike."""
    pretrain = ["pretrain", "--train-file", text, "--do-train", "--max-steps", "1", "--report-to", "none"]
    one_line(*run([*pretrain, "--output-dir", tmp_path / "a", "--lstm-dim", "0"], capsys), "ElmoConfig.lstm_dim")
    one_line(*run([*pretrain, "--output-dir", tmp_path / "b", "--filters", "[[1, 4]"], capsys),
             "--filters '[[1, 4]' is not JSON")
    one_line(*run([*pretrain, "--output-dir", tmp_path / "c", "--lm-dropout", "1.5"], capsys), "ElmoConfig.lm_dropout")
    one_line(*run([*pretrain, "--output-dir", tmp_path / "d", "--eval-strategy", "steps", "--save-strategy", "epoch",
                   "--load-best-model-at-end"], capsys), "load_best_model_at_end")
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a good film .", "label": "pos"}\n{"text": "a bad film .", "label": "neg"}\n')
    finetune = ["finetune", "sequence-classification", "--model-name-or-path", tiny_model_dir, "--train-file", data,
                "--do-train", "--max-steps", "1", "--report-to", "none"]
    one_line(*run([*finetune, "--output-dir", tmp_path / "e", "--dropout", "1.5"], capsys), "dropout", "1.5")
    one_line(*run([*finetune, "--output-dir", tmp_path / "f", "--scalar-mix-parameters", "x"], capsys),
             "--scalar-mix-parameters 'x' is not JSON")


def test_training_data_the_commands_cannot_use_is_one_line(tiny_model_dir, tmp_path, capsys):
    """Found by probing the installed commands: each was a traceback."""
    finetune = ["finetune", "sequence-classification", "--model-name-or-path", tiny_model_dir, "--do-train",
                "--max-steps", "1", "--report-to", "none"]
    cases = [('{"text": "a b", "label": 1}\n{"text": "c d", "label": "pos"}\n', "mix types (int, str)"),
             ('{"txt": "a b", "label": "x"}\n', "no column 'text' in the data"),
             ('{"text": null, "label": "x"}\n{"text": "a", "label": "y"}\n', "sentence 0 is None"),
             ('{"text": "a b", "label": [1]}\n', "a label must be one string or number")]
    for n, (rows, fragment) in enumerate(cases):
        data = tmp_path / f"data{n}.jsonl"
        data.write_text(rows)
        one_line(*run([*finetune, "--train-file", data, "--output-dir", tmp_path / f"out{n}"], capsys), fragment)
    conll = tmp_path / "bad.conll"
    conll.write_text("a\tB\nb\n\nc\tO\n")
    one_line(*run(["finetune", "token-classification", "--model-name-or-path", tiny_model_dir, "--train-file", conll,
                   "--output-dir", tmp_path / "tc", "--do-train"], capsys), "bad.conll:2: expected 'token<TAB>tag'")
    text, empty = tmp_path / "t.txt", tmp_path / "empty.txt"
    text.write_text("the cat sat .\n")
    empty.write_text("")
    pretrain = ["pretrain", "--train-file", text, "--do-train", "--validation-split-percentage", "0"]
    one_line(*run([*pretrain, "--output-dir", tmp_path / "p1", "--max-words", "0"], capsys),
             "--max-words 0: must be at least 1")
    one_line(*run([*pretrain, "--output-dir", tmp_path / "p2", "--vocab-file", empty], capsys),
             f"--vocab-file {empty}: ")
    assert not any((tmp_path / name).exists() for name in ("out0", "out1", "out2", "out3", "tc", "p1"))


def test_an_output_dir_that_holds_files_is_refused_unless_asked(tmp_path, capsys):
    """Trainer writes into --output-dir whatever is there; the commands ask first."""
    text, output = tmp_path / "t.txt", tmp_path / "run"
    text.write_text("the cat sat .\nthe dog sat .\n")
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    pretrain = ["pretrain", "--train-file", text, "--do-train", "--validation-split-percentage", "0", "--max-steps",
                "1", "--report-to", "none", "--lstm-dim", "8", "--projection-dim", "4", "--filters", "[[1, 4]]",
                "--output-dir", output]
    one_line(*run(pretrain, capsys), f"--output-dir {output} already holds files", "--overwrite-output-dir")
    assert sorted(p.name for p in output.iterdir()) == ["notes.txt"]
    assert run([*pretrain, "--overwrite-output-dir"], capsys)[0] == 0
    assert (output / "model.safetensors").is_file() and (output / "notes.txt").read_text() == "mine"


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


@pytest.mark.slow
def test_finetune_without_a_model_trains_on_the_shipped_model(tmp_path, capsys):
    from safetensors.torch import load_file

    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a good film .", "label": "pos"}\n{"text": "a bad film .", "label": "neg"}\n')
    assert run(["finetune", "sequence-classification", "--train-file", data, "--output-dir", tmp_path / "out",
                "--do-train", "--max-steps", "1", "--report-to", "none"], capsys)[0] == 0
    trained = load_file(tmp_path / "out" / "model.safetensors")
    shipped = load_file(f"{DEFAULT_MODEL}/model.safetensors")
    bilm = [name for name in shipped if name.startswith("elmo.bilm.")]
    assert bilm and all(torch.equal(trained[name], shipped[name]) for name in bilm)  # its frozen biLM


def test_pretrain_on_too_few_lines_to_hold_out_validation_is_one_line(text, tmp_path, capsys):
    one_line(*run(["pretrain", "--train-file", text, "--output-dir", tmp_path / "pt", "--do-train",
                   "--validation-split-percentage", "60"], capsys), "cannot hold out 60.0% of 2 training lines")


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
    wider = edited_copy(lm_dir, tmp_path, "wider", "config.json",
                        lambda config: {**config, "projection_dim": config["projection_dim"] + 4})
    narrower = edited_copy(lm_dir, tmp_path, "narrower", "tokenizer_config.json",
                           lambda config: {**config, "max_characters_per_token": 20})
    for command in ("demo", "perplexity", "embed"):
        one_line(*run(missing_model_commands(tmp_path, str(wider))[command], capsys),
                 f"--model {wider}: cannot load it: its config.json does not fit its weights",
                 "restore the config.json saved with these weights")
        one_line(*run(missing_model_commands(tmp_path, str(narrower))[command], capsys),
                 f"--model {narrower}: cannot load it: its tokenizer makes 20 ids a word (max_characters_per_token "
                 "20 in tokenizer_config.json), the model reads 50 (max_characters_per_token 50 in config.json)")
    assert not list(tmp_path.glob("out.hdf5*")), "embed leaves nothing behind"


@pytest.mark.parametrize("text", ['{"max_characters_per_token": 5', "", "[]", "\udcff"], ids=["cut", "empty", "list",
                                                                                          "not-utf-8"])
def test_a_cut_tokenizer_config_is_one_line_naming_it(text, lm_dir, tmp_path, capsys):
    model = shutil.copytree(lm_dir, tmp_path / "model")
    (model / "tokenizer_config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    for command in ("demo", "perplexity", "embed"):
        one_line(*run(missing_model_commands(tmp_path, str(model))[command], capsys),
                 f"--model {model}: {model / 'tokenizer_config.json'} ", "restore that file")
    assert not list(tmp_path.glob("out.hdf5*"))


def test_a_vocabulary_without_line_breaks_is_one_line(tmp_path, capsys, monkeypatch):
    """`convert allennlp --vocab /dev/zero` read one endless line until MemoryError."""
    one_line(convert_lm_fixture(tmp_path / "out", vocab="/dev/zero"), capsys.readouterr().err,
             "cannot use the vocabulary /dev/zero: /dev/zero, line 1: NUL characters in the text")
    monkeypatch.setattr(text_input, "MAX_LINE_CHARS", 100)  # a vocabulary of 2**28 characters without a line break
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<S>\n</S>\n<UNK>\n" + "w" * 101 + "\n")
    one_line(convert_lm_fixture(tmp_path / "out", vocab=vocab), capsys.readouterr().err,
             f"{vocab}, line 4: longer than 100 characters without a line break")
    assert not (tmp_path / "out").exists()


# -- issue 29: a model that is not ELMo, Ctrl-C, the debug traceback, checks before writing ----------------------


def test_a_folder_of_another_architecture_is_one_line_in_every_command(tmp_path, capsys):
    """A BERT folder (its config.json as transformers writes it): refused by model_source before anything loads,
    in every command alike (demo printed ELMo's explanation of BERT's vectors; finetune and pretrain ended in a
    traceback)."""
    from transformers import BertConfig

    bert = tmp_path / "bert"
    BertConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=1).save_pretrained(bert)
    for command, argv in missing_model_commands(tmp_path, str(bert)).items():
        option = "--model-name-or-path" if command in ("finetune", "pretrain") else "--model"
        one_line(*run(argv, capsys), f"{option} {bert} is not an ELMo model: its config.json has model_type 'bert'")
    (bert / "config.json").write_text('{"model_type": "elmo", ')  # cut short
    one_line(*run(missing_model_commands(tmp_path, str(bert))["demo"], capsys),
             f"--model {bert}: its config.json cannot be read as JSON")
    assert not any((tmp_path / name).exists() for name in ("out.hdf5", "ft", "pt"))


def test_debug_variable_prints_the_traceback_behind_the_line(tmp_path, capsys, monkeypatch):
    """The one line stays last; before it the traceback, with the cause the message hid (`from None`)."""
    argv = ["demo", "--model", "a/b/c"]
    code, err = run(argv, capsys)
    assert "Traceback" not in err
    monkeypatch.setenv("ELMO_TRANSFORMERS_DEBUG", "1")
    code, err = run(argv, capsys)
    assert one_line(code, err.splitlines()[-1] + "\n", "--model a/b/c: no such folder")
    assert "Traceback" in err and "HFValidationError" in err, err


def test_ctrl_c_during_convert_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    """Interrupted while the folder is being written: no traceback, no output folder, no staging folder."""
    import modeling_elmo

    def interrupted(self, folder, **kwargs):
        (Path(folder) / "model.safetensors").write_text("half")  # what a cut write leaves
        raise KeyboardInterrupt

    monkeypatch.setattr(modeling_elmo.ElmoModel, "save_pretrained", interrupted)
    tiny = FIXTURES / "allennlp-tiny"
    out = tmp_path / "converted" / "out"
    code, err = run(["convert", "allennlp", "--options", tiny / "options.json", "--weights", tiny / "weights.hdf5",
                     "--output", out], capsys)
    assert (code, err.strip()) == (130, "interrupted: elmo-transformers convert stopped before it finished"), err
    assert os.listdir(tmp_path / "converted") == []


def test_perplexity_checks_the_model_before_reading_the_data_and_shows_progress(text, tiny_model_dir, lm_dir,
                                                                                capsys, monkeypatch):
    import elmo_transformers.training.data as data

    with monkeypatch.context() as patch:
        patch.setattr(data, "load_splits", lambda *a, **k: pytest.fail("the data was read before the model check"))
        one_line(*run(["perplexity", text, "--model", tiny_model_dir], capsys), "has no language-model softmax")
    code, err = run(["perplexity", text, "--model", lm_dir], capsys)
    assert code == 0 and f"{text}: 100%" in err, err  # the scoring's progress bar, named by the file


def test_pretrain_add_words_refusals_write_nothing(text, lm_dir, tmp_path, capsys):
    """Refused before the vocabulary is built into --output-dir, so the corrected command finds it empty."""
    output = tmp_path / "pt"
    pretrain = ["pretrain", "--train-file", text, "--do-train", "--add-words", "5", "--output-dir", output,
                "--validation-split-percentage", "0"]
    one_line(*run(pretrain, capsys), "--add-words extends the starting model's own softmax")
    assert not output.exists()
    model = shutil.copytree(lm_dir, tmp_path / "lm")
    with open(model / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra\n")
    one_line(*run([*pretrain, "--model-name-or-path", model], capsys), "restore its vocab.txt")
    assert not output.exists()
