"""Raw Chinese and Japanese text: ElmoTokenizer's `segmenter` (and `opencc_config`), on every path that reads raw
text, against the elmoformanylangs package's `sents2elmo` on the same segmentation (tests/fixtures/efml-cjk, made by
tests/fixtures/make_efml_fixture.py with the segmenters' own APIs); and the warnings for text the white-space split
cannot read."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from conftest import FIXTURES, command_env, run_isolated
from tolerance import assert_close_to_reference

import basic_tokenization_elmo
from configuration_elmo import ELMO_MODULES
from tokenization_elmo import ElmoTokenizer

CJK = FIXTURES / "efml-cjk"
RAW = json.loads((CJK / "raw.json").read_text(encoding="utf-8"))
EXPECTED = dict(np.load(CJK / "expected.npz"))
# The tokenizer settings of each fixture segmentation.
SETTINGS = {
    "jieba": {"segmenter": "jieba"},
    "fugashi": {"segmenter": "fugashi"},
    "sudachipy": {"segmenter": "sudachipy"},
    "jieba+s2t": {"segmenter": "jieba", "opencc_config": "s2t"},
}

# Words written down from each segmenter's documentation, not from our output: jieba's README (accurate mode;
# 杭研 is its example of a word found by the HMM, not in the dictionary), fugashi's README (unidic-lite), SudachiPy's
# documentation (mode A splits 外国人参政権 into 外国/人/参政/権), OpenCC's s2t (喜欢 -> 喜歡, 语言 -> 語言,
# 处理 -> 處理).
DOCUMENTED = [
    ("jieba", "我来到北京清华大学", ["我", "来到", "北京", "清华大学"]),
    ("jieba", "他来到了网易杭研大厦", ["他", "来到", "了", "网易", "杭研", "大厦"]),
    (
        "fugashi",
        "麩を用いた菓子は江戸時代からちらほら見られた。",
        ["麩", "を", "用い", "た", "菓子", "は", "江戸", "時代", "から", "ちらほら", "見", "られ", "た", "。"],
    ),
    ("fugashi", "私は自然言語処理が好きです。", ["私", "は", "自然", "言語", "処理", "が", "好き", "です", "。"]),
    ("sudachipy", "外国人参政権", ["外国", "人", "参政", "権"]),
    ("sudachipy", "私は自然言語処理が好きです。", ["私", "は", "自然", "言語", "処理", "が", "好き", "です", "。"]),
    ("jieba+s2t", "我喜欢自然语言处理。", ["我", "喜歡", "自然語言", "處理", "。"]),
]


@pytest.mark.parametrize("segmenter, text, words", DOCUMENTED)
def test_segmenters_give_their_documented_words(segmenter, text, words):
    tokenizer = ElmoTokenizer(**SETTINGS[segmenter])
    assert tokenizer.tokenize(text) == words
    assert tokenizer.split_words(f" {text}\n") == words  # white space around is no word
    found, spans = tokenizer.segment(text)
    if "s2t" not in segmenter:
        assert [text[s:e] for s, e in spans] == words


def test_fixture_words_are_the_segmenters():
    """Guards the fixture: the package's reference ran on the words the segmenters' own APIs gave."""
    for entry in RAW:
        assert ElmoTokenizer(**SETTINGS[entry["segmenter"]]).split_words(entry["text"]) == entry["words"]
    assert {entry["segmenter"] for entry in RAW} == set(SETTINGS)


def test_mask_and_spaces_survive_segmentation():
    tokenizer = ElmoTokenizer(segmenter="jieba")
    words, spans = tokenizer.segment("我来到<mask>清华大学 。")
    assert words == ["我", "来到", "<mask>", "清华大学", "。"]
    assert spans[2] == (3, 9)
    assert tokenizer.split_words("<mask><mask>") == ["<mask>", "<mask>"]
    assert tokenizer.split_words("") == [] and tokenizer.split_words("  \n") == []


def test_is_split_into_words_is_untouched():
    tokenizer = ElmoTokenizer(segmenter="jieba")
    one = tokenizer(["我来到北京清华大学"], is_split_into_words=True)["input_ids"]
    assert len(one) == 1  # one word, as given
    assert len(tokenizer("我来到北京清华大学")["input_ids"]) == 4


def test_the_setting_is_saved_and_refused_when_unknown(tmp_path):
    ElmoTokenizer(segmenter="fugashi", opencc_config="t2s").save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["segmenter"] == "fugashi" and config["opencc_config"] == "t2s"
    again = ElmoTokenizer.from_pretrained(tmp_path)
    assert (again.segmenter, again.opencc_config) == ("fugashi", "t2s")
    with pytest.raises(ValueError, match="segmenter must be one of whitespace, jieba, fugashi, sudachipy"):
        ElmoTokenizer(segmenter="mecab")
    with pytest.raises(ValueError, match="opencc_config 'x2y' is not an OpenCC conversion"):
        ElmoTokenizer(opencc_config="x2y")


# -- warnings -------------------------------------------------------------------------------------------------------


@pytest.fixture
def said(monkeypatch, caplog, capfd):
    """What the tokenizer warned (each warning shown once a process: the record is reset here)."""
    monkeypatch.setattr(basic_tokenization_elmo, "_warned", set())
    capfd.readouterr()

    def read():
        text = capfd.readouterr().err + "".join(r.getMessage() + "\n" for r in caplog.records)
        caplog.clear()
        return text

    return read


def test_unsegmented_text_warns_once_in_one_line(said):
    tokenizer = ElmoTokenizer()
    tokenizer("我喜欢自然语言处理。今天天气很好。")
    tokenizer("私は自然言語処理が好きです。とても")
    message = said()
    assert message.count("holds Chinese, Japanese or Thai characters") == 1, message
    line = next(line for line in message.splitlines() if "Thai characters" in line)
    assert "'我喜欢自然语言处理。今天天气很好。'" in line  # the text it is about
    assert "is_split_into_words=True" in line and "segmenter='jieba'" in line and "'fugashi'" in line
    assert "the default model: English" in line
    tokenizer("The quick brown fox jumps")
    tokenizer(["我喜欢自然语言处理。今天天气很好。"], is_split_into_words=True)
    assert "Thai characters" not in said()
    ElmoTokenizer(segmenter="jieba")("我喜欢自然语言处理。今天天气很好。")
    assert "Thai characters" not in said()


@pytest.mark.parametrize(
    "text", ["我", "我喜欢自然语言处理。", "今天天气很好。", "The quick brown fox 我们 jumps", "ありがとう", "สวัสดี"]
)
def test_text_in_a_script_written_without_spaces_warns_whatever_its_length(said, text):
    """The warning came only at 12 such characters in a row: the English model read "今天天气很好。" as one word
    silently (shape (3, 1, 256))."""
    assert ElmoTokenizer().tokenize(text) == text.split()  # the words are still white space's
    assert f"ElmoTokenizer splits text on white space, and {text[:20]!r} holds Chinese, Japanese or Thai" in said()


def test_the_byte_cut_says_how_many_characters_it_kept(said):
    word = "中华人民共和国全国人民代表大会常务委员会"  # 20 characters, 60 bytes
    ElmoTokenizer()([word], is_split_into_words=True)  # a new tokenizer: its rows are made anew
    message = said()
    assert "keeps 16 of its 20 characters ('中华人民共和国全国人民代表大会常')" in message, message


# -- the numbers: every raw-text path against the package -------------------------------------------------------


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The efml-cjk model converted by the command line once per fixture segmentation."""
    from elmo_transformers.cli import main

    out = {}
    for name, settings in SETTINGS.items():
        folder = tmp_path_factory.mktemp("cjk") / name.replace("+", "-")
        flags = ["--segmenter", settings["segmenter"]] + (
            ["--opencc", settings["opencc_config"]] if "opencc_config" in settings else []
        )
        assert main(["convert", "elmoformanylangs", str(CJK / "model"), *flags, "--output", str(folder)]) == 0
        out[name] = folder
    return out


