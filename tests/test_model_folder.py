"""One model folder, read in one place (`model_folder.ModelFolder`): what it is (export or PyTorch, language model or
not), its title and its config are answered there; the card writers, push, the Space, the conversion output rules
and training take a ModelFolder and read no config.json themselves; the package's imports keep their layers."""

import builtins
import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

from elmo_transformers.errors import ModelError
from elmo_transformers.model_folder import ModelFolder, open_model


@pytest.fixture
def config_reads(monkeypatch):
    """The config.json files read as text (parsed) from now on; copying the file's bytes is not reading it."""
    real_open, opened = builtins.open, []

    def counting_open(file, mode="r", *args, **kwargs):
        named = isinstance(file, (str, os.PathLike)) and os.path.basename(os.fspath(file)) == "config.json"
        if named and "b" not in mode:
            opened.append(os.fspath(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    return opened


def test_what_a_folder_is_is_answered_by_the_model_folder(tiny_model_dir, lm_dir, tmp_path, monkeypatch):
    bilm, lm = open_model(tiny_model_dir), open_model(lm_dir)
    assert isinstance(bilm, ModelFolder) and not bilm.is_export and not bilm.is_language_model
    assert lm.is_language_model and lm.config["lm_vocab_size"] > 0
    assert bilm.title == os.path.basename(tiny_model_dir)
    assert open_model(bilm) is bilm
    assert open_model("default").title == "elmo-en-small"  # the shipped model's card title
    # What a record (an embedding run's run.json) calls it: a folder by its absolute path, a name as given.
    monkeypatch.chdir(os.path.dirname(tiny_model_dir))
    assert open_model(os.path.basename(tiny_model_dir)).source == os.path.abspath(tiny_model_dir)
    assert open_model("default").source == "default"
    with pytest.raises(ModelError, match="is not a folder"):
        open_model("someone/elmo", local=True)


def test_the_card_push_and_space_writers_read_no_config_json(tiny_model_dir, lm_dir, tmp_path, config_reads):
    """Given a ModelFolder, the writers ask it: config.json was read once, when the folder was opened."""
    from elmo_transformers.output_paths import is_earlier_conversion
    from elmo_transformers.hub import push, space
    from elmo_transformers.hub.model_card import model_card

    source = open_model(lm_dir)
    assert config_reads == [os.path.join(lm_dir, "config.json")]
    config_reads.clear()
    assert "pipeline_tag: fill-mask" in str(model_card(source, "me/elmo"))  # a language model's task
    push.build_upload_folder(source, tmp_path / "upload", "me/elmo")
    card = space.space_card(source, "me/space")
    assert "with its language-model softmax" in str(card)
    assert config_reads == []
    assert is_earlier_conversion(str(lm_dir))  # (it opens the folder: one reading)
    assert config_reads == [os.path.join(lm_dir, "config.json")]


def test_the_package_imports_keep_their_layers():
    """No import circle and no import from a lower layer to a higher one (pyproject.toml's two import-linter
    contracts: the layers, and no circle inside a package; imports inside functions count)."""
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "lint-imports"), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert done.returncode == 0 and "2 kept, 0 broken" in done.stdout, done.stdout[-3000:]


def test_an_exported_folder_is_opened_without_torch(tiny_model_dir, tmp_path):
    """Opening a folder (and fingerprinting it) imports neither torch nor transformers: an export runs without them."""
    folder = shutil.copytree(tiny_model_dir, tmp_path / "m", symlinks=True)
    code = (
        "import json, sys\nfrom elmo_transformers.model_folder import open_model\n"
        'source = open_model(sys.argv[1])\nsource.fingerprint("float32")\n'
        "print(json.dumps([source.title, 'torch' in sys.modules, 'transformers' in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout) == ["m", False, False], done.stderr[-2000:]


# The fields that decide the numbers (options_elmo.NUMBERS_FIELDS), each with a change from the tiny model's config
# (those of the vocabulary inputs from a config that has them: `vocabulary` below) ...
NUMBERS_CHANGES = {
    "char_embedding_dim": 5,
    "filters": [[1, 4], [2, 8], [3, 8]],
    "n_highway": 2,
    "activation": "tanh",
    "max_characters_per_token": 40,
    "lstm_dim": 12,
    "projection_dim": 6,
    "n_layers": 1,
    "cell_clip": 1.5,
    "proj_clip": None,
    "use_skip_connections": False,
    "num_output_representations": 2,
    "do_layer_norm": True,
    "scalar_mix_parameters": [0.0, 1.0, 0.0],
    "char_vocab_size": 301,
    "word_vocab_size": 11,
    "word_embedding_dim": 5,
    "sentence_boundary_ids": [[3] * 51, [4] * 51],
}
# ... and the fields that do not: those only training or the language model's softmax read, the performance settings
# (the same arithmetic, run another way: float rounding), n_characters (261 and 262 give the same model).
SAME_NUMBERS_CHANGES = {
    "dropout": 0.1,
    "freeze_bilm": False,
    "task_encoder": "lstm",
    "task_encoder_dim": 7,
    "mix_l2_lambda": 0.001,
    "lm_vocab_size": 100,
    "lm_n_negative_samples": 8,
    "lm_dropout": 0.1,
    "float_kernel": "aten",
    "lstm_gates_block_elements": 1024,
    "n_characters": 261,
}


def test_the_fields_that_decide_the_numbers_decide_the_fingerprint(tiny_model_dir, tmp_path):
    """A model's fingerprint (what keys the export cache and what `embed --resume` compares) changes with each field
    that decides the numbers, and with no other; every field of the config is one or the other."""
    from options_elmo import NUMBERS_FIELDS, ElmoOptions

    assert sorted(NUMBERS_CHANGES) == sorted(NUMBERS_FIELDS)
    assert sorted([*NUMBERS_CHANGES, *SAME_NUMBERS_CHANGES]) == sorted(dataclasses.asdict(ElmoOptions()))
    folder = shutil.copytree(tiny_model_dir, tmp_path / "m", symlinks=True)
    config = json.loads((folder / "config.json").read_text())
    # A character vocabulary and a word embedding: input rows of a word id and 50 char ids.
    vocabulary = {
        **config,
        "char_vocab_size": 300,
        "word_vocab_size": 10,
        "word_embedding_dim": 4,
        "sentence_boundary_ids": [[1] * 51, [2] * 51],
    }

    def fingerprint(values):
        (folder / "config.json").write_text(json.dumps(values))
        return open_model(folder).fingerprint("float32")

    bytes_model, vocabulary_model = fingerprint(config), fingerprint(vocabulary)
    assert bytes_model != vocabulary_model
    for name, value in NUMBERS_CHANGES.items():
        vocabulary_field = name in ("char_vocab_size", "word_vocab_size", "word_embedding_dim", "sentence_boundary_ids")
        base, before = (vocabulary, vocabulary_model) if vocabulary_field else (config, bytes_model)
        assert base.get(name) != value and fingerprint({**base, name: value}) != before, name
    for name, value in SAME_NUMBERS_CHANGES.items():
        assert config.get(name) != value and fingerprint({**config, name: value}) == bytes_model, name
