"""A model derived from weights that came with a licence file (the default model's LICENSE.md: the licences of what
it was trained on) keeps that file, and its card says so, through save_pretrained, finetune, pretrain and push."""

import shutil

import pytest
from conftest import SHIPPED, run
from huggingface_hub import ModelCard


LICENCE = "# Licences of test-weights\n\nKeep this file with the weights and with weights you derive from them.\n"
CARD_LICENCE = {"license": "other", "license_name": "licences-of-test-weights", "license_link": "LICENSE.md"}


def with_licence(folder, tmp_path, name):
    copy = shutil.copytree(folder, tmp_path / name, symlinks=True)
    (copy / "LICENSE.md").write_text(LICENCE, encoding="utf-8")
    return copy


def card_of_push(folder, tmp_path, capsys):
    """The licence fields of the card `push --dry-run` stages for `folder`, and whether LICENSE.md is staged."""
    stage = tmp_path / f"stage-{folder.name}"
    assert run(["push", folder, "me/derived", "--dry-run", "--staging-dir", stage], capsys)[0] == 0
    data = ModelCard.load(stage / "README.md").data.to_dict()
    return {field: data.get(field) for field in CARD_LICENCE}, (stage / "LICENSE.md").read_text(encoding="utf-8")


def test_save_pretrained_keeps_the_default_models_licence_file(tmp_path):
    from modeling_elmo import ElmoForTokenClassification

    model = ElmoForTokenClassification.from_pretrained(SHIPPED, num_labels=3)
    model.save_pretrained(tmp_path / "tagger")
    assert (tmp_path / "tagger" / "LICENSE.md").read_bytes() == (SHIPPED / "LICENSE.md").read_bytes()
    again = ElmoForTokenClassification.from_pretrained(tmp_path / "tagger")
    again.save_pretrained(tmp_path / "tagger")  # saving in place keeps it
    again.save_pretrained(tmp_path / "copy")
    assert (tmp_path / "copy" / "LICENSE.md").read_bytes() == (SHIPPED / "LICENSE.md").read_bytes()


def test_weights_without_a_licence_file_get_none(tiny_model_dir, tmp_path):
    from modeling_elmo import ElmoModel

    ElmoModel.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "out")
    assert not (tmp_path / "out" / "LICENSE.md").exists()


@pytest.mark.slow
def test_finetune_and_push_keep_the_licence(tiny_model_dir, tmp_path, capsys):
    base = with_licence(tiny_model_dir, tmp_path, "base")
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a good film .", "label": "pos"}\n{"text": "a bad film .", "label": "neg"}\n')
    assert (
        run(
            [
                "finetune",
                "sequence-classification",
                "--model-name-or-path",
                base,
                "--train-file",
                data,
                "--output-dir",
                tmp_path / "head",
                "--do-train",
                "--max-steps",
                "1",
                "--save-steps",
                "1",
                "--report-to",
                "none",
            ],
            capsys,
        )[0]
        == 0
    )
    assert (tmp_path / "head" / "LICENSE.md").read_text(encoding="utf-8") == LICENCE
    assert (tmp_path / "head" / "checkpoint-1" / "LICENSE.md").read_text(encoding="utf-8") == LICENCE
    assert card_of_push(tmp_path / "head", tmp_path, capsys) == (CARD_LICENCE, LICENCE)


@pytest.mark.slow
def test_pretrain_keeps_the_licence(lm_dir, tmp_path, capsys):
    base = with_licence(lm_dir, tmp_path, "lm")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat .\n" * 40)
    assert (
        run(
            [
                "pretrain",
                "--model-name-or-path",
                base,
                "--train-file",
                corpus,
                "--output-dir",
                tmp_path / "out",
                "--do-train",
                "--max-steps",
                "1",
                "--per-device-train-batch-size",
                "4",
                "--report-to",
                "none",
            ],
            capsys,
        )[0]
        == 0
    )
    assert (tmp_path / "out" / "LICENSE.md").read_text(encoding="utf-8") == LICENCE


def test_an_explicit_licence_wins_and_none_is_apache(tiny_model_dir, tmp_path):
    from elmo_transformers.hub.model_card import model_card
    from elmo_transformers.model_folder import open_model

    base = open_model(with_licence(tiny_model_dir, tmp_path, "base"))
    assert model_card(base, "me/x").data.license == "other"
    assert model_card(base, "me/x", license="cc-by-sa-4.0").data.to_dict().get("license_name") is None
    assert model_card(base, "me/x", license="cc-by-sa-4.0").data.license == "cc-by-sa-4.0"
    assert model_card(open_model(tiny_model_dir), "me/x").data.license == "apache-2.0"


def test_a_licence_file_of_the_users_and_a_link_are_never_copied_over(tmp_path, caplog):
    """save_pretrained replaced a LICENSE.md already in the target folder, and copied what a LICENSE.md link
    pointed to (/etc/passwd) as the saved model's licence (past push's link check)."""
    from modeling_elmo import ElmoModel

    target = tmp_path / "project"
    target.mkdir()
    (target / "LICENSE.md").write_text("MINE\n")
    with caplog.at_level("WARNING"):
        ElmoModel.from_pretrained(SHIPPED).save_pretrained(target)
    assert (target / "LICENSE.md").read_text() == "MINE\n"
    assert any("is kept: it is not the licence file the weights came with" in r.message for r in caplog.records)
    linked = shutil.copytree(SHIPPED, tmp_path / "linked", symlinks=False)
    (linked / "LICENSE.md").unlink()
    (linked / "LICENSE.md").symlink_to("/etc/passwd")
    caplog.clear()
    with caplog.at_level("WARNING"):
        ElmoModel.from_pretrained(linked).save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved" / "LICENSE.md").exists()
    assert any("is not a regular file" in r.message for r in caplog.records)
