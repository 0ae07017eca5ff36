"""`elmo-transformers push` (elmo_transformers.hub.push and .model_card): the folder that would be uploaded holds only
what a model repo needs and loads in a fresh process; its card follows the architecture (task, Auto class, labels,
evaluation results) and its usage snippet runs and gives AllenNLP's numbers or the head's predictions; the upload
calls get the right repo, folder and files."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch
from conftest import LM_FIXTURE, REPO, SHIPPED, TOKEN_LABELS, load_fixture
from huggingface_hub import HfApi, ModelCard
from tolerance import assert_close_to_reference

from configuration_elmo import ELMO_MODULES
from elmo_transformers.hub import push as hub
from elmo_transformers.cli import push as push_to_hub
from elmo_transformers.errors import UserError

EXPECTED_FILES = {
    "README.md",
    "config.json",
    "model.safetensors",
    *(f"{module}.py" for module in ELMO_MODULES),
    "tokenizer_config.json",
}
# What a Trainer output folder holds besides the model: never uploaded.
TRAINER_FILES = ["training_args.bin", "trainer_state.json", "all_results.json", "eval_results.json",
                 "train_results.json", "optimizer.pt", "scheduler.pt", "rng_state.pth"]


def run_snippet(card, repo_id, folder, cwd, extra):
    """Run the card's usage snippet on `folder` in an isolated process (no repository modules), offline."""
    snippet = re.search(r"```python\n(.*?)```", card.text, re.S).group(1).replace(repo_id, str(folder)) + extra
    cwd.mkdir()
    result = subprocess.run([sys.executable, "-I", "-c", snippet], cwd=cwd, capture_output=True, text=True,
                            env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_dry_run_folder_loads_in_a_fresh_process(tmp_path, tiny_model_dir, capsys):
    stage = tmp_path / "stage"
    assert push_to_hub.main([str(tiny_model_dir), "me/elmo-tiny", "--dry-run", "--staging-dir", str(stage),
                             "--datasets", "lm1b", "--source", "allennlp-tiny options.json + weights.hdf5"]) == 0
    assert "dry run: would upload" in capsys.readouterr().out
    assert EXPECTED_FILES <= set(os.listdir(stage))

    card = ModelCard.load(stage / "README.md")
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "feature-extraction"
    assert set(card.data.tags) == {"elmo", "custom_code"}
    assert (card.data.license, card.data.language, card.data.datasets) == ("apache-2.0", ["en"], ["lm1b"])
    assert "Peters" in card.text and "allennlp-tiny options.json" in card.text

    # The card's own usage snippet. "ELMo" is the fixture's sentence 1: its sentence vector is its single word's ELMo
    # vector from AllenNLP.
    got = run_snippet(card, "me/elmo-tiny", stage, tmp_path / "elsewhere",
                      "\nimport json; print(json.dumps(sentence_vectors[1].tolist()))\n")
    _, expected, _ = load_fixture("allennlp-tiny")
    assert_close_to_reference(np.array(got), expected["elmo_representation"][1, 0], what="the card's snippet")


@pytest.mark.slow
@pytest.mark.parametrize("head", ["token", "sequence"])
def test_card_of_a_fine_tuned_head(tmp_path, tiny_heads_dir, head, capsys):
    """A Trainer output folder: the card says the head's task, Auto class and labels, lists its evaluation results as
    model-index metadata and names the base model; Trainer's files stay home; the snippet gives the head's labels."""
    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_heads_dir / head, model_dir)
    for name in TRAINER_FILES:
        (model_dir / name).write_text("{}")
    (model_dir / "eval_results.json").write_text(json.dumps(
        {"epoch": 3.0, "eval_accuracy": 0.875, "eval_f1": 0.5, "eval_loss": 0.4, "eval_runtime": 1.5}))
    (model_dir / "test_results.json").write_text(json.dumps({"test_accuracy": 0.8125, "test_samples_per_second": 9}))
    (model_dir / "checkpoint-10").mkdir()
    stage = tmp_path / "stage"
    assert push_to_hub.main([str(model_dir), "me/elmo-head", "--dry-run", "--staging-dir", str(stage),
                             "--datasets", "conll2003", "--base-model", "me/elmo-tiny"]) == 0
    err = capsys.readouterr().err
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

    got = run_snippet(card, "me/elmo-head", stage, tmp_path / "elsewhere",
                      "\nimport json; print(json.dumps(predicted))\n")
    model_class = getattr(__import__("modeling_elmo"), {"token": "ElmoForTokenClassification",
                                                        "sequence": "ElmoForSequenceClassification"}[head])
    tokenizer = __import__("tokenization_elmo").ElmoTokenizer.from_pretrained(stage)
    model = model_class.from_pretrained(stage).eval()
    with torch.no_grad():
        ids = [model(**tokenizer([text], return_tensors="pt")).logits[0].argmax(-1).tolist()
               for text in ("The cat sat on the mat .", "ELMo")]  # one at a time: no padding to leave out
    want = [[labels[i] for i in row] for row in ids] if head == "token" else [labels[i] for i in ids]
    assert got == want


