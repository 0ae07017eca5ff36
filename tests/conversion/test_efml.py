"""ELMoForManyLangs models: converted folders reproduce the elmoformanylangs package's own outputs
(tests/fixtures/efml-*, made by tests/fixtures/make_efml_fixture.py with the package on random weights)."""

import json
import os
import shutil
import textwrap

import numpy as np
import pytest
import torch
from conftest import FIXTURES, run_isolated
from tolerance import assert_close_to_reference

from configuration_elmo import ELMO_MODULES
from basic_tokenization_elmo import read_dic
from tokenization_elmo import ElmoTokenizer

NAMES = ["efml-charword", "efml-word"]


def load(name):
    folder = FIXTURES / name
    sentences = json.loads((folder / "sentences.json").read_text(encoding="utf-8"))
    return folder / "model", sentences, dict(np.load(folder / "expected.npz"))


@pytest.fixture(scope="module", params=NAMES)
def converted(request, tmp_path_factory):
    """(fixture name, converted folder written by the command line)."""
    from elmo_transformers.cli import main

    output = tmp_path_factory.mktemp("efml") / request.param
    assert main(["convert", "elmoformanylangs", str(FIXTURES / request.param / "model"), "--output", str(output)]) == 0
    return request.param, output


def embed(model, tokenizer, sentences):
    """[sentence][3, words, 2P] like the package's sents2elmo(output_layer=-2), in one padded batch."""
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        layers = torch.stack(model(**enc, output_hidden_states=True).hidden_states, dim=1)
    return [layers[i, :, : len(s)].numpy() for i, s in enumerate(sentences)]


@pytest.mark.fidelity
def test_converted_model_matches_the_package_on_all_layers(converted):
    from modeling_elmo import ElmoModel

    name, folder = converted
    _, sentences, expected = load(name)
    model, tokenizer = ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder)
    for i, layers in enumerate(embed(model, tokenizer, sentences)):
        assert layers.shape == expected[f"layers_{i}"].shape
        assert_close_to_reference(layers, expected[f"layers_{i}"], what=f"{name} sentence {i} {sentences[i]}")
        if f"average_{i}" in expected:  # output_layer=-1
            assert_close_to_reference(layers.mean(axis=0), expected[f"average_{i}"], what=f"{name} average {i}")
    # Each sentence alone gives the same (a stateless model; the package carries state across batches).
    for i in (1, 5):
        alone = embed(model, tokenizer, [sentences[i]])[0]
        assert_close_to_reference(alone, expected[f"layers_{i}"], what=f"{name} sentence {i} alone")


def test_fixture_exercises_the_vocabulary_rules():
    """Guards the fixtures: out-of-vocabulary characters and words, the cut, U+3000 and boundaries occur in them."""
    model_dir, sentences, _ = load("efml-charword")
    chars, words = read_dic(model_dir / "char.dic"), read_dic(model_dir / "word.dic")
    tokens = [w for s in sentences for w in s]
    assert "\u3000" in chars and "\u3000" in words and any("\u3000" in w for w in tokens)
    assert any(c not in chars for w in tokens for c in w) and any(w not in words for w in tokens)
    assert "internationalization" in tokens and "internat" in words  # found only after the cut to 8 characters
    assert "<bos>" in tokens and [] in sentences


def test_tokenizer_rows_follow_the_package(converted):
    name, folder = converted
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    model_dir, _, _ = load(name)
    words = read_dic(model_dir / "word.dic")
    row = tokenizer.token_row("internationalization")
    assert row[0] == words["internat"] + 1
    if name == "efml-charword":
        chars = read_dic(model_dir / "char.dic")
        assert len(row) == 11 and tokenizer.input_width == 11
        # <eow> first and <bow> last (the package's swap), <pad> after, <oov> for unknown characters; ids + 1.
        assert row[1:] == tuple(i + 1 for i in [chars["<eow>"], *(chars[c] for c in "internat"), chars["<bow>"]])
        assert tokenizer.token_row("qa")[1:5] == tuple(
            i + 1 for i in [chars["<eow>"], chars["<oov>"], chars["a"], chars["<bow>"]]
        )
        assert tokenizer.token_row("qa")[5:] == (chars["<pad>"] + 1,) * 6
        assert tokenizer.decode(list(tokenizer.token_row("北京"))) == "北京"
    else:
        assert len(row) == 1 and tokenizer.decode([words["fox"] + 1 if "fox" in words else words["dog"] + 1]) == "dog"


