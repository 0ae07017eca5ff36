"""scripts/push_to_hub.py and model_card.py: the folder that would be uploaded loads in a fresh process, its card's
usage snippet runs and gives AllenNLP's numbers, and the upload calls get the right repo, folder and files."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import load_fixture
from huggingface_hub import HfApi, ModelCard

import push_to_hub

EXPECTED_FILES = {
    "README.md",
    "config.json",
    "model.safetensors",
    "configuration_elmo.py",
    "modeling_elmo.py",
    "tokenization_elmo.py",
    "tokenizer_config.json",
}


def test_dry_run_folder_loads_in_a_fresh_process(tmp_path, tiny_model_dir, capsys):
    stage = tmp_path / "stage"
    assert push_to_hub.main([str(tiny_model_dir), "me/elmo-tiny", "--dry-run", "--staging-dir", str(stage),
                             "--datasets", "lm1b", "--source", "allennlp-tiny options.json + weights.hdf5"]) == 0
    assert "dry run: would upload" in capsys.readouterr().out
    assert EXPECTED_FILES <= set(os.listdir(stage))

    card = ModelCard.load(stage / "README.md")
    assert card.data.library_name == "transformers"
    assert set(card.data.tags) == {"elmo", "custom_code"}
    assert (card.data.license, card.data.language, card.data.datasets) == ("apache-2.0", ["en"], ["lm1b"])
    assert "Peters" in card.text and "allennlp-tiny options.json" in card.text

    # The card's own usage snippet, run isolated (-I: no repository modules), offline, from another directory.
    snippet = re.search(r"```python\n(.*?)```", card.text, re.S).group(1).replace("me/elmo-tiny", str(stage))
    snippet += "\nimport json; print(json.dumps(sentence_vectors[1].tolist()))\n"
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    result = subprocess.run([sys.executable, "-I", "-c", snippet], cwd=cwd, capture_output=True, text=True,
                            env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert result.returncode == 0, result.stderr
    # "ELMo" is the fixture's sentence 1: its sentence vector is its single word's ELMo vector from AllenNLP.
    _, expected, _ = load_fixture("allennlp-tiny")
    got = np.array(json.loads(result.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(got, expected["elmo_representation"][1, 0], atol=1e-5, rtol=0)


def test_broken_folder_is_refused_before_upload(tmp_path, tiny_model_dir, monkeypatch):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "modeling_elmo.py").unlink()
    monkeypatch.setattr(HfApi, "upload_folder", lambda *a, **k: pytest.fail("must not upload"))
    with pytest.raises(SystemExit, match="does not load with the Auto classes"):
        push_to_hub.main([str(broken), "me/x", "--dry-run", "--staging-dir", str(tmp_path / "stage")])


def test_upload_calls(tmp_path, tiny_model_dir, monkeypatch):
    calls = {}

    def create_repo(self, repo_id, **kwargs):
        calls["create_repo"] = (repo_id, kwargs)
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **kwargs):
        calls["upload_folder"] = kwargs
        calls["files"] = sorted(os.listdir(kwargs["folder_path"]))
        calls["card"] = ModelCard.load(os.path.join(kwargs["folder_path"], "README.md"))

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    monkeypatch.setattr(push_to_hub, "get_token", lambda: "hf_test")
    checked = []
    monkeypatch.setattr(push_to_hub, "check_loads", lambda folder: checked.append(folder) or "loads")  # run above

    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_model_dir, model_dir)
    (model_dir / "runs").mkdir()  # what a Trainer output folder also holds: not part of the model
    (model_dir / "runs" / "events").write_text("log")
    (model_dir / ".lock").write_text("")
    assert push_to_hub.main([str(model_dir), "me/elmo-tiny", "--private", "--license", "mit"]) == 0
    assert calls["create_repo"] == ("me/elmo-tiny", {"private": True, "exist_ok": True})
    upload = calls["upload_folder"]
    assert upload["repo_id"] == "me/elmo-tiny" and checked == [upload["folder_path"]]
    assert set(calls["files"]) == EXPECTED_FILES | set(os.listdir(tiny_model_dir))
    assert calls["card"].data.license == "mit"
    assert not os.path.exists(upload["folder_path"]), "the temporary upload folder must be removed"


def test_no_token_is_a_clear_error(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(push_to_hub, "get_token", lambda: None)
    with pytest.raises(SystemExit, match="HF_TOKEN"):
        push_to_hub.main([str(tiny_model_dir), "me/elmo-tiny"])
