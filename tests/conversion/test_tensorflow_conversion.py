"""`convert tensorflow`: TF-Hub modules and bilm-tf checkpoints made by TensorFlow (tests/fixtures/make_tf_fixtures.py)
from weights whose AllenNLP outputs the reference fixtures hold reproduce those outputs, with no TensorFlow."""

import importlib.util
import json
import shutil
import tarfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import FIXTURES, load_fixture
from tolerance import assert_close_to_reference
from transformers import AutoModelForPreTraining

from elmo_transformers.cli import main, pretrain
from elmo_transformers.conversion.tensorflow import module_folder
from elmo_transformers.conversion.tf_checkpoint import MAX_INDEX_BYTES, crc32c
from modeling_elmo import ElmoModel, masked_mean
from tokenization_elmo import ElmoTokenizer

TF = FIXTURES / "tensorflow"
ONE_LAYER = FIXTURES / "allennlp-lm-tiny-1layer"
# fixture -> (the AllenNLP reference of its biLM: folder, layer key, mask key; the LM reference or None)
SOURCES = {
    "tfhub-2layer": (FIXTURES / "allennlp-tiny", None),
    "tfhub-1layer": (ONE_LAYER, None),
    "bilm-tf-2layer": (FIXTURES / "allennlp-tiny", FIXTURES / "allennlp-lm-tiny"),
    "bilm-tf-1layer": (ONE_LAYER, ONE_LAYER),
}

_spec = importlib.util.spec_from_file_location("make_crafted_checkpoints", FIXTURES / "make_crafted_checkpoints.py")
CRAFTED = importlib.util.module_from_spec(_spec)  # the hostile checkpoints and archives, made here in tmp_path
_spec.loader.exec_module(CRAFTED)


def reference(folder):
    sentences = json.loads((folder / "sentences.json").read_text(encoding="utf-8"))
    return sentences, dict(np.load(folder / "expected.npz"))


def convert(path, output, *extra):
    assert main(["convert", "tensorflow", str(path), "--output", str(output), *map(str, extra)]) == 0
    return output


def run(model, tokenizer, sentences):
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch, output_hidden_states=True)


@pytest.mark.fidelity
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_biLM_layers_equal_allennlp(tmp_path, name):
    folder = convert(TF / name, tmp_path / "out")
    sentences, expected = reference(SOURCES[name][0])
    out = run(ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder), sentences)
    layers = torch.stack(out.hidden_states).numpy()
    assert_close_to_reference(layers, expected["bilm_activations"], f"{name} layers")
    np.testing.assert_array_equal(out.mask.numpy(), expected["mask"].astype(bool))


@pytest.mark.fidelity
@pytest.mark.parametrize("name", ["tfhub-2layer", "tfhub-1layer"])
@pytest.mark.parametrize(
    "packed",
    [None, "", "module", ".", "module/*"],
    ids=["folder", "tar.gz", "tar.gz-in-folder", "tar.gz-./", "tar.gz-in-folder-no-entry"],
)
def test_tfhub_elmo_and_default_outputs(tmp_path, name, packed):
    """last_hidden_state = TF-Hub's `elmo` (its trained aggregation over AllenNLP's layers), masked mean = `default`.
    Packed: the archive TF-Hub serves (the module's files at the top), as `tar czf m.tar.gz module/` makes it (in one
    folder), as `tar czf m.tar.gz module/*` makes it (in one folder that has no entry of its own) and as
    `tar czf m.tar.gz -C module .` does (./ names)."""
    path = TF / name
    if packed is not None:
        path = tmp_path / f"{name}.tar.gz"
        with tarfile.open(path, "w:gz") as archive:
            if packed in ("", "module/*"):
                for item in (TF / name).iterdir():
                    archive.add(item, arcname=packed.replace("*", item.name) if packed else item.name)
            else:
                archive.add(TF / name, arcname=packed)
    folder = convert(path, tmp_path / "out")
    sentences, expected = reference(SOURCES[name][0])
    aggregation = json.loads((TF / f"{name}.aggregation.json").read_text())
    weights = np.exp(aggregation["weights"]) / np.exp(aggregation["weights"]).sum()
    elmo = aggregation["scaling"][0] * np.einsum("k,kstd->std", weights, expected["bilm_activations"])
    mask = expected["mask"].astype(np.float32)
    default = (elmo * mask[..., None]).sum(1) / mask.sum(1)[:, None]
    out = run(ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder), sentences)
    assert_close_to_reference(out.last_hidden_state, elmo, f"{name} elmo")
    assert_close_to_reference(masked_mean(out.last_hidden_state, out.mask), default, f"{name} default")


