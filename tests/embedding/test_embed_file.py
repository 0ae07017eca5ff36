"""elmo_transformers.embedding.embed_file (`elmo-transformers embed`, ElmoEmbedder.embed_file): the `allennlp elmo`
HDF5 layout, checked against AllenNLP's own fixture outputs, and off the happy path."""

import errno
import io
import json
import re
import resource
import shutil
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch
from conftest import command, command_env, interrupt_after, load_fixture, one_line_error, read_hdf5
from tolerance import assert_close_to_reference

from elmo_transformers.cli import main as cli_main
from elmo_transformers.cli import one_line
from elmo_transformers.cli.embed import main
from elmo_transformers.embedding import embed_file as embed_file_module
from elmo_transformers.embedding import embedder as embedder_module
from elmo_transformers.embedding import partial_run
from elmo_transformers import output_paths, text_input
from elmo_transformers.errors import OutputExistsError, UnfinishedRunError, UserError


@pytest.fixture
def one_thread():
    """Tiny models run far faster on one thread on a loaded machine, and thread count must match between the
    runs compared bit for bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def embed(tmp_path, tiny_model_dir, lines, *flags, name="out.hdf5"):
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / name
    assert main([str(source), str(output), "--model", str(tiny_model_dir), *flags]) == 0
    return output


@pytest.mark.slow
@pytest.mark.fidelity
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
        assert_close_to_reference(arrays[str(i)], want, what=f"--{mode} line {i}")
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
    assert_close_to_reference(arrays["2"], want, what="48-byte rule")


def test_the_model_folder_is_an_input(tmp_path, tiny_model_dir):
    """An output inside the model's folder (its weights, with --overwrite) is refused before any work."""
    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    weights = (model / "model.safetensors").read_bytes()
    source = tmp_path / "input.txt"
    source.write_text("a b\n")
    message = one_line_error(
        [str(source), str(model / "model.safetensors"), "--model", str(model), "--top", "--overwrite"]
    )
    assert "is inside the input" in message and (model / "model.safetensors").read_bytes() == weights


def test_refuses_to_overwrite_or_to_mix_runs(tmp_path, tiny_model_dir):
    output = embed(tmp_path, tiny_model_dir, ["a b"], "--top")
    with pytest.raises(UserError, match="exists"):
        main([str(tmp_path / "input.txt"), str(output), "--model", str(tiny_model_dir), "--top"])
    os.makedirs(str(output) + "2.partial")
    with open(str(output) + "2.partial/run.json", "w") as f:
        f.write("{}")
    with pytest.raises(UnfinishedRunError) as refused:
        main([str(tmp_path / "input.txt"), str(output) + "2", "--model", str(tiny_model_dir), "--top"])
    assert "pass --resume to continue it" in one_line(refused.value)  # the command's wording
    with pytest.raises(UserError, match="its run.json lacks file_format, so what it computed is unknown"):
        main([str(tmp_path / "input.txt"), str(output) + "2", "--model", str(tiny_model_dir), "--top", "--resume"])
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"latin1.txt: not UTF-8 text \(byte 0xe9\)"):
        main([str(tmp_path / "latin1.txt"), str(tmp_path / "x.hdf5"), "--model", str(tiny_model_dir), "--top"])
    (tmp_path / "utf16.txt").write_bytes("a b\n".encode("utf-16-le"))  # no byte-order mark: decodes as UTF-8
    with pytest.raises(UserError, match=r"utf16.txt, line 1: NUL characters .* likely UTF-16LE"):
        main([str(tmp_path / "utf16.txt"), str(tmp_path / "x.hdf5"), "--model", str(tiny_model_dir), "--top"])
    assert not (tmp_path / "x.hdf5").exists() and not (tmp_path / "x.hdf5.partial").exists()


def finished_lines(partial):
    """The lines the journals of OUTPUT.partial/ name as finished (written and on the disk)."""
    return [
        int(i)
        for journal in partial.glob("done-*.txt")
        for entry in journal.read_text().split("\n")[:-1]
        for i in entry.split()
    ]


