"""`push DIR OWNER/NAME --space --dry-run`: the Space folder holds the repository's app.py, the package code, the
model's files in model/, the requirements and a README whose header is the Spaces configuration; the page builds
from that folder alone in a fresh process (the command's check, which a broken folder fails)."""

import json
import subprocess
import sys

import pytest
from conftest import REPO, command_env

pytest.importorskip("gradio", reason="a Space folder needs Gradio (pip install '.[demo]')")


@pytest.mark.slow
def test_space_dry_run_stages_a_folder_that_serves_the_page(lm_dir, tmp_path, capsys):
    from huggingface_hub import SpaceCard

    from elmo_transformers.cli import main

    staging = tmp_path / "space"
    assert main(["push", str(lm_dir), "me/elmo-demo", "--space", "--dry-run", "--staging-dir", str(staging)]) == 0
    captured = capsys.readouterr()
    assert "the page builds: Blocks on model/" in captured.err and "to the Space me/elmo-demo" in captured.out
    assert (staging / "app.py").read_bytes() == (REPO / "app.py").read_bytes()
    config = json.loads((lm_dir / "config.json").read_text())
    assert json.loads((staging / "model" / "config.json").read_text()) == config
    for name in ("model.safetensors", "vocab.txt", "modeling_elmo.py"):
        assert (staging / "model" / name).is_file()
    assert (staging / "elmo_transformers" / "demo" / "page.py").is_file() and (staging / "modeling_elmo.py").is_file()
    assert not (staging / "elmo_transformers" / "models" / "elmo-en-small").exists()
    assert (staging / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()  # the code's licence goes with it
    requirements = (staging / "requirements.txt").read_text().split()
    assert any(r.startswith("gradio") for r in requirements) and any(r.startswith("torch") for r in requirements)
    assert not any(r.startswith("pytest") for r in requirements)
    card = SpaceCard.load(staging / "README.md")
    assert card.data.sdk == "gradio" and card.data.app_file == "app.py" and "converted" in card.data.title


def test_a_space_folder_that_cannot_build_the_page_is_refused(tmp_path):
    from elmo_transformers.errors import UserError
    from elmo_transformers.hub.space import check_space

    (tmp_path / "app.py").write_text("raise SystemExit('no page here')\n")
    with pytest.raises(UserError, match="fails the check in a fresh process: no page here"):
        check_space(tmp_path)


def test_space_upload_calls(lm_dir, tmp_path, monkeypatch, capsys, fake_hub):
    """Without --dry-run the checked folder goes to a Space of the Gradio SDK, in one commit; an unreachable Hub is
    one line (hub.repo.upload, shared with the model upload)."""
    from huggingface_hub import HfApi

    from elmo_transformers.cli import main
    from elmo_transformers.hub import push, space

    calls = fake_hub
    monkeypatch.setattr(push, "get_token", lambda: "hf_test")
    checked = []
    monkeypatch.setattr(space, "check_space", lambda staging: checked.append(staging) or "the page builds")
    staging = tmp_path / "space"
    assert main(["push", str(lm_dir), "me/elmo-demo", "--space", "--staging-dir", str(staging)]) == 0
    assert calls["create_repo"] == (
        "me/elmo-demo",
        {"repo_type": "space", "private": False, "exist_ok": True, "space_sdk": "gradio"},
    )
    upload = calls["upload_folder"]
    assert upload["repo_type"] == "space" and upload["folder_path"] == str(staging) and checked == [str(staging)]
    assert {"app.py", "requirements.txt", "README.md", "model", "elmo_transformers"} <= set(calls["files"])
    assert "uploaded" in capsys.readouterr().out

    def unreachable(self, repo_id, **kwargs):
        raise ConnectionError("[Errno 111] Connection refused")

    monkeypatch.setattr(HfApi, "create_repo", unreachable)
    assert main(["push", str(lm_dir), "me/elmo-demo", "--space", "--staging-dir", str(tmp_path / "again")]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: cannot upload to me/elmo-demo on ")


@pytest.mark.slow
def test_the_shipped_model_by_name_makes_a_truthful_space(tmp_path, capsys):
    """`push default OWNER/NAME --space` (the card's own command): the Space carries the model card's licence, a CPU
    torch index, a page that names the model, and no file the dry run did not list (no __pycache__)."""
    from huggingface_hub import SpaceCard

    from elmo_transformers.cli import main
    from elmo_transformers.model_folder import open_model

    staging = tmp_path / "space"
    assert main(["push", "default", "me/elmo-demo", "--space", "--dry-run", "--staging-dir", str(staging)]) == 0
    listed = {line.strip() for line in capsys.readouterr().out.splitlines()[1:]}
    on_disk = {p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file()}
    assert listed == on_disk and not [name for name in on_disk if "__pycache__" in name or name.endswith(".pyc")]
    card = SpaceCard.load(staging / "README.md")
    assert (card.data.license, card.data.license_name, card.data.license_link) == (
        "other",
        "mixed-share-alike-sources",
        "model/LICENSE.md",
    )
    assert (staging / "model" / "LICENSE.md").is_file()
    assert card.data.title == "ELMo demo: elmo-en-small" and open_model(staging / "model").title == "elmo-en-small"
    requirements = (staging / "requirements.txt").read_text().splitlines()
    assert requirements[0] == "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert (
        main(
            [
                "push",
                "elmo-en-small",
                "me/elmo-demo",
                "--space",
                "--dry-run",
                "--staging-dir",
                str(tmp_path / "again"),
                "--license",
                "cc-by-sa-4.0",
            ]
        )
        == 0
    )
    card = SpaceCard.load(tmp_path / "again" / "README.md")
    assert card.data.license == "cc-by-sa-4.0" and "license_name" not in card.data.to_dict()


def test_a_converted_folder_is_named_in_its_space(lm_dir, tmp_path):
    """A folder without a card gets one in model/, so that the page names the model, not `model`."""
    from elmo_transformers.model_folder import open_model
    from elmo_transformers.hub.space import build_space_folder

    files, _ = build_space_folder(open_model(lm_dir), tmp_path / "space", "me/elmo-demo")
    assert "model/README.md" in files and open_model(tmp_path / "space" / "model").title == lm_dir.name


def test_push_space_without_gradio_is_one_line_and_stages_nothing(lm_dir, tmp_path, monkeypatch, capsys):
    from elmo_transformers.cli import main

    monkeypatch.setitem(sys.modules, "gradio", None)  # `import gradio` fails as where it is not installed
    staging = tmp_path / "space"
    assert main(["push", str(lm_dir), "me/elmo-demo", "--space", "--dry-run", "--staging-dir", str(staging)]) == 1
    assert capsys.readouterr().err == (
        'error: the web page needs Gradio (gradio is not installed): pip install "elmo-transformers[demo]"\n'
    )
    assert not staging.exists()


def test_app_py_without_gradio_is_one_line(tmp_path):
    code = (
        "import runpy, sys; sys.modules['gradio'] = None; "
        f"runpy.run_path({str(REPO / 'app.py')!r}, run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=command_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert result.stderr == (
        'error: the web page needs Gradio (gradio is not installed): pip install "elmo-transformers[demo]"\n'
    )


def test_a_model_given_as_dot_is_named_by_its_folder(tmp_path, monkeypatch):
    """Without a card the page and the Space name the model by its folder, also when it is given as `.`."""
    from elmo_transformers.model_folder import open_model

    folder = tmp_path / "my-elmo"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "elmo"}', encoding="utf-8")
    monkeypatch.chdir(folder)
    assert open_model(".").title == open_model(str(folder)).title == "my-elmo"
    (folder / "README.md").write_text("---\nlicense: mit\n---\n\n# Card title\n", encoding="utf-8")
    assert open_model(".").title == "Card title"


def test_the_code_has_its_licence_at_the_root_and_in_every_space():
    """pyproject says Apache-2.0: the code has its LICENSE at the root (besides the shipped model's LICENSE.md), and
    every Space that copies the code copies it too. The root LICENSE is the Apache License 2.0 as apache.org publishes
    it."""
    import hashlib

    from elmo_transformers.hub.space import package_files

    text = (REPO / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
    assert package_files()["LICENSE"].read_bytes() == text


def test_a_card_header_that_cannot_be_read_names_the_licence_argument(tmp_path):
    """The Space's licence comes from the model's card: a card whose header is not YAML is one line that says what
    else to do."""
    from elmo_transformers.errors import UserError
    from elmo_transformers.hub.space import model_licence
    from elmo_transformers.model_folder import open_model

    (tmp_path / "config.json").write_text('{"model_type": "elmo"}', encoding="utf-8")
    (tmp_path / "README.md").write_text("---\nlicense: [mit\n---\n\n# Card\n", encoding="utf-8")
    with pytest.raises(UserError) as refused:
        model_licence(open_model(tmp_path))
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'README.md'}: its metadata cannot be read (") and message.endswith(
        "): fix the model card's header, or give the Space's licence as license"
    ), message
