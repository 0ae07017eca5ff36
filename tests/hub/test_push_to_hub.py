"""`elmo-transformers push` (elmo_transformers.hub.push and .model_card): the folder that would be uploaded holds only
what a model repo needs and loads in a fresh process; its card follows the architecture (task, Auto class, labels,
evaluation results) and its usage snippet runs and gives AllenNLP's numbers or the head's predictions; the upload
calls get the right repo, folder and files."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch
from conftest import REPO, SHIPPED, TOKEN_LABELS, USER_ENV, load_fixture
from huggingface_hub import HfApi, ModelCard
from tolerance import assert_close_to_reference

from configuration_elmo import ELMO_MODULES
from elmo_transformers.hub import push as hub
from elmo_transformers.hub.repo import refuse_links_out
from elmo_transformers.cli import push as push_to_hub
from elmo_transformers.errors import UserError
from elmo_transformers.model_files import MODEL_FILES
from elmo_transformers.model_folder import open_model

EXPECTED_FILES = {
    "README.md",
    "config.json",
    "model.safetensors",
    *(f"{module}.py" for module in ELMO_MODULES),
    "tokenizer_config.json",
}
# What a Trainer output folder holds besides the model: never uploaded.
TRAINER_FILES = [
    "training_args.bin",
    "trainer_state.json",
    "all_results.json",
    "eval_results.json",
    "train_results.json",
    "optimizer.pt",
    "scheduler.pt",
    "rng_state.pth",
]


def run_snippet(card, repo_id, folder, cwd, extra):
    """Run the card's usage snippet on `folder` in a fresh isolated process (no repository modules), offline."""
    snippet = re.search(r"```python\n(.*?)```", card.text, re.S).group(1).replace(repo_id, str(folder)) + extra
    cwd.mkdir()
    result = subprocess.run(
        [sys.executable, "-I", "-c", snippet], env=USER_ENV, cwd=cwd, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_dry_run_folder_loads_in_a_fresh_process(tmp_path, tiny_model_dir, capsys):
    stage = tmp_path / "stage"
    assert (
        push_to_hub.main(
            [
                str(tiny_model_dir),
                "me/elmo-tiny",
                "--dry-run",
                "--staging-dir",
                str(stage),
                "--datasets",
                "lm1b",
                "--source",
                "allennlp-tiny options.json + weights.hdf5",
            ]
        )
        == 0
    )
    assert "dry run: would upload" in capsys.readouterr().out
    assert EXPECTED_FILES <= set(os.listdir(stage))

    card = ModelCard.load(stage / "README.md")
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "feature-extraction"
    assert set(card.data.tags) == {"elmo", "custom_code"}
    assert (card.data.license, card.data.language, card.data.datasets) == ("apache-2.0", ["en"], ["lm1b"])
    assert "Peters" in card.text and "allennlp-tiny options.json" in card.text

    # The card's own usage snippet. "ELMo" is the fixture's sentence 1: its sentence vector is its single word's ELMo
    # vector from AllenNLP.
    got = run_snippet(
        card,
        "me/elmo-tiny",
        stage,
        tmp_path / "elsewhere",
        "\nimport json; print(json.dumps(sentence_vectors[1].tolist()))\n",
    )
    _, expected, _ = load_fixture("allennlp-tiny")
    assert_close_to_reference(np.array(got), expected["elmo_representation"][1, 0], what="the card's snippet")


@pytest.mark.slow
@pytest.mark.parametrize("head", ["token", "sequence"])
def test_card_of_a_fine_tuned_head(tmp_path, tiny_heads_dir, head, capsys, caplog):
    """A Trainer output folder: the card says the head's task, Auto class and labels, lists its evaluation results as
    model-index metadata and names the base model; Trainer's files stay home; the snippet gives the head's labels."""
    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_heads_dir / head, model_dir)
    for name in TRAINER_FILES:
        (model_dir / name).write_text("{}")
    (model_dir / "eval_results.json").write_text(
        json.dumps({"epoch": 3.0, "eval_accuracy": 0.875, "eval_f1": 0.5, "eval_loss": 0.4, "eval_runtime": 1.5})
    )
    (model_dir / "test_results.json").write_text(json.dumps({"test_accuracy": 0.8125, "test_samples_per_second": 9}))
    (model_dir / "checkpoint-10").mkdir()
    stage = tmp_path / "stage"
    assert (
        push_to_hub.main(
            [
                str(model_dir),
                "me/elmo-head",
                "--dry-run",
                "--staging-dir",
                str(stage),
                "--datasets",
                "conll2003",
                "--base-model",
                "me/elmo-tiny",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err + caplog.text  # hub.push logs what it leaves out (stderr without logging setup)
    # What save_pretrained wrote, and the card.
    assert set(os.listdir(stage)) == set(os.listdir(tiny_heads_dir / head)) | {"README.md"}
    assert EXPECTED_FILES <= set(os.listdir(stage))
    for name in TRAINER_FILES + ["test_results.json", "checkpoint-10/"]:
        assert name in err, f"{name} must be reported as left out"

    task, auto_class, labels = {
        "token": ("token-classification", "AutoModelForTokenClassification", TOKEN_LABELS),
        "sequence": ("text-classification", "AutoModelForSequenceClassification", ["negative", "positive"]),
    }[head]
    assert f"{task} pipeline" in err  # the fresh-process load check ran the head's pipeline
    card = ModelCard.load(stage / "README.md")
    assert card.data.pipeline_tag == task and card.data.base_model == "me/elmo-tiny"
    results = {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert results == {("validation", "accuracy"): 0.875, ("validation", "f1"): 0.5, ("test", "accuracy"): 0.8125}
    assert {r.dataset_type for r in card.data.eval_results} == {"conll2003"}
    assert {r.task_type for r in card.data.eval_results} == {task}
    assert all(f"`{label}`" in card.text for label in labels)
    assert f"{auto_class}.from_pretrained" in card.text and "AutoModel.from_pretrained" not in card.text

    got = run_snippet(
        card, "me/elmo-head", stage, tmp_path / "elsewhere", "\nimport json; print(json.dumps(predicted))\n"
    )
    model_class = getattr(
        __import__("modeling_elmo"),
        {"token": "ElmoForTokenClassification", "sequence": "ElmoForSequenceClassification"}[head],
    )
    tokenizer = __import__("tokenization_elmo").ElmoTokenizer.from_pretrained(stage)
    model = model_class.from_pretrained(stage).eval()
    with torch.no_grad():
        ids = [
            model(**tokenizer([text], return_tensors="pt")).logits[0].argmax(-1).tolist()
            for text in ("The cat sat on the mat .", "ELMo")
        ]  # one at a time: no padding to leave out
    want = [[labels[i] for i in row] for row in ids] if head == "token" else [labels[i] for i in ids]
    assert got == want


def test_the_docs_name_the_upload_allow_list_the_code_uses():
    """docs/hub-and-pipelines.md lists what push uploads; it must be MODEL_FILES, not a list kept by hand apart."""
    text = (REPO / "docs" / "hub-and-pipelines.md").read_text(encoding="utf-8")
    section = text[text.index("**What goes up**") : text.index("Everything else in the folder")]
    named = {name for name in re.findall(r"`([^`/ ]+\.(?:json|txt|dic|py|md|safetensors|onnx|data))`", section)}
    assert named == {name for name in MODEL_FILES if "*" not in name} | {"model.safetensors"}


def test_symlinked_modules_are_uploaded_as_files(tmp_path):
    """The shipped model folder links its modules to the repository root: the upload holds the files themselves."""
    stage = tmp_path / "stage"
    files = hub.build_upload_folder(open_model(SHIPPED), stage, "me/elmo-en-small")
    for name in (f"{module}.py" for module in ELMO_MODULES):
        assert name in files and not (stage / name).is_symlink()
        assert (stage / name).read_bytes() == (REPO / name).read_bytes()
    assert "eval" not in files


@pytest.mark.slow
def test_broken_folder_is_refused_before_upload(tmp_path, tiny_model_dir, monkeypatch):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "modeling_elmo.py").unlink()
    monkeypatch.setattr(HfApi, "upload_folder", lambda *a, **k: pytest.fail("must not upload"))
    with pytest.raises(UserError, match="fails the check in a fresh process: loading the model"):
        push_to_hub.main([str(broken), "me/x", "--dry-run", "--staging-dir", str(tmp_path / "stage")])


def test_a_folder_without_tokenizer_files_is_named_as_such(tmp_path, tiny_model_dir, capsys):
    """A folder the model's save_pretrained wrote alone is refused before the fresh-process check, saying what is
    missing (not with transformers' "You need to have sentencepiece or tiktoken installed")."""
    from modeling_elmo import ElmoModel

    from elmo_transformers.cli import main

    ElmoModel.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "model-only")
    assert main(["push", str(tmp_path / "model-only"), "me/x", "--dry-run"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'model-only'} holds no tokenizer files (tokenizer_config.json), which a user's "
        "AutoTokenizer needs: save the tokenizer into it too (tokenizer.save_pretrained(DIR))"
    )


def test_upload_calls(tmp_path, tiny_model_dir, monkeypatch, fake_hub):
    calls = fake_hub
    monkeypatch.setattr(hub, "get_token", lambda: "hf_test")
    checked = []
    monkeypatch.setattr(hub, "check_loads", lambda staging, folder: checked.append(staging) or "loads")  # run above

    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_model_dir, model_dir)
    (model_dir / "runs").mkdir()  # what a Trainer output folder also holds: not part of the model
    (model_dir / "runs" / "events").write_text("log")
    (model_dir / ".lock").write_text("")
    for name in TRAINER_FILES:
        (model_dir / name).write_text("{}")
    assert push_to_hub.main([str(model_dir), "me/elmo-tiny", "--private", "--license", "mit"]) == 0
    assert calls["create_repo"] == ("me/elmo-tiny", {"repo_type": "model", "private": True, "exist_ok": True})
    upload = calls["upload_folder"]
    assert upload["repo_id"] == "me/elmo-tiny" and checked == [upload["folder_path"]]
    assert set(calls["files"]) == EXPECTED_FILES | set(os.listdir(tiny_model_dir))
    assert ModelCard(calls["readme"]).data.license == "mit"
    assert not os.path.exists(upload["folder_path"]), "the temporary upload folder must be removed"


def test_an_unreachable_hub_is_one_line_and_the_upload_folder_is_removed(tiny_model_dir, monkeypatch, capsys):
    """The Hub at a loopback port nobody listens on: huggingface_hub's own connection error, as one line."""
    from huggingface_hub import constants

    from elmo_transformers.cli import main as cli_main

    with socket.socket() as closed:  # a port that was free a moment ago: connections to it are refused
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "get_token", lambda: "hf_test")
    monkeypatch.setattr(hub, "check_loads", lambda staging, folder: "loads")  # tested above
    staged, mkdtemp = [], tempfile.mkdtemp
    monkeypatch.setattr(hub.tempfile, "mkdtemp", lambda **kwargs: staged.append(mkdtemp(**kwargs)) or staged[-1])
    assert cli_main(["push", str(tiny_model_dir), "me/elmo-tiny"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after check_loads' "loads"
    assert err == (
        f"error: cannot upload to me/elmo-tiny on {endpoint}: ConnectError: [Errno 111] Connection "
        "refused; check the network and the token (`hf auth login`), then push again"
    ), err
    assert staged and not os.path.exists(staged[0])


def test_no_token_is_a_clear_error(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(hub, "get_token", lambda: None)
    with pytest.raises(UserError, match="HF_TOKEN"):
        push_to_hub.main([str(tiny_model_dir), "me/elmo-tiny"])


def test_a_link_to_a_file_outside_the_folder_is_refused_by_name(tmp_path, tiny_model_dir, caplog):
    """A folder someone handed you: its `model.safetensors` links to the user's Hub token. Nothing is staged; the
    error names the link. A link to a file inside the folder is copied; a non-model file is left out and listed."""
    secret = tmp_path / "token"
    secret.write_text("hf_secret")
    model_dir = tmp_path / "handed"
    shutil.copytree(tiny_model_dir, model_dir)
    (model_dir / "model.safetensors").rename(tmp_path / "weights.safetensors")
    os.symlink(secret, model_dir / "model.safetensors")
    stage = tmp_path / "stage"
    with pytest.raises(UserError, match=r"model\.safetensors is a symbolic link to .*token, outside"):
        push_to_hub.main([str(model_dir), "me/x", "--dry-run", "--staging-dir", str(stage)])
    assert not stage.exists() or not any("hf_secret" in p.read_text(errors="ignore") for p in stage.iterdir())
    (model_dir / "model.safetensors").unlink()
    (tmp_path / "weights.safetensors").rename(model_dir / "model.safetensors")

    for name in ("added_tokens.json", "special_tokens_map.json"):  # the same through the other allowed names
        (model_dir / name).unlink(missing_ok=True)
        os.symlink(secret, model_dir / name)
        with pytest.raises(UserError, match=f"{name} is a symbolic link"):
            refuse_links_out(model_dir)  # (opening the folder reads its JSON files: the link is no JSON)
        (model_dir / name).unlink()

    os.symlink("model.safetensors", model_dir / "char.dic")  # stays inside the folder: uploaded as a file
    os.symlink(secret, model_dir / "notes.txt")  # not a model file: left out, never read
    caplog.clear()
    files = hub.build_upload_folder(open_model(model_dir), stage, "me/x")
    assert "char.dic" in files and not (stage / "char.dic").is_symlink()
    assert "notes.txt" not in files and "notes.txt" in caplog.text


def test_only_valid_files_the_model_loads_are_uploaded(tmp_path, tiny_model_dir, caplog):
    """A hidden `.env.safetensors` and a `big.safetensors` the model does not load are left out and listed; a
    model.safetensors that is not safetensors is refused by name."""
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    (model_dir / ".env.safetensors").write_text("HF_TOKEN=hf_secret")
    (model_dir / "big.safetensors").write_bytes(b"\0" * 4096)
    files = hub.build_upload_folder(open_model(model_dir), tmp_path / "stage", "me/x")
    err = caplog.text
    assert ".env.safetensors" not in files and "big.safetensors" not in files and "model.safetensors" in files
    assert ".env.safetensors" in err and "big.safetensors" in err
    (model_dir / "model.safetensors").write_bytes(b"\0" * 4096)
    with pytest.raises(UserError, match=r"model\.safetensors is not a safetensors file"):
        hub.build_upload_folder(open_model(model_dir), tmp_path / "stage2", "me/x")


@pytest.mark.slow
def test_repo_ids_and_card_texts_are_checked_before_any_work(tmp_path, tiny_model_dir, capsys):
    """A repo id that is not one fails at once, also in a dry run (not later, in the real push, with a traceback);
    --source and --check show in the card as the user wrote them, adding no Markdown or HTML; a failed push removes
    the temporary folder it made."""
    from elmo_transformers.cli import main as cli_main

    for argv in (["../../etc/passwd"], ["me/x", "--base-model", "<b>x</b>"], ["me/x", "--datasets", "a b"]):
        assert cli_main(["push", str(tiny_model_dir), *argv, "--dry-run"]) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "is not a Hub repo id" in err and len(err.splitlines()) == 1, err
    card = hub.model_card(open_model(tiny_model_dir), "me/x", source="x\n\n# Heading <script>", check="<b>1e-6</b>")
    assert "\n# Heading" not in str(card) and "`x\\n\\n# Heading <script>`" in str(card)
    assert "Checked: `<b>1e-6</b>`" in str(card)
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "modeling_elmo.py").unlink()
    before = set(os.listdir(tempfile.gettempdir()))
    assert cli_main(["push", str(broken), "me/x", "--dry-run"]) == 1
    assert not [n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("elmo-upload-")]


def test_labels_cannot_add_markdown_to_the_card(tmp_path, tiny_model_dir):
    """Label names come from the folder's config.json: each shows as one code span, whatever it holds."""
    from modeling_elmo import ElmoForTokenClassification

    labels = ["O", "x\n\n# Injected heading", "[click](https://evil.example)", "a`b", "<img src=x>"]
    model = ElmoForTokenClassification.from_pretrained(
        tiny_model_dir, id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)}
    )
    model.save_pretrained(tmp_path / "head")
    shutil.copy(os.path.join(tiny_model_dir, "tokenizer_config.json"), tmp_path / "head")
    files = hub.build_upload_folder(open_model(tmp_path / "head"), tmp_path / "stage", "me/x")
    card = (tmp_path / "stage" / "README.md").read_text()
    line = next(card_line for card_line in card.splitlines() if card_line.startswith("5 labels:"))
    assert line == r"5 labels: `O`, `x\n\n# Injected heading`, `[click](https://evil.example)`, ``a`b``, `<img src=x>`."
    assert "\n# Injected" not in card and "README.md" in files