@pytest.mark.fidelity
@pytest.mark.parametrize("name", ["bilm-tf-2layer", "bilm-tf-1layer"])
@pytest.mark.parametrize("layout", ["folder", "prefix", "tar.gz"])
def test_bilm_tf_language_model_log_probs(tmp_path, name, layout):
    """With --vocab the checkpoint's softmax gives AllenNLP's log-probs; a bare prefix (no options.json beside it)
    gives the same model from the shapes and the Original's defaults; the folder in a .tar.gz (`tar czf run.tar.gz
    run1/`) the same, its options.json read from the archive (n_characters 261, where the shapes give 262)."""
    lm_reference = SOURCES[name][1]
    path = TF / name
    if layout == "prefix":
        shutil.copytree(TF / name, tmp_path / "run", ignore=shutil.ignore_patterns("options.json", "checkpoint"))
        path = next((tmp_path / "run").glob("*.index")).with_suffix("")
    elif layout == "tar.gz":
        path = tmp_path / "run.tar.gz"
        with tarfile.open(path, "w:gz") as archive:
            archive.add(TF / name, arcname="run1")
    folder = convert(path, tmp_path / "out", "--vocab", lm_reference / "vocab.txt")
    n_characters = json.loads((folder / "config.json").read_text())["n_characters"]
    assert n_characters == (262 if layout == "prefix" else 261)
    sentences, expected = reference(lm_reference)
    model = AutoModelForPreTraining.from_pretrained(folder, trust_remote_code=True).eval()
    assert type(model).__name__ == "ElmoForLanguageModeling"  # the remote-code class
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    for i, n in enumerate(expected["n_tokens"]):
        for direction, logits in (("forward", out.forward_logits), ("backward", out.backward_logits)):
            assert_close_to_reference(
                torch.log_softmax(logits[i, : n + 1], -1),
                expected[f"{direction}_log_probs"][i, : n + 1],
                f"{name} {direction} {i}",
            )


def test_crc32c_known_values():
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c(bytes(32)) == 0x8A9136AA and crc32c(b"\xff" * 32) == 0x62A8AB43  # RFC 3720 B.4
    assert crc32c(bytes(range(32))) == 0x46DD794E and crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C  # B.4 too


def one_line_error(capfd, *argv):
    assert main(list(map(str, argv))) == 1
    message = capfd.readouterr().err.strip()
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_shard_is_one_line_error(tmp_path, capfd, damage):
    run_dir = tmp_path / "run"
    shutil.copytree(TF / "bilm-tf-2layer", run_dir)
    shard = next(run_dir.glob("*.data-*"))
    data = bytearray(shard.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 3] ^= 0x10
    shard.write_bytes(bytes(data))
    message = one_line_error(capfd, "convert", "tensorflow", run_dir, "--output", tmp_path / "out")
    assert shard.name in message and ("truncated" in message or "crc32c" in message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "case, message",
    [
        ("int32-dtype", "model.ckpt-120.index: lm/CNN_proj/W_proj is declared DT_INT32, but it must be DT_FLOAT"),
        (
            "declared-2gib",
            "model.ckpt-120.index: lm/CNN_proj/b_proj declares 2,147,483,648 bytes, but its shape (8,) of "
            "DT_FLOAT is 32 bytes: a corrupt index",
        ),
        (
            "declared-2pow40",
            "lm/CNN_proj/b_proj declares 1,099,511,627,776 bytes, but its shape (8,) of DT_FLOAT is 32",
        ),
        (
            "offset-max",
            "model.ckpt-120.data-00000-of-00001 holds 34,520 bytes, but lm/CNN_proj/b_proj lies at bytes "
            "18,446,744,073,709,551,615 to 18,446,744,073,709,551,647 of it",
        ),
        ("many-dims", "model.ckpt-120.index: lm/CNN_proj/b_proj declares 100,001 dimensions (at most 32)"),
        ("negative-dim", "lm/CNN_proj/b_proj declares the shape (-1,), with a dimension of unknown size"),
        ("big-index", f"model.ckpt-120.index is {MAX_INDEX_BYTES + 1:,} bytes, more than a checkpoint index is read"),
    ],
)
def test_a_hostile_index_is_one_line_before_anything_is_read(tmp_path, capfd, case, message):
    """Each index entry is checked (dtype, dims, size against the shape, bytes against the shard's length) and the
    index's size bounded before anything is read: the 2 GiB a tensor declares (its shard a sparse file holding
    them), the 2^40 bytes and the index's size are never allocated."""
    run_dir = CRAFTED.crafted_checkpoint(case, tmp_path / "run", index_bytes=MAX_INDEX_BYTES + 1)
    tracemalloc.start()
    try:
        error = one_line_error(capfd, "convert", "tensorflow", run_dir, "--output", tmp_path / "out")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message in error and peak < 32 << 20, (error, peak)
    assert not (tmp_path / "out").exists()


