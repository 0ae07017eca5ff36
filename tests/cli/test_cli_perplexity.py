"""`elmo-transformers perplexity` off the happy path: the output rule, bad numbers, a model without softmax."""

import errno
import gzip
import json
import shutil

import pytest
from conftest import one_line, run

import basic_tokenization_elmo
from elmo_transformers import ElmoFillMaskPipeline, output_paths


def test_perplexity_of_a_model_without_softmax_says_what_to_use(text, tiny_model_dir, capsys):
    one_line(
        *run(["perplexity", text, "--model", tiny_model_dir], capsys),
        "has no language-model softmax",
        "the shipped model (omit --model)",
        "elmo-transformers pretrain",
    )


def test_perplexity_refuses_a_vocab_txt_of_another_size(text, lm_dir, tmp_path, capsys):
    model = shutil.copytree(lm_dir, tmp_path / "lm")
    with open(model / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra\n")
    one_line(*run(["perplexity", text, "--model", model], capsys), "word vocabulary has", "restore that vocab.txt")
    from transformers import pipeline

    with pytest.raises(ValueError, match="word vocabulary has"):
        pipeline("fill-mask", model=str(model), pipeline_class=ElmoFillMaskPipeline)


def test_perplexity_output_follows_the_output_rule_and_is_written_whole(text, lm_dir, tmp_path, capsys, monkeypatch):
    model = shutil.copytree(lm_dir, tmp_path / "lm")
    config = (model / "config.json").read_bytes()
    for output, relation in [
        (text, "is the input"),
        (model / "config.json", "is inside the input"),
        (tmp_path, "contains the input"),
    ]:
        one_line(*run(["perplexity", text, "--model", model, "--output", output], capsys), relation)
    assert (model / "config.json").read_bytes() == config
    one_line(
        *run(["perplexity", text, "--model", model, "--output", tmp_path / "no" / "f.json"], capsys),
        "is not an existing folder",
    )

    def refuse(dir):  # root writes anywhere, so the refusal is simulated where the check meets the file system
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as patch:
        patch.setattr(output_paths.tempfile, "TemporaryFile", refuse)
        patch.setattr("transformers.AutoConfig.from_pretrained", lambda *a, **k: pytest.fail("checked after loading"))
        one_line(
            *run(["perplexity", text, "--model", model, "--output", tmp_path / "f.json"], capsys),
            f"--output {tmp_path / 'f.json'}: cannot write into {tmp_path}: Permission denied",
        )

    figures = tmp_path / "figures.json"
    assert run(["perplexity", text, "--model", model, "--output", figures], capsys)[0] == 0
    first = json.loads(figures.read_text())
    assert first[str(text)]["words"] == 11 and first[str(text)]["perplexity"] > 1

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    one_line(
        *run(["perplexity", text, "--model", model, "--output", figures], capsys),
        f"{figures} exists (pass --overwrite to replace it)",
    )
    monkeypatch.setattr(output_paths.os, "fsync", full_disk)
    one_line(
        *run(["perplexity", text, "--model", model, "--output", figures, "--max-words", "3", "--overwrite"], capsys),
        "No space left on device",
    )
    assert json.loads(figures.read_text()) == first  # the earlier figures, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures.json", "lm", "text.txt"]  # no temporary file


@pytest.mark.parametrize("flags", [["--max-words", "0"], ["--max-words", "-5"], ["--batch-size", "0"]])
def test_perplexity_bad_numbers_are_usage_errors(flags, text, capsys):
    code, err = run(["perplexity", text, *flags], capsys)
    assert code == 2 and f"{flags[0]} must be at least 1" in err


def test_perplexity_checks_the_model_before_reading_the_data_and_shows_progress(
    text, tiny_model_dir, lm_dir, capsys, monkeypatch
):
    import elmo_transformers.training.data as data

    with monkeypatch.context() as patch:
        patch.setattr(data, "load_splits", lambda *a, **k: pytest.fail("the data was read before the model check"))
        one_line(*run(["perplexity", text, "--model", tiny_model_dir], capsys), "has no language-model softmax")
    code, err = run(["perplexity", text, "--model", lm_dir], capsys)
    assert code == 0 and f"{text}: 100%" in err, err  # the scoring's progress bar, named by the file


def test_a_cut_or_damaged_compressed_file_or_a_folder_is_one_line(lm_dir, tmp_path, capsys):
    """A .txt.gz cut short (an interrupted download) and one that is not gzip at all: named as such, not an EOFError
    traceback or gzip's "Not a gzipped file" without the file's name; a folder is not "no such file"."""
    whole = gzip.compress("".join(f"line {n} of the text .\n" for n in range(5000)).encode())
    cut, damaged = tmp_path / "cut.txt.gz", tmp_path / "damaged.txt.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    damaged.write_text("not gzip\n")
    one_line(
        *run(["perplexity", cut, "--model", lm_dir], capsys),
        f"{cut}: cannot decompress it (Compressed file ended before the end-of-stream marker",
        "restore it",
    )
    one_line(*run(["perplexity", damaged, "--model", lm_dir], capsys), f"{damaged}: cannot decompress it")
    one_line(*run(["perplexity", tmp_path, "--model", lm_dir], capsys), f"{tmp_path} is a folder: give the text files")


@pytest.mark.slow
def test_perplexity_refuses_an_export_of_a_language_model(text, lm_dir, tmp_path, capsys):
    """An exported language model keeps lm_vocab_size in its config.json, but its graph holds the biLM only: the
    loader's ModelFolder says it is no language model, and perplexity refuses it in one line."""
    export = tmp_path / "lm-onnx"
    assert run(["export", "onnx", "--model", lm_dir, "--output", export], capsys)[0] == 0
    assert json.loads((export / "config.json").read_text())["lm_vocab_size"] is not None
    one_line(*run(["perplexity", text, "--model", export], capsys), "has no language-model softmax")


def test_perplexity_splits_raw_text_with_the_models_tokenizer(lm_dir, tmp_path, capsys, caplog, monkeypatch):
    """On raw Chinese, a language model whose tokenizer segments with jieba scored "1 words" (windows made by
    str.split()); the white-space model is warned about the unsegmented text."""
    corpus = tmp_path / "zh.txt"
    corpus.write_text("我喜欢自然语言处理。\n", encoding="utf-8")
    model = shutil.copytree(lm_dir, tmp_path / "lm-jieba")
    settings = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**settings, "segmenter": "jieba"}))
    code, err = run(["perplexity", corpus, "--model", model, "--output", tmp_path / "jieba.json"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "jieba.json").read_text())[str(corpus)]["words"] == 5  # 我/喜欢/自然语言/处理/。
    assert "white space" not in err + caplog.text
    monkeypatch.setattr(basic_tokenization_elmo, "_warned", set())  # each warning is shown once a process
    code, err = run(["perplexity", corpus, "--model", lm_dir, "--output", tmp_path / "whitespace.json"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "whitespace.json").read_text())[str(corpus)]["words"] == 1
    assert "ElmoTokenizer splits text on white space, and '我喜欢自然语言处理。' holds Chinese" in caplog.text
