"""The batches `embed` feeds the model (elmo_transformers/embedding/batches.py), the threads it runs on
(elmo_transformers/runtime/threads.py) and the settings its run.json records (elmo_transformers/embedding/settings.py):
the same inputs as the tokenizer's own, filled to a word budget, a thread count that fits the CPUs free to the
process, a resume refused where a setting that decides the output differs."""

import json
import os
import random
import shutil
import sys
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import interrupt_after

from elmo_transformers.cli.embed import main
from elmo_transformers.embedding.batches import LongLine, Plan, Writer, in_background
from elmo_transformers.errors import DataError, UserError
from elmo_transformers.runtime import threads


def test_embed_encodes_as_the_tokenizer_pads(tiny):
    """The batches embed feeds the model (`ElmoEmbedder.encode`) are the tokenizer's own padded encoding, their
    rows made once, by the tokenizer's one encoder."""
    from elmo_transformers import ElmoEmbedder

    model, tokenizer = tiny
    embedder = ElmoEmbedder(model, tokenizer)
    assert embedder.tokenizer is tokenizer.basic
    sentences = [["Hello", "world", "!"], [], ["x" * 60, "café", "東京", "Hello"], ["<S>", "</S>"]]
    for _ in range(2):  # the second time from the cache
        got = embedder.encode(sentences)
        want = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="np")
        assert got["input_ids"].dtype == np.int64 and got["input_ids"].shape == (4, 4, 50)
        np.testing.assert_array_equal(got["input_ids"], want["input_ids"])
        np.testing.assert_array_equal(got["attention_mask"], want["attention_mask"])
    assert embedder.encode([[]])["input_ids"].shape == (1, 0, 50)


def test_batches_fill_a_word_budget_in_length_order_or_hold_batch_size_lines():
    counts = [5, 1, 30, 2, 8, 8, 0, 3, 100]

    # by length: 6(0) 1(1) 3(2) 7(3) 0(5) 4(8) 5(8) 2(30), then line 8 (over max_words 50) alone
    def units(batch_size, max_words, batch_words):
        plan = Plan(Counter(c for c in counts if c <= max_words), batch_size, max_words, batch_words)
        read = plan.units(((i, f"line {i}", c) for i, c in enumerate(counts)), AssertionError)
        # (each batch handed over once its last line is read: in the order of their last lines)
        return [unit.line if isinstance(unit, LongLine) else unit.lines.tolist() for unit in read]

    assert units(None, 50, 16) == [[2], [0, 4], [5], [6, 1, 3, 7], 8]  # 1 x 30, 2 x 8, 1 x 8, 4 x 3
    assert units(3, 50, None) == [[5, 2], [6, 1, 3], [7, 0, 4], 8]
    budget = units(None, 50, 16)
    assert all(len(b) * max(counts[i] for i in b) <= 16 or len(b) == 1 for b in budget if isinstance(b, list))


def test_a_plan_made_from_the_word_counts_alone_cuts_the_batches_of_a_whole_sort():
    """The batches handed over as the lines are read are those of sorting every line by length (stable) and cutting
    the sorted list greedily by the budget (`reference`), for random lengths and budgets; each with its texts."""

    def reference(counts, batch_size, max_words, batch_words):
        batches, batch = [], []
        for i in sorted((i for i, c in enumerate(counts) if c <= max_words), key=lambda i: counts[i]):
            if batch and (
                len(batch) >= batch_size if batch_size else (len(batch) + 1) * max(counts[i], 1) > batch_words
            ):
                batches.append(batch)
                batch = []
            batch.append(i)
        return sorted(batches + [batch] * bool(batch)), sorted(i for i, c in enumerate(counts) if c > max_words)

    rng = random.Random(0)
    for _ in range(200):
        counts = [rng.choice([rng.randint(0, 80), 0, 1, 3]) for _ in range(rng.randint(0, 150))]
        batch_size, max_words = rng.choice([None, 1, 3, 16]), rng.choice([10, 50, 1000])
        batch_words = rng.choice([1, 16, 100, 4096])
        plan = Plan(Counter(c for c in counts if c <= max_words), batch_size, max_words, batch_words)
        units = list(plan.units(((i, f"line {i}", c) for i, c in enumerate(counts)), AssertionError))
        batches = [unit for unit in units if not isinstance(unit, LongLine)]
        want = reference(counts, batch_size, max_words, batch_words)
        assert (
            sorted(b.lines.tolist() for b in batches),
            sorted(u.line for u in units if isinstance(u, LongLine)),
        ) == want
        assert len(plan) == len(want[0])
        for batch in batches:
            assert batch.texts == [f"line {i}" for i in batch.lines] and batch.counts.tolist() == [
                counts[i] for i in batch.lines
            ]


