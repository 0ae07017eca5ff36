"""A converted folder works where this repository cannot be imported: only the folder's own copies of the modules."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from configuration_elmo import ELMO_MODULES

from conftest import FIXTURES, REPO, SHIPPED, run_isolated
from tolerance import assert_close_to_reference

CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    for name in (*ELMO_MODULES, "elmo_transformers"):
        sys.modules[name] = None  # an installed copy of this repo must not be what gets used
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    folder, sentences_path, out_path = sys.argv[1:4]
    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    assert type(tokenizer).__module__.startswith("transformers_modules."), type(tokenizer).__module__
    sentences = json.load(open(sentences_path, encoding="utf-8"))
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    # int8 the transformers way, with the folder's own quantizer (a dict: the config class lives in the folder's code)
    int8 = AutoModel.from_pretrained(folder, trust_remote_code=True,
                                     quantization_config={"quant_method": "elmo_int8"})
    quantizer = type(int8.hf_quantizer).__module__
    assert int8.is_quantized and quantizer.startswith("transformers_modules."), quantizer
    with torch.no_grad():
        int8_layers = torch.stack(int8.eval()(**enc, output_hidden_states=True).hidden_states).numpy()
    np.savez(out_path, char_ids=enc["input_ids"].numpy(), layers=torch.stack(out.hidden_states).numpy(),
             elmo=out.last_hidden_state.numpy(), config_type=type(config).__name__, int8_layers=int8_layers,
             mask=enc["attention_mask"].numpy())
    """
).replace("ELMO_MODULES", repr(ELMO_MODULES))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["allennlp-tiny", "allennlp-tiny-edge"])
def test_auto_classes_in_isolated_process_reproduce_fixture(tiny_model_dir, tmp_path, name):
    result = run_isolated(
        CHILD, tiny_model_dir, FIXTURES / name / "sentences.json", tmp_path / "out.npz", folder=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    expected = np.load(FIXTURES / name / "expected.npz")
    assert str(got["config_type"]) == "ElmoConfig"
    np.testing.assert_array_equal(got["char_ids"], expected["char_ids"])
    assert_close_to_reference(got["layers"], expected["bilm_activations"], "biLM layers (remote code)")
    assert_close_to_reference(got["elmo"], expected["elmo_representation"], "ELMo vectors (remote code)")
    mask = got["mask"].astype(bool)
    int8, fp32 = got["int8_layers"][:, mask], got["layers"][:, mask]
    cosines = (int8 * fp32).sum(-1) / np.linalg.norm(int8, axis=-1) / np.linalg.norm(fp32, axis=-1)
    assert np.median(cosines) >= 0.999 and not np.array_equal(int8, fp32), np.median(cosines)


def test_the_repo_is_not_importable_from_an_isolated_process(tmp_path):
    """Guards the test above: in `python -I` from another folder, the repo checkout itself is not on sys.path."""
    result = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; print('\\n'.join(sys.path))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    entries = result.stdout.splitlines()
    assert result.returncode == 0 and entries, result.stderr
    assert str(REPO) not in entries and str(REPO / "research") not in entries and "" not in entries


INSTALLED_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    import configuration_elmo, modeling_elmo, tokenization_elmo
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    folder, sentences_path, out_path = sys.argv[1:4]
    print(modeling_elmo.__file__)
    model, tokenizer = ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder)
    enc = tokenizer(json.load(open(sentences_path, encoding="utf-8")), is_split_into_words=True, padding=True,
                    return_tensors="pt")
    with torch.no_grad():
        np.save(out_path, model(**enc).last_hidden_state.numpy())
    """
)


@pytest.mark.slow
def test_installed_modules_work_outside_the_checkout(tiny_model_dir, tmp_path):
    """`pip install .` puts the three modules on the path as top-level modules (the README installs it first)."""
    result = run_isolated(
        INSTALLED_CHILD,
        tiny_model_dir,
        FIXTURES / "allennlp-tiny" / "sentences.json",
        tmp_path / "out.npy",
        folder=tmp_path,
    )
    assert result.returncode == 0, "the project is not installed (pip install .): " + result.stderr[-2000:]
    assert os.path.dirname(result.stdout.splitlines()[0]) != str(REPO), "expected the installed copy, not the checkout"
    expected = np.load(FIXTURES / "allennlp-tiny" / "expected.npz")["elmo_representation"]
    assert_close_to_reference(np.load(tmp_path / "out.npy"), expected, "installed package")


NATIVE_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    import elmo_transformers
    elmo_transformers.register()  # model type "elmo" in the Auto classes, with the installed classes
    from transformers import (AutoConfig, AutoModel, AutoModelForPreTraining, AutoModelForSequenceClassification,
                              AutoModelForTokenClassification, AutoTokenizer)

    folder, lm_folder, sentences_path, out_path = sys.argv[1:5]
    loaded = [AutoConfig.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)]
    model = AutoModel.from_pretrained(folder).eval()
    loaded += [model, AutoModelForTokenClassification.from_pretrained(folder, num_labels=3),
               AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2),
               AutoModelForPreTraining.from_pretrained(lm_folder)]
    print(json.dumps({"package": elmo_transformers.__file__,
                      "classes": [[type(x).__module__, type(x).__name__] for x in loaded]}))
    enc = loaded[1](json.load(open(sentences_path, encoding="utf-8")), is_split_into_words=True, padding=True,
                    return_tensors="pt")
    with torch.no_grad():
        np.save(out_path, model(**enc).last_hidden_state.numpy())
    """
)


@pytest.mark.slow
def test_installed_package_registers_native_auto_classes(tiny_model_dir, tmp_path):
    """After `pip install .`, `elmo_transformers.register()` makes every Auto class load ELMo folders without
    trust_remote_code, with the installed classes (never the folder's copies of the code)."""
    result = run_isolated(
        NATIVE_CHILD,
        tiny_model_dir,
        SHIPPED,
        FIXTURES / "allennlp-tiny" / "sentences.json",
        tmp_path / "out.npy",
        folder=tmp_path,
        hf_home=tmp_path / "hf_home",
    )  # empty: checked below
    assert result.returncode == 0, "the project is not installed (pip install .): " + result.stderr[-2000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert os.path.dirname(got["package"]) != str(REPO / "elmo_transformers"), "expected the installed package"
    assert got["classes"] == [
        ["configuration_elmo", "ElmoConfig"],
        ["tokenization_elmo", "ElmoTokenizer"],
        ["modeling_elmo", "ElmoModel"],
        ["modeling_elmo", "ElmoForTokenClassification"],
        ["modeling_elmo", "ElmoForSequenceClassification"],
        ["modeling_elmo", "ElmoForLanguageModeling"],
    ]
    assert not (tmp_path / "hf_home" / "modules" / "transformers_modules").exists() or not any(
        (tmp_path / "hf_home" / "modules" / "transformers_modules").rglob("*.py")
    ), "no remote code may be copied or run"
    expected = np.load(FIXTURES / "allennlp-tiny" / "expected.npz")["elmo_representation"]
    assert_close_to_reference(np.load(tmp_path / "out.npy"), expected, what="ELMo vectors, native classes")