@pytest.mark.slow
def test_a_failing_check_names_its_step(tmp_path, lm_dir):
    """A pipeline that fails is reported as the pipeline step, not as a folder that does not load."""
    broken = tmp_path / "broken"
    shutil.copytree(lm_dir, broken)
    words = (broken / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (broken / "vocab.txt").write_text("\n".join(words + ["extra"]) + "\n", encoding="utf-8")  # not the softmax's size
    with pytest.raises(UserError, match=r"fails the check in a fresh process: (loading|running) the fill-mask pipel"):
        push_to_hub.main([str(broken), "me/x", "--dry-run", "--staging-dir", str(tmp_path / "stage")])


@pytest.mark.slow
def test_push_of_language_models(tmp_path, lm_dir, capsys):
    """A converted language model (a generated card) and the shipped default model (its own card): the dry run's
    fresh-process check loads AutoModelForPreTraining and runs fill-mask on a text with `<mask>` (it failed on every
    LM folder with KeyError 'fill-mask' in the card, or fill-mask on a text without `<mask>`)."""
    for name, folder in (("converted", lm_dir), ("shipped", SHIPPED)):
        stage = tmp_path / name
        assert push_to_hub.main([str(folder), f"me/elmo-{name}", "--dry-run", "--staging-dir", str(stage)]) == 0
        err = capsys.readouterr().err
        assert "ElmoForLanguageModeling (AutoModelForPreTraining)" in err and "fill-mask pipeline" in err, err
    assert ModelCard.load(tmp_path / "converted" / "README.md").data.pipeline_tag == "fill-mask"  # the shipped: its own
    # The generated card's snippet: the LM's next-word scores, [1 sentence, 7 words + 1, the vocabulary].
    got = run_snippet(
        ModelCard.load(tmp_path / "converted" / "README.md"),
        "me/elmo-converted",
        tmp_path / "converted",
        tmp_path / "elsewhere",
        "\nimport json; print(json.dumps(list(out.forward_logits.shape)))\n",
    )
    assert got == [1, 8, json.loads((lm_dir / "config.json").read_text())["lm_vocab_size"]]


@pytest.mark.slow
def test_what_push_cannot_check_is_refused_or_left_out(tmp_path, tiny_model_dir, capsys, caplog):
    """A cut eval_results.json is one line naming it; an exported ONNX folder is refused (push checks PyTorch
    models); a model.onnx beside PyTorch weights is left out, not uploaded unchecked."""
    from elmo_transformers.cli import main

    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_model_dir, model_dir)
    (model_dir / "eval_results.json").write_text('{"eval_loss": 0.5, "eval_f1"')
    assert main(["push", str(model_dir), "me/x", "--dry-run", "--staging-dir", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "eval_results.json is not valid JSON" in err, err
    (model_dir / "eval_results.json").unlink()
    (model_dir / "model.onnx").write_bytes(b"not checked")
    assert main(["push", str(model_dir), "me/x", "--dry-run", "--staging-dir", str(tmp_path / "b")]) == 0
    assert not (tmp_path / "b" / "model.onnx").exists() and "model.onnx" in caplog.text
    capsys.readouterr()
    exported = tmp_path / "exported"
    exported.mkdir()
    for name in ("config.json", "tokenizer_config.json", "model.onnx"):
        shutil.copyfile(model_dir / name, exported / name)
    assert main(["push", str(exported), "me/x", "--dry-run", "--staging-dir", str(tmp_path / "c")]) == 1
    assert capsys.readouterr().err == (
        f"error: {exported} is an exported ONNX folder (model.onnx, no PyTorch "
        "weights): push uploads and checks PyTorch models; push the folder it was "
        "exported from\n"
    )


@pytest.mark.slow
def test_the_shipped_model_has_a_name_push_accepts(tmp_path, capsys):
    from elmo_transformers.cli import main

    assert main(["push", "nosuch-folder", "me/x", "--dry-run"]) == 1
    assert capsys.readouterr().err == (
        "error: DIR nosuch-folder is not a folder: give a saved ELMo folder, or `default` for the shipped model\n"
    )
    assert main(["push", "default", "me/x", "--dry-run", "--staging-dir", str(tmp_path / "stage")]) == 0
    assert (tmp_path / "stage" / "README.md").read_text() == (SHIPPED / "README.md").read_text()


def test_push_is_a_library_function(tmp_path, tiny_model_dir, monkeypatch, fake_hub):
    """`elmo_transformers.push`, what the command calls: a Python caller gets what it did (a `Pushed`), the temporary
    folder removed after an upload; without a token the error names the Python argument, not the command's flag."""
    import elmo_transformers

    assert elmo_transformers.push is hub.push
    monkeypatch.setattr(hub, "get_token", lambda: None)
    with pytest.raises(UserError, match=r"^no Hugging Face token: set HF_TOKEN .* \(or pass dry_run=True\)$"):
        elmo_transformers.push(tiny_model_dir, "me/elmo-tiny")
    monkeypatch.setattr(hub, "get_token", lambda: "hf_test")
    monkeypatch.setattr(hub, "check_loads", lambda staging, folder: f"loads {folder.name}")  # run above
    pushed = elmo_transformers.push(str(tiny_model_dir), "me/elmo-tiny", datasets=["conll2003"])
    assert pushed.url == "https://huggingface.co/me/elmo-tiny" and pushed.check == f"loads {tiny_model_dir}"
    assert pushed.files == fake_hub["files"] and not os.path.exists(pushed.upload_folder)
    assert ModelCard(fake_hub["readme"]).data.datasets == ["conll2003"]
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match=r"^staging_dir .* is not empty$"):
        elmo_transformers.push(tiny_model_dir, "me/elmo-tiny", staging_dir=tmp_path)