def test_an_archive_unpacks_only_what_is_read(tmp_path):
    """Of a TF-Hub archive with a large member (16 MiB of zeros here, 2 GB in the probe) only the index is unpacked;
    the shard is read in place, and the module converts."""
    bomb = CRAFTED.crafted_archive("bomb.tar.gz", tmp_path / "bomb.tar.gz", member_bytes=16 << 20)
    with module_folder(bomb) as (folder, _):
        unpacked = sorted(path.relative_to(folder).as_posix() for path in Path(folder).rglob("*") if path.is_file())
    assert unpacked == ["variables/variables.index"] and not Path(folder).exists()
    convert(bomb, tmp_path / "out")


@pytest.mark.parametrize(
    "case, message",
    [
        ("truncated.tar.gz", "cannot unpack {}: it ends before its last member does (a truncated download?)"),
        ("not-a-tar.tar.gz", "cannot unpack {}: not a tar archive (plain, or compressed with gzip, bzip2 or xz)"),
        (
            "big-index-member.tar.gz",
            f"{{}}:variables/variables.index is {MAX_INDEX_BYTES + 1:,} bytes, more than a "
            f"checkpoint index file holds ({MAX_INDEX_BYTES:,} at most)",
        ),
        ("outside.tar.gz", "cannot unpack {}: its member ../options.json lies outside the archive"),
        ("link.tar.gz", "{}:variables/variables.index is a link or a special file, not a file"),
        (
            "no-shard.tar.gz",
            "cannot read the checkpoint shard {}:variables/variables.data-00000-of-00001: not in the archive",
        ),
        ("no-checkpoint.tar.gz", "{} holds no TensorFlow checkpoint"),
    ],
)
def test_an_archive_refusal_says_why_and_names_the_member(tmp_path, capfd, case, message):
    """One line with the reason, naming the archive (and the member as ARCHIVE:MEMBER), never the temporary folder
    that is gone when the user reads it."""
    archive = CRAFTED.crafted_archive(case, tmp_path / case)
    error = one_line_error(capfd, "convert", "tensorflow", archive, "--output", tmp_path / "out")
    assert error.startswith("error: ") and message.format(archive) in error and "elmo-tfhub-" not in error, error
    assert not (tmp_path / "out").exists()


def test_folder_without_checkpoint_is_one_line_error(tmp_path, capfd):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "options.json").write_text("{}")
    message = one_line_error(capfd, "convert", "tensorflow", tmp_path / "empty", "--output", tmp_path / "out")
    assert "no TensorFlow checkpoint" in message
    message = one_line_error(capfd, "convert", "tensorflow", tmp_path / "missing", "--output", tmp_path / "out")
    assert "missing" in message


def test_checkpoint_file_names_another_machine(tmp_path):
    """The `checkpoint` file's absolute path is the training machine's; the prefix is found in the given folder."""
    state = (TF / "bilm-tf-2layer" / "checkpoint").read_text()
    assert state.startswith('model_checkpoint_path: "/home/') and "model.ckpt-120" in state
    convert(TF / "bilm-tf-2layer", tmp_path / "out")


def test_allennlp_weights_without_options(tmp_path, caplog):
    """`convert allennlp --weights` alone: the architecture from the shapes, the Original's clipping (3, as in the
    fixture's options), skip connections and activation: the same outputs as AllenNLP's."""
    weights, folder = FIXTURES / "allennlp-tiny" / "weights.hdf5", tmp_path / "out"
    assert main(["convert", "allennlp", "--weights", str(weights), "--output", str(folder)]) == 0
    assert "cell_clip=3.0" in caplog.text and "(an options file overrides them)" in caplog.text
    sentences, expected, _ = load_fixture("allennlp-tiny")
    out = run(ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder), sentences)
    assert_close_to_reference(torch.stack(out.hidden_states), expected["bilm_activations"], "layers")


def test_bilm_tf_run_continues_with_pretrain(tmp_path):
    """A bilm-tf run converted with its vocabulary is a starting point for `elmo-transformers pretrain`."""
    folder = convert(TF / "bilm-tf-1layer", tmp_path / "lm", "--vocab", ONE_LAYER / "vocab.txt")
    (tmp_path / "text.txt").write_text("the river bank was good .\nParis is the capital of France .\n")
    trainer = pretrain.main(
        [
            "--model_name_or_path",
            str(folder),
            "--train_file",
            str(tmp_path / "text.txt"),
            "--validation_split_percentage",
            "0",
            "--do_train",
            "--per_device_train_batch_size",
            "2",
            "--report_to",
            "none",
            "--disable_tqdm",
            "true",
            "--max_steps",
            "1",
            "--output_dir",
            str(tmp_path / "run"),
        ]
    )
    assert trainer.state.global_step == 1 and trainer.model.config.lm_vocab_size == 32
    assert trainer.model.config.n_layers == 1