def test_symlinked_modules_are_uploaded_as_files(tmp_path):
    """The shipped model folder links its modules to the repository root: the upload holds the files themselves."""
    stage = tmp_path / "stage"
    files = hub.build_upload_folder(SHIPPED, stage, "me/elmo-pd-small")
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
    with pytest.raises(UserError, match="fails the check in a fresh Python process.*loading the model"):
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
    monkeypatch.setattr(hub, "check_loads", lambda folder: checked.append(folder) or "loads")  # run above

    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_model_dir, model_dir)
    (model_dir / "runs").mkdir()  # what a Trainer output folder also holds: not part of the model
    (model_dir / "runs" / "events").write_text("log")
    (model_dir / ".lock").write_text("")
    for name in TRAINER_FILES:
        (model_dir / name).write_text("{}")
    assert push_to_hub.main([str(model_dir), "me/elmo-tiny", "--private", "--license", "mit"]) == 0
    assert calls["create_repo"] == ("me/elmo-tiny", {"private": True, "exist_ok": True})
    upload = calls["upload_folder"]
    assert upload["repo_id"] == "me/elmo-tiny" and checked == [upload["folder_path"]]
    assert set(calls["files"]) == EXPECTED_FILES | set(os.listdir(tiny_model_dir))
    assert calls["card"].data.license == "mit"
    assert not os.path.exists(upload["folder_path"]), "the temporary upload folder must be removed"