def cases(name):
    return [(i, entry) for i, entry in enumerate(RAW) if entry["segmenter"] == name]


@pytest.mark.fidelity
@pytest.mark.parametrize("name", list(SETTINGS))
def test_raw_text_gives_the_package_vectors(folders, name):
    from modeling_elmo import ElmoModel

    from elmo_transformers import ElmoEmbedder

    folder = folders[name]
    model, tokenizer = ElmoModel.from_pretrained(folder).eval(), ElmoTokenizer.from_pretrained(folder)
    texts = [entry["text"] for _, entry in cases(name)]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        layers = torch.stack(model(**enc, output_hidden_states=True).hidden_states, dim=1).numpy()
    embedded = list(ElmoEmbedder(str(folder), device="cpu").embed_sentences(texts))
    for row, (i, entry) in enumerate(cases(name)):
        expected = EXPECTED[f"layers_{i}"]
        assert_close_to_reference(layers[row, :, : len(entry["words"])], expected, what=f"{name} {entry['text']}")
        assert_close_to_reference(embedded[row], expected, what=f"{name} embed_sentences {entry['text']}")


@pytest.mark.fidelity
def test_pipelines_read_raw_text_with_the_segmenter(folders):
    from transformers import pipeline

    from elmo_transformers import ElmoFeatureExtractionPipeline

    extractor = pipeline(
        "feature-extraction", model=str(folders["fugashi"]), pipeline_class=ElmoFeatureExtractionPipeline
    )
    for i, entry in cases("fugashi"):
        vectors = np.array(extractor(entry["text"]))[0]  # a fresh conversion's mix: the package's output_layer=-1
        assert_close_to_reference(vectors, EXPECTED[f"average_{i}"], what=f"pipeline {entry['text']}")