def test_a_plan_refuses_lines_that_are_not_those_it_was_made_for():
    plan = Plan(Counter([1, 1, 2]), None, 50, 16)
    with pytest.raises(DataError, match="changed"):
        list(plan.units([(0, "a", 1), (1, "b", 1), (2, "c", 1)], lambda: DataError("changed")))  # a third 1-word line
    with pytest.raises(DataError, match="changed"):
        list(plan.units([(0, "a", 1), (1, "b c", 2)], lambda: DataError("changed")))  # a line missing


def test_threads_fit_the_cpus_free_to_the_process(monkeypatch, tmp_path):
    cpu_max = tmp_path / "cpu.max"
    monkeypatch.setattr(threads, "CGROUP_CPU_MAX", str(cpu_max))
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(8)))
    cases = [  # (cpu.max, load average, threads)
        (None, 0.0, 8),  # no cgroup file: the affinity mask
        ("max 100000", 0.0, 8),
        ("200000 100000", 0.0, 2),  # a quota of 2 CPUs
        ("150000 100000", 0.0, 1),
        (None, 8.0, 4),  # half the machine busy: half of our 8 CPUs
        (None, 40.0, 1),  # busier than the machine: one thread, never none
        ("400000 100000", 8.0, 4),
    ]
    for quota, load, want in cases:
        if quota is None:
            cpu_max.unlink(missing_ok=True)
        else:
            cpu_max.write_text(quota + "\n")
        monkeypatch.setattr(threads, "other_load", lambda load=load: load)
        assert threads.free_cpus() == want, (quota, load)


def test_the_load_is_what_runs_now_not_the_last_minutes_average(monkeypatch, tmp_path):
    """/proc/loadavg's runnable tasks, less the reader: a busy minute that has ended (a high load average) leaves
    an idle machine's CPUs free; without /proc, the load average."""
    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(threads, "PROC_LOADAVG", str(loadavg))
    loadavg.write_text("3.90 2.10 1.00 1/80 3410\n")  # the last minute was busy, nothing else runs now
    assert threads.other_load(interval=0) == 0
    loadavg.write_text("0.10 0.10 0.10 5/85 3580\n")  # four others started a second ago
    assert threads.other_load(interval=0) == 4
    loadavg.unlink()
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (2.5, 1.0, 1.0))
    assert threads.other_load(interval=0) == 2.5


def test_onnxruntime_takes_the_free_cpus_where_nothing_names_a_count(monkeypatch):
    """An exported model in a process without torch and without OMP_NUM_THREADS runs on the CPUs free to it, not on
    onnxruntime's default (every physical core, also those the machine gives to others)."""
    from elmo_transformers.runtime import onnx as runner

    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "free_cpus", lambda: 3)
    assert runner.intra_op_threads() == 3
    monkeypatch.setattr(threads, "affinity_cpus", lambda: 8)  # (a count above them is capped: tests/runtime)
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert runner.intra_op_threads() == 5


def test_background_errors_reach_the_caller():
    def failing():
        yield 1
        raise ValueError("the producer fails")

    with in_background(failing()) as items, pytest.raises(ValueError, match="producer fails"):
        assert list(items) == [1]
    written = []

    def write(item):
        if item == 2:
            raise OSError(28, "No space left on device")
        written.append(item)

    with pytest.raises(OSError, match="No space"):
        with Writer(write) as writer:
            for item in range(100):
                writer.put(item)
    assert written == [0, 1]


def interrupted(monkeypatch, tmp_path, model_dir):
    """An embed run of 12 lines stopped by Ctrl-C after its first batch; returns its arguments."""
    source = tmp_path / "input.txt"
    source.write_text("".join(" ".join(["w"] * n) + "\n" for n in range(1, 13)), encoding="utf-8")
    args = [str(source), str(tmp_path / "out.hdf5"), "--model", str(model_dir), "--top", "--batch-size", "2"]
    interrupt_after(monkeypatch, "add_batch", 1)
    assert main(args) == 130
    monkeypatch.undo()
    return args