def test_no_token_is_a_clear_error(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(push_to_hub, "get_token", lambda: None)
    with pytest.raises(UserError, match="HF_TOKEN"):
        push_to_hub.main([str(tiny_model_dir), "me/elmo-tiny"])


def test_a_link_to_a_file_outside_the_folder_is_refused_by_name(tmp_path, tiny_model_dir, capsys):
    """A folder someone handed you: `extra.safetensors` links to the user's Hub token. Nothing is staged; the error
    names the link. A link to a file inside the folder is copied; a non-model file is left out and listed."""
    secret = tmp_path / "token"
    secret.write_text("hf_secret")
    model_dir = tmp_path / "handed"
    shutil.copytree(tiny_model_dir, model_dir)
    os.symlink(secret, model_dir / "extra.safetensors")
    stage = tmp_path / "stage"
    with pytest.raises(UserError, match=r"extra\.safetensors is a symbolic link to .*token, outside"):
        push_to_hub.main([str(model_dir), "me/x", "--dry-run", "--staging-dir", str(stage)])
    assert not stage.exists() or not any("hf_secret" in p.read_text(errors="ignore") for p in stage.iterdir())

    for name in ("added_tokens.json", "special_tokens_map.json"):  # the same through the other allowed names
        (model_dir / "extra.safetensors").unlink(missing_ok=True)
        (model_dir / name).unlink(missing_ok=True)
        os.symlink(secret, model_dir / name)
        with pytest.raises(UserError, match=f"{name} is a symbolic link"):
            hub.build_upload_folder(model_dir, tmp_path / f"stage-{name}", "me/x")
        (model_dir / name).unlink()

    os.replace(model_dir / "model.safetensors", model_dir / "weights.bin")
    os.symlink("weights.bin", model_dir / "model.safetensors")  # stays inside the folder: uploaded as a file
    os.symlink(secret, model_dir / "notes.txt")  # not a model file: left out, never read
    capsys.readouterr()
    files = hub.build_upload_folder(model_dir, stage, "me/x")
    assert "model.safetensors" in files and not (stage / "model.safetensors").is_symlink()
    assert "notes.txt" not in files and "notes.txt" in capsys.readouterr().err


def test_labels_cannot_add_markdown_to_the_card(tmp_path, tiny_model_dir):
    """Label names come from the folder's config.json: each shows as one code span, whatever it holds."""
    from modeling_elmo import ElmoForTokenClassification

    labels = ["O", "x\n\n# Injected heading", "[click](https://evil.example)", "a`b", "<img src=x>"]
    model = ElmoForTokenClassification.from_pretrained(tiny_model_dir, id2label=dict(enumerate(labels)),
                                                       label2id={label: i for i, label in enumerate(labels)})
    model.save_pretrained(tmp_path / "head")
    shutil.copy(os.path.join(tiny_model_dir, "tokenizer_config.json"), tmp_path / "head")
    files = hub.build_upload_folder(tmp_path / "head", tmp_path / "stage", "me/x")
    card = (tmp_path / "stage" / "README.md").read_text()
    line = next(card_line for card_line in card.splitlines() if card_line.startswith("5 labels:"))
    assert line == r"5 labels: `O`, `x\n\n# Injected heading`, `[click](https://evil.example)`, ``a`b``, `<img src=x>`."
    assert "\n# Injected" not in card and "README.md" in files


@pytest.mark.slow
@pytest.mark.fidelity
def test_dry_run_of_a_language_model(tmp_path, lm_dir, capsys):
    """A converted LM (ElmoForLanguageModeling): the card says fill-mask, the fresh-process check runs fill-mask on a
    text with a `<mask>` word, and the card's snippet plus the fill-mask pipeline it names give AllenNLP's scores."""
    from test_fill_mask import reference_scores

    stage = tmp_path / "stage"
    assert push_to_hub.main([str(lm_dir), "me/elmo-lm", "--dry-run", "--staging-dir", str(stage)]) == 0
    assert "fill-mask pipeline: ElmoFillMaskPipeline" in capsys.readouterr().err
    assert {"vocab.txt", "README.md"} | EXPECTED_FILES <= set(os.listdir(stage))
    card = ModelCard.load(stage / "README.md")
    assert card.data.pipeline_tag == "fill-mask" and 'pipeline("fill-mask"' in card.text

    sentences = json.loads((LM_FIXTURE / "sentences.json").read_text(encoding="utf-8"))
    words = list(sentences[0])
    words[4] = "<mask>"
    got = run_snippet(card, "me/elmo-lm", stage, tmp_path / "elsewhere", (
        "\nfrom transformers import pipeline\nimport json\n"
        f"fill = pipeline('fill-mask', model={str(stage)!r}, trust_remote_code=True)\n"
        f"print(json.dumps([{{'token': r['token'], 'score': r['score']}} for r in fill({' '.join(words)!r}, "
        "top_k=3)] + [list(sentence_vectors.shape)]))\n"))
    assert got[-1] == [2, 2 * json.loads((lm_dir / "config.json").read_text())["projection_dim"]]
    scores = reference_scores(load_fixture("allennlp-lm-tiny")[1], 0, 4)
    assert [r["token"] for r in got[:-1]] == np.argsort(-scores)[:3].tolist()
    assert_close_to_reference(np.array([r["score"] for r in got[:-1]]), -np.sort(-scores)[:3],
                              what="fill-mask scores of the pushed LM")


@pytest.mark.slow
def test_dry_run_of_the_default_model(tmp_path, capsys):
    """The shipped default model (an LM with its own card) passes the check: its pipeline is fill-mask."""
    stage = tmp_path / "stage"
    assert push_to_hub.main([str(SHIPPED), "me/elmo-pd-small", "--dry-run", "--staging-dir", str(stage)]) == 0
    captured = capsys.readouterr()
    assert "ElmoForLanguageModeling (AutoModelForPreTraining)" in captured.err and "fill-mask" in captured.err
    assert (stage / "README.md").read_bytes() == (SHIPPED / "README.md").read_bytes()
    assert {"vocab.txt", "model.safetensors"} <= set(os.listdir(stage)) and "eval" not in os.listdir(stage)


@pytest.mark.slow
def test_a_failing_check_names_its_step(tmp_path, lm_dir):
    """A pipeline that fails is reported as the pipeline step, not as a folder that does not load."""
    broken = tmp_path / "broken"
    shutil.copytree(lm_dir, broken)
    words = (broken / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (broken / "vocab.txt").write_text("\n".join(words + ["extra"]) + "\n", encoding="utf-8")  # not the softmax's size
    with pytest.raises(UserError, match=r"fails the check .*loading the fill-mask pipeline failed: .*vocabulary"):
        push_to_hub.main([str(broken), "me/x", "--dry-run", "--staging-dir", str(tmp_path / "stage")])


def test_only_the_weights_the_model_loads_and_no_hidden_file(tmp_path, tiny_model_dir, capsys):
    """Of the *.safetensors only model.safetensors (what from_pretrained reads) goes, never a hidden file; what is
    left out is named in one line."""
    model_dir = tmp_path / "handed"
    shutil.copytree(tiny_model_dir, model_dir)
    (model_dir / ".env.safetensors").write_text("HF_TOKEN=hf_secret")
    (model_dir / ".tokenizer_config.json").write_text("{}")
    shutil.copy(model_dir / "model.safetensors", model_dir / "old.safetensors")
    files = hub.build_upload_folder(model_dir, tmp_path / "stage", "me/x")
    assert set(files) == set(os.listdir(tiny_model_dir)) | {"README.md"}
    line = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("not uploading"))
    assert all(name in line for name in (".env.safetensors", ".tokenizer_config.json", "old.safetensors"))


def test_a_weight_file_that_is_not_safetensors_is_refused(tmp_path, tiny_model_dir):
    """A model.safetensors whose header safetensors cannot read (a large file of something else) is refused by name
    before anything is staged."""
    model_dir = tmp_path / "handed"
    shutil.copytree(tiny_model_dir, model_dir)
    with open(model_dir / "model.safetensors", "wb") as f:
        f.write(b"PK\x03\x04 not a safetensors file")
        f.truncate(1 << 30)  # sparse: 1 GB that is never read whole
    stage = tmp_path / "stage"
    with pytest.raises(UserError, match=r"model\.safetensors is not a valid safetensors file"):
        push_to_hub.main([str(model_dir), "me/x", "--dry-run", "--staging-dir", str(stage)])
    assert not stage.exists() or not os.listdir(stage)


@pytest.mark.parametrize("option", [[], ["--base-model", "<b>me</b>"]])
def test_repo_ids_are_checked_under_dry_run(tmp_path, tiny_model_dir, option):
    repo_id = "../../etc/passwd" if not option else "me/x"
    stage = tmp_path / "stage"
    with pytest.raises(UserError, match="is not a Hub repo id"):
        push_to_hub.main([str(tiny_model_dir), repo_id, "--dry-run", "--staging-dir", str(stage), *option])
    assert not stage.exists()


def test_card_texts_from_the_command_line_add_no_markdown(tmp_path, tiny_model_dir):
    """--source and --check show as code spans, as labels do; --base-model is a checked repo id."""
    card = hub.model_card(tiny_model_dir, "me/x", base_model="me/base", source="x\n\n# Injected <img src=y>",
                          check="[click](https://evil.example)").text
    assert "Converted from: `x\\n\\n# Injected <img src=y>`." in card
    assert "`[click](https://evil.example)`" in card and "\n# Injected" not in card


def failing_push(tmp_path, tiny_model_dir, monkeypatch, args, **failures):
    """Run push with temporary folders made under tmp_path/tmp and the given steps failing; the folders left."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(push_to_hub, "get_token", lambda: "hf_test")
    for name, error in failures.items():
        monkeypatch.setattr(hub, name, lambda *a, error=error, **k: (_ for _ in ()).throw(error))
    with pytest.raises(type(next(iter(failures.values())))):
        push_to_hub.main([str(tiny_model_dir), "me/x", *args])
    return [name for name in os.listdir(tmp_path / "tmp") if name.startswith("elmo-upload-")]


@pytest.mark.parametrize("args", [[], ["--dry-run"]])
def test_a_failed_push_removes_its_temporary_folder(tmp_path, tiny_model_dir, monkeypatch, args):
    assert failing_push(tmp_path, tiny_model_dir, monkeypatch, args,
                        check_loads=UserError("fails the check")) == []


def test_a_failed_upload_removes_its_temporary_folder(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setattr(hub, "check_loads", lambda folder: "loads")
    assert failing_push(tmp_path, tiny_model_dir, monkeypatch, [], upload=OSError("connection reset")) == []


def test_a_failed_push_keeps_the_users_staging_dir(tmp_path, tiny_model_dir, monkeypatch):
    stage = tmp_path / "stage"
    monkeypatch.setattr(hub, "check_loads", lambda folder: (_ for _ in ()).throw(UserError("fails the check")))
    with pytest.raises(UserError):
        push_to_hub.main([str(tiny_model_dir), "me/x", "--dry-run", "--staging-dir", str(stage)])
    assert "config.json" in os.listdir(stage)
