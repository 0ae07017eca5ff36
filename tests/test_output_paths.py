"""Every tool that writes refuses, before any work, an output that is, contains or sits inside one of its inputs
(elmo_transformers/output_paths.py): the user's input is never replaced, filled or deleted."""

import contextlib
import io
import os
import shutil

import pytest
from conftest import FIXTURES

from elmo_transformers.cli import main as cli_main


def snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_main(main, argv):
    """(exit code, stderr) of a command line run in-process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


def embed_main(argv):
    return cli_main(["embed", *argv])


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_embed_file_never_replaces_its_input(tmp_path, tiny_model_dir, overwrite):
    """`embed_file in.txt in.txt`, with or without --overwrite, refuses in one line that does not suggest --overwrite,
    also where OUTPUT is a symlink or a hard link to the input; the text stays."""
    text = tmp_path / "in.txt"
    text.write_text("The cat sat .\n", encoding="utf-8")
    for output in (text, tmp_path / "link.txt"):
        if output != text:
            os.symlink(text, output)
        code, err = run_main(embed_main, [text, output, "--model", tiny_model_dir, "--top", *overwrite])
        assert code == 1 and "is the input" in err and "--overwrite" not in err and len(err.splitlines()) == 1, err
        assert text.read_text(encoding="utf-8") == "The cat sat .\n"
    os.link(text, tmp_path / "hard.txt")  # the same file under another name
    code, err = run_main(embed_main, [text, tmp_path / "hard.txt", "--model", tiny_model_dir, "--top", *overwrite])
    assert code == 1 and "is the input" in err and text.read_text(encoding="utf-8") == "The cat sat .\n"


def test_converters_refuse_an_output_inside_or_around_their_input(tmp_path):
    def allennlp_main(argv):
        return cli_main(["convert", "allennlp", *argv])

    def efml_main(argv):
        return cli_main(["convert", "elmoformanylangs", *argv])

    source = tmp_path / "original"
    shutil.copytree(FIXTURES / "allennlp-tiny", source)
    before = snapshot(source)
    options, weights = source / "options.json", source / "weights.hdf5"
    for output, relation in [(source, "contains"), (weights, "is"), (weights / "sub", "is inside")]:
        code, err = run_main(
            allennlp_main, ["--options", options, "--weights", weights, "--output", output, "--overwrite"]
        )
        assert code == 1 and f"{relation} the input" in err and len(err.strip().splitlines()) == 1, err
    efml = tmp_path / "efml"
    shutil.copytree(FIXTURES / "efml-charword" / "model", efml)
    efml_before = snapshot(efml)
    for output in (efml, efml / "converted"):
        code, err = run_main(efml_main, [efml, "--output", output, "--overwrite"])
        assert code == 1 and "the input" in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(source) == before and snapshot(efml) == efml_before
    assert not [p for p in tmp_path.rglob("*") if ".convert-" in p.name]


def test_push_staging_dir_inside_the_model_folder_is_refused(tmp_path, tiny_model_dir):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    before = snapshot(model)
    for staging in (model / "stage", model, tmp_path):
        code, err = run_main(cli_main, ["push", model, "me/x", "--dry-run", "--staging-dir", staging])
        assert code == 1 and "--staging-dir" in err and "the input" in err, err
    assert snapshot(model) == before


@pytest.mark.slow
def test_pretrain_and_finetune_refuse_an_output_dir_overlapping_their_inputs(tmp_path, tiny_model_dir):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("the cat sat on the mat .\n" * 4)
    (data / "train.jsonl").write_text('{"text": "the cat", "label": "a"}\n')
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    before = snapshot(tmp_path)
    for output_dir in (data, data / "train.txt", tmp_path):
        code, err = run_main(
            cli_main, ["pretrain", "--train_file", data / "train.txt", "--do_train", "--output_dir", output_dir]
        )
        assert code == 1 and err.startswith(f"error: --output-dir {output_dir} ") and "the input" in err, err
    for output_dir in (model, model / "out", data):
        code, err = run_main(
            cli_main,
            [
                "finetune",
                "sequence-classification",
                "--model_name_or_path",
                model,
                "--train_file",
                data / "train.jsonl",
                "--do_train",
                "--output_dir",
                output_dir,
            ],
        )
        assert code == 1 and err.startswith(f"error: --output-dir {output_dir} ") and "the input" in err, err
    assert snapshot(tmp_path) == before