@pytest.mark.parametrize("first, then", [("jieba", "whitespace"), ("whitespace", "jieba")])
def test_resume_refuses_a_changed_segmenter_either_way(tmp_path, tiny_model_dir, monkeypatch, first, then):
    """run.json records the segmenter whichever it is, and every key either run has is compared: jieba ->
    whitespace (or the reverse) is refused, not resumed into two tokenizations in one output."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    config_file = model_dir / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "segmenter": first}))
    args = interrupted(monkeypatch, tmp_path, model_dir)
    config_file.write_text(json.dumps({**config, "segmenter": then}))
    with pytest.raises(
        UserError,
        match=f"started with a model of tokenizer.segmenter '{first}', now a model of tokenizer.segmenter '{then}'",
    ):
        main([*args, "--resume"])


def test_resume_refuses_a_setting_the_first_run_recorded_and_this_one_lacks(tmp_path, tiny_model_dir, monkeypatch):
    args = interrupted(monkeypatch, tmp_path, tiny_model_dir)
    run_json = tmp_path / "out.hdf5.partial" / "run.json"
    settings = json.loads(run_json.read_text())
    settings["tokenizer"]["lowercase"] = True  # a rule a later version would record
    run_json.write_text(json.dumps(settings))
    with pytest.raises(
        UserError, match="started with a model of tokenizer.lowercase True, now a model without tokenizer.lowercase"
    ):
        main([*args, "--resume"])


def test_run_json_records_what_decides_the_output_and_a_resume_may_change_the_rest(
    tmp_path, tiny_model_dir, monkeypatch
):
    """run.json holds the settings that decide the output (EmbedSettings' compared fields) and the model's identity
    beside them; --threads and --quiet change no number, so they are not recorded and a resume may change them."""
    import hashlib

    args = interrupted(monkeypatch, tmp_path, tiny_model_dir)
    recorded = json.loads((tmp_path / "out.hdf5.partial" / "run.json").read_text())
    text = "".join(" ".join(["w"] * n) + "\n" for n in range(1, 13)).encode()
    assert {key: recorded[key] for key in list(recorded)[:8]} == {
        "file_format": "hdf5",
        "input_sha256": hashlib.sha256(text).hexdigest(),
        "mode": "top",
        "output_dtype": "float32",
        "model": os.path.abspath(tiny_model_dir),
        "batch_size": 2,
        "batch_words": None,
        "max_sentence_words": 1000,
    }
    assert list(recorded)[8:] == ["dtype", "weights_sha256", "config", "tokenizer"]
    assert main([*args, "--resume", "--threads", "1", "--quiet"]) == 0
    assert not (tmp_path / "out.hdf5.partial").exists() and (tmp_path / "out.hdf5").exists()


def test_settings_differences_name_the_key_inside_an_object_and_a_key_either_side_lacks():
    from elmo_transformers.embedding.settings import EmbedSettings

    settings = EmbedSettings(mode="top", identity={"dtype": "float32", "config": {"cell_clip": 3.0}})
    recorded = {**settings.record(), "config": {"cell_clip": 4.0}, "lowercase": True}
    assert settings.differences(recorded) == [("config.cell_clip", 4.0, 3.0), ("lowercase", True, None)]
    assert EmbedSettings(threads=1) == EmbedSettings(threads=2, progress=False)  # (changing no number)
    assert EmbedSettings().record()["identity"] is None
    with pytest.raises(UserError, match="batch_size 0: must be a positive int"):
        EmbedSettings(batch_size=0)


def test_threads_of_the_command_are_restored_after_it(tmp_path, tiny_model_dir):
    source = tmp_path / "input.txt"
    source.write_text("a b\n")
    before = torch.get_num_threads()
    assert (
        main(
            [
                str(source),
                str(tmp_path / "o.hdf5"),
                "--model",
                str(tiny_model_dir),
                "--top",
                "--threads",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    assert torch.get_num_threads() == before


def test_a_journal_entry_cut_short_is_not_counted_nor_run_on_from(tmp_path):
    """A crash in the middle of a journal append leaves "12 1" without its line break: those lines are not finished,
    and the next entry must not make "12 116 17" of it."""
    from elmo_transformers.embedding.partial_run import PartialRun

    run = PartialRun(str(tmp_path / "out.hdf5"))
    os.makedirs(run.folder)
    (tmp_path / "out.hdf5.partial" / "done-0.txt").write_text("3 4\n12 1")
    assert list(run.journal_entries()) == [[3, 4]] and run.progress().finished_lines() == 2
    run.open_journal(0)
    run.note_done([16, 17])
    run.close()
    assert (tmp_path / "out.hdf5.partial" / "done-0.txt").read_text() == "3 4\n16 17\n"
    assert list(run.journal_entries()) == [[3, 4], [16, 17]] and run.progress().finished_lines() == 4