@pytest.mark.slow
@pytest.mark.fidelity
def test_embed_command_reads_a_raw_text_file(folders, tmp_path, run_cli):
    import h5py

    entries = cases("jieba")
    (tmp_path / "zh.txt").write_text("".join(entry["text"] + "\n" for _, entry in entries), encoding="utf-8")
    code, _, err = run_cli("embed", tmp_path / "zh.txt", tmp_path / "zh.hdf5", "--model", folders["jieba"], "--all")
    assert code == 0, err[-2000:]
    with h5py.File(tmp_path / "zh.hdf5") as f:
        for line, (i, entry) in enumerate(entries):
            assert_close_to_reference(f[str(line)][()], EXPECTED[f"layers_{i}"], what=f"embed {entry['text']}")


CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    for name in ELMO_MODULES + BLOCKED:
        sys.modules[name] = None  # only the folder's own copies of the model modules; the segmenter maybe missing
    from transformers import AutoModel, AutoTokenizer

    folder, texts, out_path = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    except ValueError as e:
        print("ValueError:", e, file=sys.stderr)
        sys.exit(3)
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    assert type(tokenizer).__module__.startswith("transformers_modules."), type(tokenizer).__module__
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    np.save(out_path, torch.stack(out.hidden_states, dim=1).numpy())
    """
).replace("ELMO_MODULES", repr(list(ELMO_MODULES)))


def run_child(folder, texts, tmp_path, blocked=()):
    return run_isolated(
        CHILD.replace("BLOCKED", repr(list(blocked))), folder, json.dumps(texts), tmp_path / "o.npy", folder=tmp_path
    )


@pytest.mark.slow
def test_the_setting_travels_with_the_folder_as_remote_code(folders, tmp_path):
    entries = cases("jieba")
    result = run_child(folders["jieba"], [entry["text"] for _, entry in entries], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    layers = np.load(tmp_path / "o.npy")
    for row, (i, entry) in enumerate(entries):
        assert_close_to_reference(
            layers[row, :, : len(entry["words"])], EXPECTED[f"layers_{i}"], what=f"remote code {entry['text']}"
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, blocked, extra",
    [("jieba", ["jieba"], "zh"), ("fugashi", ["fugashi"], "ja"), ("jieba+s2t", ["opencc"], "zh")],
)
def test_a_missing_segmenter_fails_at_load_naming_the_extra(folders, tmp_path, name, blocked, extra):
    result = run_child(folders[name], ["x"], tmp_path, blocked)
    assert result.returncode == 3, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    assert f'which is not installed: pip install "elmo-transformers[{extra}]"' in line, line


def test_token_classification_and_fill_mask_pipelines_use_the_segmenter(folders):
    """Entities are the segmenter's words at their places in the raw text; a <mask> between Chinese characters is a
    word of its own."""
    from conftest import SHIPPED
    from transformers import pipeline

    from elmo_transformers import ElmoFillMaskPipeline, ElmoTokenClassificationPipeline
    from modeling_elmo import ElmoForTokenClassification

    folder = folders["jieba"]
    model = ElmoForTokenClassification.from_pretrained(folder, num_labels=2, id2label={0: "A", 1: "B"}).eval()
    tagger = pipeline(
        "token-classification",
        model=model,
        tokenizer=ElmoTokenizer.from_pretrained(folder),
        pipeline_class=ElmoTokenClassificationPipeline,
        ignore_labels=[],
    )
    text = "他来到了网易杭研大厦"
    found = tagger(text)
    assert [(e["word"], e["start"], e["end"]) for e in found] == [
        ("他", 0, 1),
        ("来到", 1, 3),
        ("了", 3, 4),
        ("网易", 4, 6),
        ("杭研", 6, 8),
        ("大厦", 8, 10),
    ]
    jieba_tokenizer = ElmoTokenizer.from_pretrained(SHIPPED, segmenter="jieba")
    fill = pipeline("fill-mask", model=str(SHIPPED), tokenizer=jieba_tokenizer, pipeline_class=ElmoFillMaskPipeline)
    guesses = fill("我来到<mask>清华大学", top_k=3)
    assert len(guesses) == 3 and all(g["sequence"].startswith("我来到") for g in guesses), guesses


def test_a_segmenting_tokenizer_pickles_and_maps_over_a_dataset(folders):
    """datasets' map hashes and pickles the tokenizer: the segmenter lives outside it."""
    import pickle

    from datasets import Dataset

    tokenizer = ElmoTokenizer.from_pretrained(folders["fugashi"])
    assert pickle.loads(pickle.dumps(tokenizer)).tokenize("東京に住んでいます。") == tokenizer.tokenize(
        "東京に住んでいます。"
    )
    data = Dataset.from_dict({"text": ["私は自然言語処理が好きです。"]})
    data = data.map(lambda batch: tokenizer(batch["text"]), batched=True)
    assert len(data[0]["input_ids"]) == 9