def kill_embed_when(args, ready, event):
    """Run `embed ARGS` in a process of its own on one thread and kill -9 it, without warning, as soon as `ready()`
    holds; it must get there (`event`) within 300 s."""
    process = subprocess.Popen(
        command("embed", *args), env=command_env(OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 300
    while not ready():
        assert process.poll() is None, f"embed ended before {event}:\n{process.stderr.read().decode()}"
        assert time.monotonic() < deadline, f"embed did not get to {event} in 300 s"
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()


@pytest.mark.slow
def test_killed_run_leaves_no_output_and_resume_finishes_it(tmp_path, tiny_model_dir, one_thread):
    rng = np.random.default_rng(0)
    vocab = "the cat sat on a mat while dogs bark loudly at night ; café 東京".split()
    lines = [" ".join(rng.choice(vocab, size=rng.integers(0, 12))) for _ in range(600)]
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "killed.hdf5"
    partial = tmp_path / "killed.hdf5.partial"
    args = [str(source), str(output), "--model", str(tiny_model_dir), "--all", "--batch-size", "2"]

    # wait until some batches are safely written, then kill without warning
    kill_embed_when(args, lambda: len(finished_lines(partial)) >= 6, "it wrote 6 lines")
    written_in_place = (partial / "output.hdf5").stat().st_ino

    assert not output.exists(), "a killed run must not leave a complete-looking output"
    assert 6 <= len(finished_lines(partial)) < 600
    with h5py.File(partial / "output.hdf5", "r") as f:  # killed while writing vectors: HDF5 still opens it
        assert len(f) == 601

    with pytest.raises(UnfinishedRunError) as refused:
        main(args)
    assert "pass --resume to continue it" in one_line(refused.value)  # the command's wording
    assert main([*args, "--resume"]) == 0
    assert not partial.exists()
    assert output.stat().st_ino == written_in_place  # each vector written once, where it stays: renamed, not copied
    reference = embed(tmp_path, tiny_model_dir, lines, "--all", "--batch-size", "2", name="reference.hdf5")
    resumed, resumed_index, _ = read_hdf5(output)
    expected, expected_index, _ = read_hdf5(reference)
    assert resumed_index == expected_index
    assert resumed.keys() == expected.keys() and len(resumed) == 600
    for key in expected:
        assert_close_to_reference(resumed[key], expected[key], what=f"resumed line {key}")


@pytest.mark.slow
def test_killed_while_the_output_file_is_made_a_rerun_finishes_it(tmp_path, tiny_model_dir):
    """kill -9 before the first batch, while OUTPUT's file is being made: nothing computed is lost, and the same
    command (with --resume where run.json was written) gives the whole file, with no temporary file left."""
    lines = lines_for_assembly()
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n")
    output = tmp_path / "out.hdf5"
    partial = tmp_path / "out.hdf5.partial"
    args = [str(source), str(output), "--model", str(tiny_model_dir), "--top", "--batch-size", "8"]
    kill_embed_when(args, partial.exists, "it made its folder")
    assert not output.exists() and not finished_lines(partial)
    assert main([*args, "--quiet", *(["--resume"] if (partial / "run.json").exists() else [])]) == 0
    assert not partial.exists() and not list(tmp_path.glob("*.tmp"))
    got, index, _ = read_hdf5(output)
    want = read_hdf5(embed(tmp_path, tiny_model_dir, lines, "--top", "--batch-size", "8", name="reference.hdf5"))[0]
    assert index == {line: str(i) for i, line in enumerate(lines)} and got.keys() == want.keys()
    for key in want:
        assert_close_to_reference(got[key], want[key], what=f"line {key}")


@pytest.mark.slow
def test_a_second_run_on_the_same_output_is_refused_while_the_first_runs(tmp_path, tiny_model_dir, one_thread):
    """Two embed_file runs on one OUTPUT at once: the second is told that another run writes it (not a raw ENOENT
    about a .tmp shard, nor "an interrupted run"); once that process is gone the lock file it left does not block
    --resume."""
    source = tmp_path / "input.txt"
    source.write_text("the cat sat on the mat .\n" * 3000, encoding="utf-8")
    output = tmp_path / "out.hdf5"
    args = [str(source), str(output), "--model", str(tiny_model_dir), "--top", "--batch-size", "1"]
    first = subprocess.Popen(
        command("embed", *args), env=command_env(OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 300
        while not finished_lines(tmp_path / "out.hdf5.partial"):
            assert first.poll() is None, first.stderr.read().decode()
            assert time.monotonic() < deadline, "embed_file wrote no batch in 300 s"
            time.sleep(0.01)
        for extra in ([], ["--resume"], ["--overwrite"]):
            with pytest.raises(UserError, match=r"out.hdf5 is being written by another run, which holds "):
                main([*args, *extra])
        assert first.poll() is None, "the first run goes on"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
        first.stderr.close()
    assert (tmp_path / "out.hdf5.partial.lock").exists()  # left by kill -9, and freed by the operating system
    with pytest.raises(UnfinishedRunError) as refused:
        main(args)
    assert "interrupted run: pass --resume" in one_line(refused.value)


def window_reference(model, tokenizer, words, window):
    """ElmoModel.forward_windows itself on the whole line: all layers [n_layers + 1, words, 2P]."""
    ids = tokenizer([words], is_split_into_words=True, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        outs = list(model.forward_windows(ids, window, output_hidden_states=True))
    return torch.cat([torch.stack(out.hidden_states)[:, 0] for out in outs], dim=1).numpy()


def test_long_line_is_embedded_in_stateful_windows_and_resumes_mid_line(
    tmp_path, tiny, tiny_model_dir, monkeypatch, one_thread
):
    model, tokenizer = tiny
    sentences, expected, _ = load_fixture("allennlp-tiny")
    long_words = sentences[2]  # 60 words: 6 windows of 10 (one unit), then the short lines in batches
    lines = [" ".join(sentences[0]), " ".join(long_words), " ".join(sentences[3])]
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "long.hdf5"
    args = [str(source), str(output), "--model", str(tiny_model_dir), "--all", "--max-sentence-words", "10"]
    interrupt_after(monkeypatch, "add_window", 3)
    assert main(args) == 130
    assert len(list(tmp_path.glob("long.hdf5.partial/window-000000001-*.npz"))) == 3
    monkeypatch.undo()
    assert main([*args, "--resume"]) == 0
    arrays, index, _ = read_hdf5(output)
    want = window_reference(model, tokenizer, long_words, 10)
    assert arrays["1"].shape == want.shape == (3, 60, 16)
    assert_close_to_reference(arrays["1"], want, what="long line vs forward_windows")
    # ...which is not the whole-sentence result: the windows really are the rule above the bound.
    assert np.abs(arrays["1"] - expected["sent_2_activations"]).max() > 1e-2
    assert_close_to_reference(arrays["0"], expected["sent_0_activations"], what="short line")
    assert_close_to_reference(arrays["2"], expected["sent_3_activations"], what="short line")
    assert index[lines[1]] == "1"


@pytest.mark.slow
def test_long_line_in_top_mode_has_the_top_layer(tmp_path, tiny, tiny_model_dir):
    model, tokenizer = tiny
    words = load_fixture("allennlp-tiny")[0][9]  # 41 words, windows of 16: 16 + 16 + 9
    arrays, _, _ = read_hdf5(embed(tmp_path, tiny_model_dir, [" ".join(words)], "--top", "--max-sentence-words", "16"))
    assert_close_to_reference(arrays["0"], window_reference(model, tokenizer, words, 16)[-1], what="--top windows")


def interrupted_run(monkeypatch, tmp_path, model_dir, *flags):
    """An embed run of 12 lines (batch size 2) stopped by Ctrl-C after two batches; returns its arguments."""
    source = tmp_path / "input.txt"
    source.write_text("".join(" ".join(["w"] * n) + "\n" for n in range(1, 13)), encoding="utf-8")
    args = [str(source), str(tmp_path / "out.hdf5"), "--model", str(model_dir), *flags, "--batch-size", "2"]
    interrupt_after(monkeypatch, "add_batch", 2)
    assert main(args) == 130
    monkeypatch.undo()
    return args


def test_a_refused_resume_names_the_setting_as_the_caller_gave_it(tmp_path, tiny_model_dir, monkeypatch):
    """The command names the setting that differs by its options (--top, no --batch-size), the Python API by its
    arguments (`output_format`, not run.json's `mode`)."""
    from elmo_transformers import ElmoEmbedder
    from elmo_transformers.errors import SettingDiffersError

    args = interrupted_run(monkeypatch, tmp_path, tiny_model_dir, "--top")
    folder = tmp_path / "out.hdf5.partial"
    for changed, words in [
        (["--all" if a == "--top" else a for a in args], "--top, now --all"),
        (args[:-2], "--batch-size 2, now no --batch-size"),
        ([*args, "--output-dtype", "float16"], "--output-dtype float32, now --output-dtype float16"),
    ]:
        assert one_line_error([*changed, "--resume"]) == (
            f"error: cannot resume {folder}: it was started with {words} (give the first run's options, or delete "
            "the folder to start over)"
        )
    with pytest.raises(SettingDiffersError, match="started with output_format='top', now output_format='all'"):
        ElmoEmbedder(str(tiny_model_dir)).embed_file(args[0], args[1], "all", 2, resume=True)
    run_json = folder / "run.json"
    recorded = run_json.read_text()
    for key in ("mode", "batch_size", "input_sha256"):  # a run.json's value of a million characters: cut short
        run_json.write_text(json.dumps({**json.loads(recorded), key: "x" * 10**6}))
        assert len(one_line_error([*args, "--resume"])) < 600
    run_json.write_text(recorded)
    assert main([*args, "--resume"]) == 0


@pytest.mark.slow
def test_resume_refuses_another_batch_size_or_window(tmp_path, tiny_model_dir, monkeypatch):
    args = interrupted_run(monkeypatch, tmp_path, tiny_model_dir, "--all")
    with pytest.raises(UserError, match="started with --batch-size 2, now --batch-size 3"):
        main([*args, "--resume", "--batch-size", "3"])
    with pytest.raises(UserError, match="started with --max-sentence-words 1000, now --max-sentence-words 5"):
        main([*args, "--resume", "--max-sentence-words", "5"])
    assert main([*args, "--resume"]) == 0


@pytest.mark.slow
def test_resume_refuses_other_weights_at_the_same_path(tmp_path, tiny, tiny_model_dir, monkeypatch):
    """The folder --model names is the same path, but its weights changed between the runs."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    args = interrupted_run(monkeypatch, tmp_path, model_dir, "--top")
    model, _ = tiny
    changed = type(model).from_pretrained(model_dir)
    with torch.no_grad():
        next(changed.parameters()).add_(0.01)
    changed.save_pretrained(model_dir)
    with pytest.raises(UserError, match="started with a model of weights_sha256 '"):
        main([*args, "--resume"])
    assert (tmp_path / "out.hdf5.partial").is_dir() and not (tmp_path / "out.hdf5").exists()


def test_byte_order_mark_is_not_part_of_the_first_word(tmp_path, tiny_model_dir):
    sentences, expected, _ = load_fixture("allennlp-tiny")
    source = tmp_path / "bom.txt"
    source.write_bytes(("\ufeff" + " ".join(sentences[0]) + "\n").encode("utf-8"))
    output = tmp_path / "bom.hdf5"
    assert main([str(source), str(output), "--model", str(tiny_model_dir), "--all"]) == 0
    arrays, index, _ = read_hdf5(output)
    assert index == {"Hello world !": "0"}
    assert_close_to_reference(arrays["0"], expected["sent_0_activations"], what="line after a BOM")


def test_a_lone_carriage_return_ends_a_line_and_crlf_is_one_break(tmp_path, tiny_model_dir):
    """Python's universal newlines, as docs/embedding-files.md says (`wc -l` counts one line less here)."""
    source = tmp_path / "cr.txt"
    source.write_bytes(b"a b\rc d e\r\nf\n")
    output = tmp_path / "cr.hdf5"
    assert main([str(source), str(output), "--model", str(tiny_model_dir), "--top", "--quiet"]) == 0
    with h5py.File(output, "r") as f:
        assert [f[str(i)].shape[0] for i in range(3)] == [2, 3, 1] and len(f) == 4


@pytest.fixture
def no_model_loading(monkeypatch):
    """Bad paths must be found before the work: loading the model would already be too late."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the bad path was found")

    monkeypatch.setattr(embedder_module, "load_model", refuse)


def test_bad_paths_are_found_before_the_work(tmp_path, tiny_model_dir, no_model_loading):
    source = tmp_path / "input.txt"
    source.write_text("a b\n")
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    model = ["--model", str(tiny_model_dir), "--top"]
    for overwrite in ([], ["--overwrite"]):
        message = one_line_error([str(source), str(tmp_path / "a-folder"), *model, *overwrite])
        assert "is a folder: give the path of the file to write" in message
    assert "is not an existing folder" in one_line_error([str(source), str(tmp_path / "a-file" / "out.hdf5"), *model])
    assert "is not an existing folder" in one_line_error([str(source), str(tmp_path / "no" / "out.hdf5"), *model])
    missing = one_line_error([str(tmp_path / "missing.txt"), str(tmp_path / "out.hdf5"), *model])
    assert "cannot read the input" in missing and "No such file" in missing
    assert "cannot read the input" in one_line_error([str(tmp_path), str(tmp_path / "out.hdf5"), *model])
    assert not list(tmp_path.glob("*.partial"))


def test_unwritable_output_folder_is_found_before_the_work(tmp_path, tiny_model_dir, no_model_loading, monkeypatch):
    """Root writes anywhere, so the refusal of the folder is simulated where the check meets the file system."""
    source = tmp_path / "input.txt"
    source.write_text("a b\n")

    def refuse(dir):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(output_paths.tempfile, "TemporaryFile", refuse)
    message = one_line_error([str(source), str(tmp_path / "o.hdf5"), "--model", str(tiny_model_dir), "--top"])
    assert message == f"error: {tmp_path / 'o.hdf5'}: cannot write into {tmp_path}: Permission denied"


def test_bad_model_is_one_line_and_leaves_nothing(tmp_path, capsys):
    source = tmp_path / "input.txt"
    source.write_text("a b\n")
    assert cli_main(["embed", str(source), str(tmp_path / "o.hdf5"), "--model", str(tmp_path / "nope"), "--top"]) == 1
    assert (
        capsys.readouterr().err == f"error: --model {tmp_path / 'nope'}: no such folder, and not a Hub repo id "
        "(NAME or OWNER/NAME)\n"
    )
    (tmp_path / "not-a-model").mkdir()
    assert "has no config.json" in one_line_error(
        [str(source), str(tmp_path / "o.hdf5"), "--model", str(tmp_path / "not-a-model"), "--top"]
    )
    assert not list(tmp_path.glob("*.partial"))


def lines_for_assembly():
    rng = np.random.default_rng(1)
    vocab = "the cat sat on a mat while dogs bark loudly".split()
    return [" ".join(rng.choice(vocab, size=rng.integers(1, 30))) for _ in range(300)]


def test_too_little_free_space_is_found_before_any_work_and_leaves_nothing(tmp_path, tiny_model_dir, monkeypatch):
    """OUTPUT's file is made whole (its blocks reserved) before the first batch: a disk without room for it is one
    line before any work, naming what is needed, and nothing is left to resume."""
    lines = lines_for_assembly()
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n")
    args = [str(source), str(tmp_path / "out.hdf5"), "--model", str(tiny_model_dir), "--all"]
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(partial_run.shutil, "disk_usage", lambda path: usage._replace(free=100_000))
    message = one_line_error(args)
    assert message.startswith(
        f"error: not enough disk space for output.hdf5 in {tmp_path / 'out.hdf5.partial'}: it needs about "
    ) and message.endswith("0.1 MB are free: free space there and rerun")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.txt"]


@pytest.mark.slow
def test_a_file_size_limit_at_the_start_is_one_line_not_a_crash(tmp_path, tiny_model_dir):
    """A file-size limit (RLIMIT_FSIZE, no root needed) stands in for a disk that fills while OUTPUT's file is
    made: h5py dies there with a segfault, in the child process that writes it; the command says so in one line
    and leaves nothing."""
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines_for_assembly()) + "\n")
    limit = 600_000  # the output: about 2 MB

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    output = tmp_path / "out.hdf5"
    done = subprocess.run(
        command("embed", source, output, "--model", tiny_model_dir, "--all"),
        env=command_env(OMP_NUM_THREADS="1"),
        preexec_fn=small_files,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: cannot make {tmp_path / 'out.hdf5.partial' / 'output.hdf5'}: ") and last.endswith(
        "(is the disk full, or a file-size limit reached?)"
    ), last
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.txt"]


def test_a_disk_full_while_writing_keeps_the_finished_lines_and_leaves_no_temporary_file(
    tmp_path, tiny, tiny_model_dir, monkeypatch
):
    """On a file system that cannot reserve blocks, the disk can fill while vectors are written: one line that says
    the finished lines are kept for --resume, no temporary file left, and --resume finishes the same file. The same
    where a long line's LSTM state cannot be saved."""
    lines = lines_for_assembly()[:40] + [" ".join(["w"] * 30)]
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n")
    output = tmp_path / "out.hdf5"
    args = [
        str(source),
        str(output),
        "--model",
        str(tiny_model_dir),
        "--top",
        "--batch-size",
        "4",
        "--max-sentence-words",
        "29",  # (the lines of up to 29 words in batches, the last of 30 in windows)
    ]
    writes = []
    original = os.pwrite

    def fill_up(fd, data, offset):
        writes.append(offset)
        if len(writes) > 12:  # 3 batches of 4 lines, one write a line with --top
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(fd, data, offset)

    monkeypatch.setattr(partial_run.os, "pwrite", fill_up)
    message = one_line_error(args)
    assert message == (
        f"error: writing {output} failed: No space left on device; the 12 finished lines are kept in "
        f"{output}.partial: free space there and rerun with --resume"
    )
    monkeypatch.undo()
    assert len(finished_lines(tmp_path / "out.hdf5.partial")) == 12
    saved = []

    def no_room(file, **arrays):
        saved.append(file)
        file.write(b"x")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(partial_run.np, "savez", no_room)  # the long line's first window
    assert "finished lines are kept" in one_line_error([*args, "--resume"])
    monkeypatch.undo()
    assert saved and not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert main([*args, "--resume"]) == 0
    reference = embed(
        tmp_path,
        tiny_model_dir,
        lines,
        "--top",
        "--batch-size",
        "4",
        "--max-sentence-words",
        "29",
        name="reference.hdf5",
    )
    got, want = read_hdf5(output), read_hdf5(reference)
    assert got[1] == want[1] and got[0].keys() == want[0].keys()
    for key in want[0]:
        assert_close_to_reference(got[0][key], want[0][key], what=f"line {key}")


def assert_same_output(output, reference, lines):
    """OUTPUT (HDF5) holds `lines` lines, indexed as in `reference`, each with the reference's vectors."""
    got, got_index, _ = read_hdf5(output)
    want, want_index, _ = read_hdf5(reference)
    assert got_index == want_index and got.keys() == want.keys() and len(got) == lines
    for key in want:
        assert_close_to_reference(got[key], want[key], what=f"line {key}")


@pytest.mark.slow
def test_two_processes_write_the_one_process_output_and_resume_any_run(
    tmp_path, tiny_model_dir, monkeypatch, one_thread
):
    """torchrun (accelerate's multi-process launcher is the same engine) with 2 CPU processes (gloo): every
    process takes every 2nd batch or long line; the result equals one process's. Here it finishes a run that one
    process started and was interrupted in."""
    lines = lines_for_assembly()
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n")
    flags = ["--all", "--batch-size", "16", "--max-sentence-words", "20"]  # 36 lines of 21-29 words go in windows
    reference = embed(tmp_path, tiny_model_dir, lines, *flags, name="reference.hdf5")
    output = tmp_path / "two.hdf5"
    args = [str(source), str(output), "--model", str(tiny_model_dir), *flags]
    interrupt_after(monkeypatch, "add_batch", 3)
    assert main(args) == 130
    monkeypatch.undo()
    partial = tmp_path / "two.hdf5.partial"
    ends = {}  # long line -> the end of its last window written
    for window in partial.glob("window-*.npz"):
        line, _, stop = map(int, window.stem.split("-")[1:])
        ends[line] = max(ends.get(line, 0), stop)
    kept = set(finished_lines(partial)) | {i for i, stop in ends.items() if stop == len(lines[i].split())}
    left = [i for i in range(len(lines)) if i not in kept]
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "elmo_transformers",
        "embed",
        *args,
        "--resume",
    ]
    done = subprocess.run(torchrun, env=command_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "shared by 2 processes" in done.stderr
    # One closing line, from the process that put OUTPUT in place, counting what both processes embedded.
    words = sum(len(lines[i].split()) for i in left)
    assert done.stderr.count(" words (") == 1, done.stderr[-3000:]
    assert re.search(
        rf"\n{words:,} words \({len(left):,} lines\) by 2 processes in [0-9.]+ s: start-up and load [0-9.]+ s, then "
        r"[0-9,]+ words/s \(this process: model [0-9.]+ s, tokenizing",
        done.stderr,
    ), done.stderr[-3000:]
    assert_same_output(output, reference, 300)


def test_processes_share_out_the_same_work_whichever_reads_the_journals_last(tmp_path, tiny, monkeypatch):
    """Two processes (threads here, each with its own rank; their barrier is accelerate's) share out the batches
    left to do. The second reads the journals late (a busy machine): it once shared out the shorter list left after
    the first had written batches, lines went to no process, and the run ended "lacks lines". Now every process
    reads the journals before any writes, and the output equals one process's."""
    import threading

    lines = lines_for_assembly()[:120]
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n")
    embedder = embedder_module.ElmoEmbedder(*tiny)
    reference = tmp_path / "one.hdf5"
    embed_file_module.embed_file(embedder, str(source), str(reference), batch_size=8, progress=False)
    barrier = threading.Barrier(2, timeout=120)

    class Rank:  # what embed_file uses of accelerate's PartialState
        def __init__(self, index):
            self.process_index, self.num_processes, self.is_main_process = index, 2, index == 0

        def wait_for_everyone(self):
            barrier.wait()

    ranks = threading.local()
    monkeypatch.setattr(embed_file_module, "process_state", lambda model=None: ranks.state)
    progress = partial_run.PartialRun.progress

    def late_for_rank_1(run):
        if ranks.state.process_index == 1:
            time.sleep(3)  # the other process runs on meanwhile, as far as it may
        return progress(run)

    monkeypatch.setattr(partial_run.PartialRun, "progress", late_for_rank_1)
    errors = []

    def process(index):
        ranks.state = Rank(index)
        try:
            embed_file_module.embed_file(
                embedder, str(source), str(tmp_path / "two.hdf5"), batch_size=8, progress=False
            )
        except Exception as e:  # reported below
            errors.append(f"rank {index}: {e}")
            barrier.abort()

    threads = [threading.Thread(target=process, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert_same_output(tmp_path / "two.hdf5", reference, 120)


def test_the_command_says_how_fast_it_went_unless_quiet(tmp_path, tiny_model_dir, capsys):
    """One closing line: where the time went, start-up apart from the work and its words/s, and how the model ran
    (its threads, dtype and runtime); --quiet prints nothing."""
    lines = lines_for_assembly()[:50]
    embed(tmp_path, tiny_model_dir, lines, "--top", "--threads", "1")
    last = capsys.readouterr().err.strip().splitlines()[-1]
    words = sum(len(line.split()) for line in lines)
    assert re.fullmatch(
        rf"{words:,} words \(50 lines\) in [0-9.]+ s: start-up and load [0-9.]+ s, then [0-9,]+ "
        r"words/s \(model [0-9.]+ s, tokenizing [0-9.]+ s and writing [0-9.]+ s beside it, waiting for "
        r"batches [0-9.]+ s\); 1 threads, float32, torch on cpu",
        last,
    ), last
    embed(tmp_path, tiny_model_dir, lines, "--top", "--quiet", name="quiet.hdf5")
    assert capsys.readouterr().err == ""


def test_the_closing_line_of_a_launched_run_counts_every_process_and_says_so():
    """Under torchrun the process that reports gives the words and lines of all processes (`embed_file.add_up`), and
    the parts of the time as its own."""
    from elmo_transformers.cli.embed import speed_line

    report = embed_file_module.Report(lines=300, words=4500, processes=2, load=1.0, model=6.0, total=10.0)
    report.dtype, report.runtime, report.device = "float32", "torch", "cpu"
    assert speed_line(report, 12.0) == (
        "4,500 words (300 lines) by 2 processes in 12.0 s: start-up and load 3.0 s, then 500 words/s (this process: "
        "model 6.0 s, tokenizing 0.0 s and writing 0.0 s beside it, waiting for batches 0.0 s); float32, torch on cpu"
    )


def peak_rss_mb(args):
    """Peak resident memory (MB) of the largest process of `elmo-transformers ARGS` (the HDF5 writer included)."""
    code = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "assert done.returncode == 0, done.stderr[-2000:]\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *command(*args)],
        env=command_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.split()[-1])


@pytest.mark.slow
def test_memory_and_output_grow_with_the_text_as_documented(tmp_path, tiny_model_dir):
    """The documented rule for one long line: the model's memory does not grow with it (windows), the text is held
    (up to about 4 bytes of memory for each byte of input) and stored once more in sentence_to_index."""
    sizes, peaks, outputs = [1, 41], [], []
    for megabytes in sizes:
        word = "x" * 10_000  # long words: few windows, so the text, not the model, is what grows
        source = tmp_path / f"{megabytes}.txt"
        source.write_text(" ".join([word] * (megabytes * 100)) + "\nshort line .\n")
        output = tmp_path / f"{megabytes}.hdf5"
        peaks.append(peak_rss_mb(["embed", source, output, "--model", tiny_model_dir, "--top"]))
        outputs.append(output.stat().st_size / 1e6)
        with h5py.File(output) as f:
            assert json.loads(f["sentence_to_index"][0]) == {
                source.read_text().splitlines()[0]: "0",
                "short line .": "1",
            }
    text_growth = (sizes[1] - sizes[0]) * 1.0001  # MB of text added
    assert peaks[1] - peaks[0] <= 5 * text_growth, (sizes, peaks)
    assert text_growth <= outputs[1] - outputs[0] <= 1.2 * text_growth, (sizes, outputs)


LINE_BYTES = {"parquet": 20, "hdf5": 1500}  # docs/embedding-files.md, "Memory": at most, a line beyond its text


@pytest.mark.slow
@pytest.mark.parametrize(("file_format", "more_lines"), [("parquet", 500_000), ("hdf5", 100_000)])
def test_memory_grows_with_the_number_of_lines_as_documented(tmp_path, tiny_model_dir, file_format, more_lines):
    """The documented rule for many short lines: batches of the same size whatever the input, so the peak grows only
    by what the run keeps for each line: with Parquet nothing (a file is read again as its batches are embedded:
    500,000 lines more stay within 20 bytes a line, where holding each line's text and tables took over 100); with
    HDF5 its layout and text."""
    sizes, peaks = [5_000, 5_000 + more_lines], []
    for lines in sizes:
        source = tmp_path / f"{lines}.txt"
        source.write_text("".join(f"w{i % 997} b c\n" for i in range(lines)))
        peaks.append(
            peak_rss_mb(
                [
                    "embed",
                    source,
                    tmp_path / f"{lines}.{file_format}",
                    "--model",
                    tiny_model_dir,
                    "--top",
                    "--format",
                    file_format,
                    "--quiet",
                ]
            )
        )
    text_growth = more_lines * len("w500 b c") / 2**20 if file_format == "hdf5" else 0  # (MiB, as peak_rss_mb)
    assert peaks[1] - peaks[0] <= text_growth + more_lines * LINE_BYTES[file_format] / 2**20, (sizes, peaks)


@pytest.mark.slow
def test_resume_refuses_a_changed_config_or_dtype_naming_it(tmp_path, tiny_model_dir, monkeypatch):
    """The folder --model names is the same path with the same weights, but its config.json changed between the
    runs (a clip value, the activation): the resumed run would mix two models. Another --dtype is named as such (not
    as other weights_sha256)."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    args = interrupted_run(monkeypatch, tmp_path, model_dir, "--top")
    with pytest.raises(UserError, match="started with --dtype float32, now --dtype bfloat16"):
        main([*args, "--resume", "--dtype", "bfloat16"])
    config_file = model_dir / "config.json"
    config = json.loads(config_file.read_text())
    for key, value in [("cell_clip", 1.5), ("activation", "tanh")]:
        config_file.write_text(json.dumps({**config, key: value}))
        message = one_line_error([*args, "--resume"])
        assert message == (
            f"error: cannot resume {tmp_path / 'out.hdf5.partial'}: it was started with "
            f"a model of config.{key} {config[key]!r}, now a model of config.{key} {value!r} (give the first "
            "run's options, or delete the folder to start over)"
        )
    config_file.write_text(json.dumps({**config, "dropout": 0.1}))  # only training reads it: the vectors are the same
    assert main([*args, "--resume"]) == 0


def test_run_json_that_is_cut_is_one_line(tmp_path, tiny_model_dir):
    source = tmp_path / "input.txt"
    source.write_text("a b\n")
    (tmp_path / "out.hdf5.partial").mkdir()
    (tmp_path / "out.hdf5.partial" / "run.json").write_text('{"input_sha256": "ab')
    message = one_line_error(
        [str(source), str(tmp_path / "out.hdf5"), "--model", str(tiny_model_dir), "--top", "--resume"]
    )
    assert message.startswith(
        f"error: cannot resume {tmp_path / 'out.hdf5.partial'}: its "
        f"{tmp_path / 'out.hdf5.partial' / 'run.json'} is not valid JSON ("
    )
    assert message.endswith("delete the folder to start over")


def test_paths_are_checked_before_torch_is_imported(tmp_path):
    """Through the console entry point: a missing input, an existing output or `-` as the output (HDF5 cannot go to
    stdout, and no file named "-" is written) are refused before torch and the model load."""
    (tmp_path / "input.txt").write_text("a b\n")
    (tmp_path / "exists.hdf5").write_text("")
    runs = [["missing.txt", "out.hdf5"], ["input.txt", "exists.hdf5"], ["input.txt", "-"]]
    code = (
        "import json, sys, elmo_transformers_cli\n"
        "status = [elmo_transformers_cli.main(['embed', *paths, '--top']) for paths in json.loads(sys.argv[1])]\n"
        "print(json.dumps({'status': status, 'torch': 'torch' in sys.modules}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(runs)],
        cwd=tmp_path,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(done.stdout) == {"status": [1, 1, 1], "torch": False}, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "error: cannot read the input missing.txt: No such file or directory",
        f"error: {tmp_path / 'exists.hdf5'} exists (pass --overwrite to replace it)",
        "error: the output - would be a file named '-' (HDF5 cannot be written to stdout): give the path of the file "
        "to write, ./- for a file of that name",
    ]
    assert sorted(os.listdir(tmp_path)) == ["exists.hdf5", "input.txt"]


def test_input_without_line_breaks_is_refused_at_the_line_limit(tmp_path, tiny_model_dir, monkeypatch):
    """`embed /dev/zero` read one endless line until MemoryError: NUL bytes are refused in the first piece read,
    text without line breaks at text_input.MAX_LINE_CHARS (made small here, as a file of 2**28 characters is)."""
    model = ["--model", str(tiny_model_dir), "--top"]
    assert one_line_error(["/dev/zero", str(tmp_path / "out.hdf5"), *model]) == (
        "error: /dev/zero, line 1: NUL characters in the text, so it is likely binary data (NUL bytes only), not "
        "text; convert it to UTF-8, e.g. with `iconv -f ENCODING -t UTF-8`"
    )
    monkeypatch.setattr(text_input, "MAX_LINE_CHARS", 1000)
    monkeypatch.setattr(text_input, "PIECE_CHARS", 64)
    source = tmp_path / "input.txt"
    source.write_text("a b\n" + "x" * 1000 + "\n" + "y" * 1001 + "\nc d\n")
    assert one_line_error([str(source), str(tmp_path / "out.hdf5"), *model]) == (
        f"error: {source}, line 3: longer than 1,000 characters without a line break (the limit of a line): is it a "
        "text file, one sentence or paragraph a line?"
    )
    assert not list(tmp_path.glob("out.hdf5*"))
    assert text_input.read_line(io.StringIO("x" * 1000 + "\nz"), "s", 1) == "x" * 1000 + "\n"  # the limit is read


def test_library_refusals_name_the_argument_not_the_flag(tmp_path, tiny, tiny_model_dir):
    """ElmoEmbedder.embed_file told a Python user to "pass --overwrite": the refusal is a typed error carrying the
    path, which the command words with its flag."""
    embedder = embedder_module.ElmoEmbedder(*tiny)
    source = tmp_path / "input.txt"
    source.write_text("a b\n")
    output = tmp_path / "out.hdf5"
    output.write_text("")
    with pytest.raises(OutputExistsError) as refused:
        embedder.embed_file(str(source), str(output), "top")
    assert (
        refused.value.value == str(output)
        and str(refused.value) == f"{output} exists (pass overwrite=True to replace it)"
    )
    (tmp_path / "out.hdf5.partial").mkdir()
    (tmp_path / "out.hdf5.partial" / "run.json").write_text("{}")
    with pytest.raises(UnfinishedRunError) as refused:
        embedder.embed_file(str(source), str(output), "top", overwrite=True)
    assert refused.value.value == f"{output}.partial" and str(refused.value) == (
        f"{output}.partial holds an interrupted run: pass resume=True to continue it, or delete it"
    )
    assert one_line_error([str(source), str(output), "--model", str(tiny_model_dir), "--top", "--overwrite"]).endswith(
        "interrupted run: pass --resume to continue it, or delete it"
    )


def test_a_run_that_fails_before_its_first_line_leaves_nothing(tmp_path, tiny_model_dir, monkeypatch):
    """A failure that is not an interruption, before any line is computed, leaves no run.json to be taken for an
    interrupted run; one after the first batch keeps the batch for --resume."""
    source = tmp_path / "input.txt"
    source.write_text("".join(" ".join(["w"] * n) + "\n" for n in range(1, 5)), encoding="utf-8")
    args = [str(source), str(tmp_path / "out.hdf5"), "--model", str(tiny_model_dir), "--top", "--batch-size", "2"]
    calls = []
    original = embedder_module.ElmoEmbedder.layers

    def fail_at_second(embedder, batch, *args):
        calls.append(len(batch))
        if len(calls) == 2:
            raise ValueError("the second batch fails")
        return original(embedder, batch, *args)

    monkeypatch.setattr(embedder_module.ElmoEmbedder, "layers", lambda *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(args)
    assert not list(tmp_path.glob("out.hdf5*"))
    monkeypatch.setattr(embedder_module.ElmoEmbedder, "layers", fail_at_second)
    with pytest.raises(ValueError, match="second batch"):
        main(args)
    assert finished_lines(tmp_path / "out.hdf5.partial") == [0, 1]


def test_ctrl_c_before_the_first_batch_keeps_nothing_and_says_so(tmp_path, tiny_model_dir, monkeypatch, capsys):
    """Interrupted before any line is finished: no folder that looks resumable, and no claim that lines are kept;
    after one batch: the count kept and where."""
    source = tmp_path / "input.txt"
    source.write_text("".join(" ".join(["w"] * n) + "\n" for n in range(1, 5)), encoding="utf-8")
    args = [str(source), str(tmp_path / "out.hdf5"), "--model", str(tiny_model_dir), "--top", "--batch-size", "2"]

    def ctrl_c(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(embedder_module.ElmoEmbedder, "layers", ctrl_c)
    assert main(args) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "interrupted by Ctrl+C (SIGINT) before any line was finished: nothing is kept"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.txt"]
    monkeypatch.undo()
    interrupt_after(monkeypatch, "add_batch", 1)
    assert main(args) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"interrupted by Ctrl+C (SIGINT): the 2 finished lines are kept in {tmp_path / 'out.hdf5.partial'}; rerun with "
        "--resume"
    )


def test_float16_output_is_the_float32_vectors_rounded_once(tmp_path, tiny_model_dir):
    """--output-dtype float16: every line's dataset is float16, each value the float32 one rounded to nearest (an
    error of at most half a float16 step: |x| * 2**-11, 2**-25 below float16's normal range; docs/embedding-files.md),
    the vectors in half the bytes."""
    lines = lines_for_assembly()[:40] + [""]
    full = read_hdf5(embed(tmp_path, tiny_model_dir, lines, "--all", "--quiet"))[0]
    half, index, dtypes = read_hdf5(
        embed(tmp_path, tiny_model_dir, lines, "--all", "--quiet", "--output-dtype", "float16", name="half.hdf5")
    )
    assert dtypes == {np.dtype(np.float16)} and sorted(half) == sorted(full)
    for key, vectors in half.items():
        want = full[key]
        assert vectors.shape == want.shape
        error = np.abs(vectors.astype(np.float32) - want)
        assert (error <= np.abs(want) * 2**-11 + 2**-25).all(), (key, float(error.max()))
    assert sum(v.nbytes for v in half.values()) * 2 == sum(v.nbytes for v in full.values())


@pytest.mark.slow
def test_resume_refuses_another_output_dtype_or_tokenizer(tmp_path, tiny_model_dir, monkeypatch):
    """The output dtype is part of what a run computes, and so is the tokenizer's casing (`do_lower_case`, in the
    model's identity): either changed is refused by name."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    args = interrupted_run(monkeypatch, tmp_path, model_dir, "--top", "--output-dtype", "float16")
    with pytest.raises(UserError, match="started with --output-dtype float16, now --output-dtype float32"):
        main([*args, "--resume", "--output-dtype", "float32"])
    settings = model_dir / "tokenizer_config.json"
    saved = settings.read_text()
    settings.write_text(json.dumps({**json.loads(saved), "do_lower_case": True}))
    with pytest.raises(
        UserError,
        match="started with a model of tokenizer.do_lower_case False, now a model of tokenizer.do_lower_case True",
    ):
        main([*args, "--resume", "--output-dtype", "float16"])
    settings.write_text(saved)
    assert main([*args, "--resume", "--output-dtype", "float16"]) == 0


def test_bfloat16_output_is_refused_naming_the_formats(tmp_path, tiny_model_dir):
    source = tmp_path / "input.txt"
    source.write_text("a b\n")
    with pytest.raises(SystemExit):  # argparse's choices
        main(
            [
                str(source),
                str(tmp_path / "o.hdf5"),
                "--model",
                str(tiny_model_dir),
                "--top",
                "--output-dtype",
                "bfloat16",
            ]
        )
    with pytest.raises(UserError, match="output_dtype 'bfloat16': neither HDF5 nor Parquet holds bfloat16"):
        embed_file_module.embed_file(
            embedder_module.ElmoEmbedder(tiny_model_dir),
            str(source),
            str(tmp_path / "o.hdf5"),
            "top",
            output_dtype="bfloat16",
        )
