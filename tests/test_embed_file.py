"""scripts/embed_file.py: the `allennlp elmo` HDF5 layout, checked against AllenNLP's own fixture outputs."""

import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch
from conftest import REPO, load_fixture
from embed_file import main

ATOL = 1e-5  # as test_fidelity: AllenNLP's own batch-vs-single noise reaches 6e-6


@pytest.fixture
def one_thread():
    """Tiny models run far faster on one thread on a loaded machine, and thread count must match between the
    runs compared bit for bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def read_hdf5(path):
    with h5py.File(path, "r") as f:
        arrays = {key: f[key][...] for key in f if key != "sentence_to_index"}
        index = json.loads(f["sentence_to_index"][0])
        dtypes = {f[key].dtype for key in arrays}
    return arrays, index, dtypes


def embed(tmp_path, tiny_model_dir, lines, *flags, name="out.hdf5"):
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / name
    assert main([str(source), str(output), "--model", str(tiny_model_dir), *flags]) == 0
    return output


@pytest.mark.parametrize("mode", ["all", "top", "average"])
def test_modes_match_allennlp(tmp_path, tiny_model_dir, mode):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    lines = [" ".join(words) for words in sentences]
    assert all(line.split() == words for line, words in zip(lines, sentences))
    output = embed(tmp_path, tiny_model_dir, lines, f"--{mode}", "--batch-size", "5")
    arrays, index, dtypes = read_hdf5(output)
    assert sorted(arrays, key=int) == [str(i) for i in range(len(lines))]
    assert dtypes == {np.dtype("float32")}
    assert index == {line: str(i) for i, line in enumerate(lines)}
    for i, n in enumerate(expected["n_tokens"]):
        layers = expected[f"sent_{i}_activations"]  # AllenNLP: (3, n, 2P)
        want = {"all": layers, "top": layers[-1], "average": layers.mean(axis=0)}[mode]
        assert arrays[str(i)].shape == want.shape == ((3, n, 16) if mode == "all" else (n, 16))
        np.testing.assert_allclose(arrays[str(i)], want, atol=ATOL, rtol=0)
    assert not os.path.exists(str(output) + ".partial")


def test_blank_lines_and_a_1000_character_token(tmp_path, tiny, tiny_model_dir):
    model, tokenizer = tiny
    long_word = "x" * 1000
    lines = ["Hello world !", "", f"{long_word} end", "   \t "]
    arrays, index, _ = read_hdf5(embed(tmp_path, tiny_model_dir, lines, "--all"))
    assert arrays["1"].shape == arrays["3"].shape == (3, 0, 16)
    assert index[""] == "3"  # stripped lines are the keys, the later duplicate wins (as AllenNLP)
    # The 48-byte rule: the long token embeds exactly as its first 48 bytes.
    enc = tokenizer([["x" * 48, "end"]], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        want = torch.stack(model(**enc, output_hidden_states=True).hidden_states)[:, 0].numpy()
    assert arrays["2"].shape == (3, 2, 16)
    np.testing.assert_allclose(arrays["2"], want, atol=ATOL, rtol=0)


def test_refuses_to_overwrite_or_to_mix_runs(tmp_path, tiny_model_dir):
    output = embed(tmp_path, tiny_model_dir, ["a b"], "--top")
    with pytest.raises(SystemExit, match="exists"):
        main([str(tmp_path / "input.txt"), str(output), "--model", str(tiny_model_dir), "--top"])
    os.makedirs(str(output) + "2.partial")
    with open(str(output) + "2.partial/run.json", "w") as f:
        f.write("{}")
    with pytest.raises(SystemExit, match="--resume"):
        main([str(tmp_path / "input.txt"), str(output) + "2", "--model", str(tiny_model_dir), "--top"])
    with pytest.raises(SystemExit, match="started with input_sha256=None"):
        main([str(tmp_path / "input.txt"), str(output) + "2", "--model", str(tiny_model_dir), "--top", "--resume"])
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(SystemExit, match="latin1.txt is not UTF-8"):
        main([str(tmp_path / "latin1.txt"), str(tmp_path / "x.hdf5"), "--model", str(tiny_model_dir), "--top"])


def test_killed_run_leaves_no_output_and_resume_finishes_it(tmp_path, tiny_model_dir, one_thread):
    rng = np.random.default_rng(0)
    vocab = "the cat sat on a mat while dogs bark loudly at night ; café 東京".split()
    lines = [" ".join(rng.choice(vocab, size=rng.integers(0, 12))) for _ in range(600)]
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "killed.hdf5"
    partial = tmp_path / "killed.hdf5.partial"
    args = [str(source), str(output), "--model", str(tiny_model_dir), "--all", "--batch-size", "2"]

    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    process = subprocess.Popen([sys.executable, str(REPO / "scripts" / "embed_file.py"), *args], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    shards = []
    while len(shards) < 3:  # wait until some batches are safely written, then kill without warning
        assert process.poll() is None, f"embed_file ended before it could be killed:\n{process.stderr.read().decode()}"
        assert time.monotonic() < deadline, "embed_file wrote no batch in 300 s"
        time.sleep(0.005)
        shards = list(partial.glob("shard-*.npz")) if partial.exists() else []
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()

    assert not output.exists(), "a killed run must not leave a complete-looking output"
    assert 3 <= len(list(partial.glob("shard-*.npz"))) < 300

    with pytest.raises(SystemExit, match="--resume"):
        main(args)
    assert main([*args, "--resume"]) == 0
    assert not partial.exists()
    reference = embed(tmp_path, tiny_model_dir, lines, "--all", "--batch-size", "2", name="reference.hdf5")
    resumed, resumed_index, _ = read_hdf5(output)
    expected, expected_index, _ = read_hdf5(reference)
    assert resumed_index == expected_index
    assert resumed.keys() == expected.keys() and len(resumed) == 600
    for key in expected:
        np.testing.assert_array_equal(resumed[key], expected[key])
