"""`elmo-transformers finetune`: the shipped model is the default starting point."""

import pytest
import torch
from conftest import one_line, run

from elmo_transformers import DEFAULT_MODEL


def test_finetune_defaults_to_the_shipped_model():
    from elmo_transformers.training.arguments import HeadArguments

    assert HeadArguments().model_name_or_path == DEFAULT_MODEL


@pytest.mark.slow
def test_finetune_without_a_model_trains_on_the_shipped_model(tmp_path, capsys):
    from safetensors.torch import load_file

    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a good film .", "label": "pos"}\n{"text": "a bad film .", "label": "neg"}\n')
    assert (
        run(
            [
                "finetune",
                "sequence-classification",
                "--train-file",
                data,
                "--output-dir",
                tmp_path / "out",
                "--do-train",
                "--max-steps",
                "1",
                "--report-to",
                "none",
            ],
            capsys,
        )[0]
        == 0
    )
    trained = load_file(tmp_path / "out" / "model.safetensors")
    shipped = load_file(f"{DEFAULT_MODEL}/model.safetensors")
    bilm = [name for name in shipped if name.startswith("elmo.bilm.")]
    assert bilm and all(torch.equal(trained[name], shipped[name]) for name in bilm)  # its frozen biLM


def test_a_cut_json_lines_file_is_one_line_naming_the_line(tiny_model_dir, tmp_path, capsys):
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a good film .", "label": "pos"}\n{"text": "a bad')  # cut in its second record
    one_line(
        *run(
            [
                "finetune",
                "sequence-classification",
                "--model-name-or-path",
                tiny_model_dir,
                "--train-file",
                data,
                "--output-dir",
                tmp_path / "out",
                "--do-train",
                "--max-steps",
                "1",
                "--report-to",
                "none",
            ],
            capsys,
        ),
        f"{data}, line 2: not a JSON record",
        "restore it",
    )
    assert not (tmp_path / "out").exists()
