"""A model pulled from the Hub, as users get it: the files `push` uploads, laid out as huggingface_hub's cache holds a
download (`models--ORG--NAME/snapshots/REV/`, `refs/main`), loaded offline by repo id, with `trust_remote_code=True`
where this package is not installed, and natively after `elmo_transformers.register()`."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import FIXTURES
from tolerance import assert_close_to_reference

from configuration_elmo import ELMO_MODULES

REPO_ID = "someone/elmo-lm-tiny"
REVISION = "0123456789abcdef0123456789abcdef01234567"

CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    native = sys.argv[3] == "native"
    if native:
        import elmo_transformers
        elmo_transformers.register()  # the installed package's classes, no remote code
    else:
        for name in (*ELMO_MODULES, "elmo_transformers"):
            sys.modules[name] = None  # an installed copy of this repo must not be what gets used
    from transformers import AutoModel, AutoModelForPreTraining, AutoTokenizer, pipeline

    repo, sentences_path = sys.argv[1:3]
    kwargs = {} if native else {"trust_remote_code": True}
    tokenizer = AutoTokenizer.from_pretrained(repo, **kwargs)
    lm = AutoModelForPreTraining.from_pretrained(repo, **kwargs).eval()
    bilm = AutoModel.from_pretrained(repo, **kwargs).eval()
    where = "elmo_transformers" if native else "transformers_modules."
    for obj in (tokenizer, lm, bilm):
        assert (type(obj).__module__ in ELMO_MODULES) if native else type(obj).__module__.startswith(where), obj
    sentences = json.load(open(sentences_path, encoding="utf-8"))
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = lm(**batch)
        vectors = bilm(**batch).last_hidden_state
    if native:
        from elmo_transformers import ElmoFeatureExtractionPipeline, ElmoFillMaskPipeline
        extract = pipeline("feature-extraction", model=repo, pipeline_class=ElmoFeatureExtractionPipeline)
        fill = pipeline("fill-mask", model=repo, pipeline_class=ElmoFillMaskPipeline)
    else:
        extract = pipeline("feature-extraction", model=repo, trust_remote_code=True)
        fill = pipeline("fill-mask", model=repo, trust_remote_code=True)
    features = np.array(extract(" ".join(sentences[0])))[0]
    filled = fill("the <mask> was good", top_k=3)
    np.savez(sys.argv[4], forward=torch.log_softmax(out.forward_logits, -1).numpy(),
             backward=torch.log_softmax(out.backward_logits, -1).numpy(), vectors=vectors.numpy(),
             features=features, filled=json.dumps(filled))
    """
).replace("ELMO_MODULES", repr(ELMO_MODULES))


@pytest.fixture(scope="module")
def hub_cache(lm_dir, tmp_path_factory):
    """What `push` would upload of the converted LM fixture, placed in a fresh hub cache as a download of REPO_ID."""
    from elmo_transformers.hub.push import build_upload_folder
    from elmo_transformers.model_folder import open_model

    root = tmp_path_factory.mktemp("hub-cache")
    snapshot = root / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / REVISION
    build_upload_folder(open_model(lm_dir), snapshot, REPO_ID)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text(REVISION)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("how", ["remote_code", "native"])
def test_a_hub_id_loads_offline_from_the_cache(hub_cache, tmp_path, how):
    sentences = json.loads((FIXTURES / "allennlp-lm-tiny" / "sentences.json").read_text(encoding="utf-8"))
    expected = dict(np.load(FIXTURES / "allennlp-lm-tiny" / "expected.npz"))
    (tmp_path / "sentences.json").write_text(json.dumps(sentences), encoding="utf-8")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(hub_cache),
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
    }
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-I", "-c", CHILD, REPO_ID, str(tmp_path / "sentences.json"), how, str(tmp_path / "out.npz")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    for i, n in enumerate(expected["n_tokens"]):  # AllenNLP's log-probabilities, both directions
        for direction in ("forward", "backward"):
            assert_close_to_reference(
                got[direction][i, : n + 1],
                expected[f"{direction}_log_probs"][i, : n + 1],
                what=f"{how} {direction} {i}",
            )
    n = expected["n_tokens"][0]
    assert_close_to_reference(got["features"], got["vectors"][0, :n], what="feature-extraction pipeline")
    filled = json.loads(str(got["filled"]))
    assert len(filled) == 3 and all(r["sequence"].startswith("the ") for r in filled)
    shutil.rmtree(tmp_path / "modules", ignore_errors=True)