def test_tokenizer_saves_and_reloads_its_vocabularies(converted, tmp_path):
    name, folder = converted
    model_dir, _, _ = load(name)
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    tokenizer.save_pretrained(tmp_path)
    again = ElmoTokenizer.from_pretrained(tmp_path)
    for kind in ("char", "word"):
        if (model_dir / f"{kind}.dic").exists():
            assert read_dic(tmp_path / f"{kind}.dic") == read_dic(model_dir / f"{kind}.dic")
            assert getattr(again, f"{kind}_vocab") == getattr(tokenizer, f"{kind}_vocab")
            assert "\u3000" in getattr(again, f"{kind}_vocab")
    assert again.token_row("全角\u3000スペース") == tokenizer.token_row("全角\u3000スペース")


def test_read_dic_follows_the_package_rule(tmp_path):
    path = tmp_path / "char.dic"
    path.write_text("a\t0\n\u3000\t1\nb\t2\na\t3\n", encoding="utf-8")
    assert read_dic(path) == {"a": 3, "\u3000": 1, "b": 2}  # the one-field line is U+3000; a repeat keeps the last
    path.write_text("a\t0\nb\tx\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        read_dic(path)
    path.write_text("a\t0\n", encoding="utf-8")
    with pytest.raises(ValueError, match="<oov>"):
        ElmoTokenizer(word_vocab_file=str(path))


CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    for name in ELMO_MODULES:
        sys.modules[name] = None  # only the folder's own copies may be used
    from transformers import AutoModel, AutoTokenizer

    folder, sentences_path, out_path = sys.argv[1:4]
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    sentences = json.load(open(sentences_path, encoding="utf-8"))
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    np.save(out_path, torch.stack(out.hidden_states, dim=1).numpy())
    """
).replace("ELMO_MODULES", repr(ELMO_MODULES))


@pytest.mark.slow
def test_auto_classes_with_remote_code_in_an_isolated_process(converted, tmp_path):
    name, folder = converted
    _, sentences, expected = load(name)
    result = run_isolated(CHILD, folder, FIXTURES / name / "sentences.json", tmp_path / "o.npy", folder=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    layers = np.load(tmp_path / "o.npy")
    for i, sentence in enumerate(sentences):
        assert_close_to_reference(layers[i, :, : len(sentence)], expected[f"layers_{i}"], what=f"{name} remote {i}")


@pytest.mark.slow
def test_task_heads_train_from_a_converted_folder(converted, tmp_path):
    from transformers import Trainer, TrainingArguments

    from modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification

    name, folder = converted
    _, sentences, _ = load(name)
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    sentences = [s for s in sentences if s]
    head = ElmoForTokenClassification.from_pretrained(folder, num_labels=3)
    examples = []
    for i, s in enumerate(sentences):
        enc = tokenizer(s, is_split_into_words=True)
        examples.append({**enc, "labels": [(i + j) % 3 for j in range(len(s))]})

    def collate(batch):
        labels = [b.pop("labels") for b in batch]
        padded = tokenizer.pad(batch, return_tensors="pt")
        width = padded["input_ids"].shape[1]
        padded["labels"] = torch.tensor([word_labels + [-100] * (width - len(word_labels)) for word_labels in labels])
        return padded

    args = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        per_device_train_batch_size=4,
        max_steps=2,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        learning_rate=0.1,
    )
    before = head.elmo.scalar_mixes[0].scalar_parameters.detach().clone()
    Trainer(model=head, args=args, train_dataset=examples, data_collator=collate).train()
    assert not torch.equal(before, head.elmo.scalar_mixes[0].scalar_parameters)
    classifier = ElmoForSequenceClassification.from_pretrained(folder, num_labels=2)
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    out = classifier(**enc, labels=torch.tensor([0, 1] * (len(sentences) // 2) + [0] * (len(sentences) % 2)))
    assert out.logits.shape == (len(sentences), 2) and torch.isfinite(out.loss)


def test_chinese_and_japanese_through_auto_model(converted):
    """The documented use (docs/coming-from-elmoformanylangs.md), installed modules."""
    from transformers import AutoModel, AutoTokenizer

    name, folder = converted
    _, sentences, expected = load(name)
    model = AutoModel.from_pretrained(folder, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    enc = tokenizer([sentences[1], sentences[2]], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    for row, i in enumerate((1, 2)):
        mean = torch.stack(out.hidden_states)[:, row, : len(sentences[i])].mean(0)  # output_layer=-1
        assert_close_to_reference(mean, expected[f"average_{i}"], what=f"{name} sentence {i}")


# -- the command line: the shared output rules and clear errors ------------------------------------------------


def run(argv):
    import contextlib
    import io

    from elmo_transformers.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["convert", "elmoformanylangs", *map(str, argv)])
    return code, err.getvalue()


def copy_model(tmp_path, name="efml-charword"):
    target = tmp_path / "model"
    shutil.copytree(FIXTURES / name / "model", target)
    return target


def test_overwrite_refuses_the_source_folder(tmp_path):
    source = copy_model(tmp_path)
    before = {p.name: p.read_bytes() for p in source.iterdir()}
    code, err = run([source, "--output", source, "--overwrite"])
    assert code == 1 and "is the input" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in source.iterdir()} == before


def test_overwrite_replaces_an_earlier_conversion(tmp_path):
    source = copy_model(tmp_path)
    assert run([source, "--output", tmp_path / "out"])[0] == 0
    assert run([source, "--output", tmp_path / "out"])[0] == 1
    assert run([source, "--output", tmp_path / "out", "--overwrite"])[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "out"]


def with_nan_weight(model):
    """encoder.pkl with one NaN in its first float tensor."""
    state = torch.load(model / "encoder.pkl", weights_only=True)
    name = next(name for name, tensor in state.items() if tensor.is_floating_point())
    state[name].view(-1)[1] = float("nan")
    torch.save(state, model / "encoder.pkl")
    return name


@pytest.mark.parametrize(
    "damage, fragment",
    [
        (lambda m: (m / "char.dic").unlink(), "char.dic"),
        (lambda m: (m / "encoder.pkl").write_bytes(b"not a pickle"), "encoder.pkl"),
        (lambda m: (m / "config.json").write_text('{"config_path": "nowhere.json"}'), "nowhere.json"),
        (
            lambda m: (m / "word.dic").write_text("<oov>\t0\n<pad>\t1\n", encoding="utf-8"),
            "word_emb_layer.embedding.weight has shape (39, 6), expected (2, 6)",
        ),
        (
            lambda m: (m / "tiny_config.json").write_text(
                (m / "tiny_config.json").read_text().replace('"cell_clip": 3', '"cell_clip": NaN')
            ),
            "cell_clip",
        ),
        (
            lambda m: (m / "tiny_config.json").write_text(
                (m / "tiny_config.json").read_text().replace('"name": "cnn"', '"name": "lstm"')
            ),
            "only the 'cnn'",
        ),
        (with_nan_weight, "holds NaN or infinite values"),
    ],
)
def test_broken_model_folders_are_named(tmp_path, damage, fragment):
    source = copy_model(tmp_path)
    damage(source)
    code, err = run([source, "--output", tmp_path / "out"])
    assert code == 1 and fragment in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_shipped_model_config_is_found_by_name(tmp_path):
    """Released folders name the package's config (not in the folder): its built-in copy is used."""
    from elmo_transformers.conversion.elmoformanylangs import read_model_config

    source = copy_model(tmp_path)
    (source / "config.json").write_text(json.dumps({"config_path": "../configs/cnn_50_100_512_4096_sample.json"}))
    config = read_model_config(source)
    assert config["token_embedder"]["char_dim"] == 50 and config["encoder"]["dim"] == 4096


def test_ids_outside_the_vocabularies_are_named(converted):
    from modeling_elmo import ElmoModel

    name, folder = converted
    model = ElmoModel.from_pretrained(folder)
    width = model.config.input_width
    too_big = torch.ones(1, 2, width, dtype=torch.long)
    too_big[0, 0, 0] = model.config.word_vocab_size + 1
    with pytest.raises(ValueError, match=rf"word ids in \[0, {model.config.word_vocab_size}\]"):
        model(too_big)
    with pytest.raises(ValueError, match=rf"input_ids must have shape \[batch, words, {width}\]"):
        model(torch.ones(1, 2, 50, dtype=torch.long))


def test_fixture_reaches_both_clips(converted):
    """Guards the fixtures: without the cell clip or the projection clip the outputs move far outside the rule."""
    from modeling_elmo import ElmoModel

    name, folder = converted
    _, sentences, expected = load(name)
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    for field in ("cell_clip", "proj_clip"):
        model = ElmoModel.from_pretrained(folder, **{field: None}).eval()
        top = [layers[2] for layers in embed(model, tokenizer, sentences)]
        assert max(np.abs(t - expected[f"layers_{i}"][2]).max() for i, t in enumerate(top) if t.size) > 1e-2, field


def test_feature_extraction_pipeline_gives_the_package_average(converted):
    """A fresh conversion's scalar mix is uniform (weights 0, gamma 1): its ELMo vectors are sents2elmo's default
    output_layer=-1, the average of the 3 layers."""
    from transformers import pipeline

    from elmo_transformers import ElmoFeatureExtractionPipeline

    name, folder = converted
    _, sentences, expected = load(name)
    extractor = pipeline("feature-extraction", model=str(folder), pipeline_class=ElmoFeatureExtractionPipeline)
    for i in (1, 2, 3):  # Chinese, Japanese, Cyrillic (white-space separated, as the pipeline splits text)
        vectors = np.array(extractor(" ".join(sentences[i])))[0]
        assert_close_to_reference(vectors, expected[f"average_{i}"], what=f"{name} pipeline sentence {i}")


def test_push_to_hub_uploads_the_vocabularies(converted, tmp_path):
    """The .dic files are part of the model: the upload folder (the same file list the converter writes) has them."""
    from elmo_transformers.hub import push as hub
    from elmo_transformers.model_folder import open_model

    _, folder = converted
    files = hub.build_upload_folder(open_model(folder), tmp_path / "stage", "me/elmo-zh")
    vocabularies = {name for name in os.listdir(folder) if name.endswith(".dic")}
    assert "word.dic" in vocabularies and vocabularies | {"config.json", "model.safetensors"} <= set(files)


def test_no_file_outside_the_model_folder_is_read(tmp_path):
    """A config_path leaving the folder is looked up by its file name inside it; an absolute one is refused."""
    from elmo_transformers.conversion.elmoformanylangs import read_model_config
    from elmo_transformers.errors import ConversionError

    source = copy_model(tmp_path)
    outside = tmp_path / "configs" / "tiny_config.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps({"outside": True}))
    (source / "config.json").write_text(json.dumps({"config_path": "../configs/tiny_config.json"}))
    assert "outside" not in read_model_config(source)  # the folder's own tiny_config.json
    (source / "config.json").write_text(json.dumps({"config_path": str(outside)}))
    with pytest.raises(ConversionError, match="an absolute path: only files inside the model folder are read"):
        read_model_config(source)