def test_embed_file_windows_a_long_line_by_the_segmenter_words(folders, tmp_path):
    """A line longer than max_sentence_words is embedded window by window over the segmenter's words."""
    import h5py

    from elmo_transformers import ElmoEmbedder

    text = "我来到北京清华大学他来到了网易杭研大厦"
    (tmp_path / "in.txt").write_text(text + "\n", encoding="utf-8")
    words = ElmoTokenizer(segmenter="jieba").split_words(text)
    embedder = ElmoEmbedder(str(folders["jieba"]), device="cpu")
    embedder.embed_file(
        str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "all", max_sentence_words=3, progress=False
    )
    with h5py.File(tmp_path / "out.hdf5") as f:
        layers = f["0"][()]
    assert len(words) == 10 and layers.shape[:2] == (3, len(words))
    first = embedder.embed_sentence(words[:3])  # the first window starts from a zero state, as a sentence does
    assert_close_to_reference(layers[:, :3], first, what="first window")


def test_the_demo_page_finds_a_word_in_raw_chinese_sentences(folders):
    """The page's sense comparison splits each sentence with the tokenizer, so a Chinese word is found."""
    from elmo_transformers import ElmoEmbedder
    from elmo_transformers.demo.senses import word_uses

    uses = word_uses(ElmoEmbedder(folders["jieba"]), ["我来到北京清华大学", "他来到了网易杭研大厦"], "来到")
    assert uses.places == [(0, 1), (1, 1)]


def test_sudachipy_takes_a_text_longer_than_its_input_limit():
    """SudachiPy refuses one input over about 49 KB: the tokenizer hands it sentence-sized pieces."""
    tokenizer = ElmoTokenizer(segmenter="sudachipy")
    sentence = "東京に住んでいます。"
    assert tokenizer.split_words(sentence * 3000 + "\n" * 60000) == tokenizer.split_words(sentence) * 3000


# -- what the analysers cannot take: one rule for the three segmenters (basic_tokenization_elmo.NOT_TEXT) ------------

SEGMENTERS = ("jieba", "fugashi", "sudachipy")


@pytest.mark.parametrize("segmenter", SEGMENTERS)
@pytest.mark.parametrize(
    "text", ["東京\x00大阪 京都", "東京\x01大阪\x7f京都", "東京\ud800大阪\udfff京都", "東京\t大阪\x85京都"]
)
def test_control_characters_and_lone_surrogates_separate_words(segmenter, text):
    """A control character or a lone surrogate is a space to all three segmenters: NUL does not end fugashi's text
    nor become a word of jieba's or SudachiPy's, and a lone surrogate is no UnicodeEncodeError in fugashi or
    SudachiPy."""
    tokenizer = ElmoTokenizer(segmenter=segmenter)
    words, spans = tokenizer.segment(text)
    assert words == ["東京", "大阪", "京都"]
    assert [text[s:e] for s, e in spans] == words  # the spans are the raw text's


@pytest.mark.slow
@pytest.mark.parametrize("segmenter", SEGMENTERS)
def test_a_line_past_the_analysers_limit_is_segmented_in_pieces(segmenter):
    """One line of 460,000 characters without a sentence end reaches every segmenter in pieces of at most 4,000
    characters. It runs in a process of its own: whole, the line is a segmentation fault in fugashi (MeCab, exit
    139)."""
    code = (
        "import sys; from tokenization_elmo import ElmoTokenizer\n"
        f"words = ElmoTokenizer(segmenter={segmenter!r}).split_words('a' * 460000)\n"
        "print(len(''.join(words)), max(map(len, words)))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=command_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    kept, longest = map(int, done.stdout.split())
    assert kept == 460000 and longest <= 4000  # nothing lost
