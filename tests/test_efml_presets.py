"""`elmo-transformers convert elmoformanylangs --preset NAME` against a loopback mirror serving archives in the
published layout (the NLPL repository's 11/NNN.zip, HIT-SCIR's zhs.model.tar.bz2), holding the efml-cjk fixture's
model with its files at the top or in one folder."""

import functools
import http.server
import io
import json
import shutil
import sys
import tarfile
import threading
import zipfile
from contextlib import redirect_stderr, redirect_stdout

import pytest
from conftest import FIXTURES
from huggingface_hub import constants
from safetensors.numpy import load_file

from elmo_transformers.cli import main
from elmo_transformers.conversion import presets
from elmo_transformers.conversion.presets import EFML_PRESETS

MODEL = FIXTURES / "efml-cjk" / "model"


def zip_model(path, folder):
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(MODEL.iterdir()):
            archive.write(file, f"{folder}/{file.name}" if folder else file.name)


class Mirror(http.server.SimpleHTTPRequestHandler):
    requests = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).requests.append(self.path)
        super().do_GET()


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """The published layout at a loopback URL set as both base URLs; the cache in tmp_path, online."""
    root = tmp_path / "mirror"
    (root / "repository" / "11").mkdir(parents=True)
    zip_model(root / "repository" / "11" / "160.zip", "")  # files at the top
    zip_model(root / "repository" / "11" / "179.zip", "179")  # files in one folder
    zip_model(root / "repository" / "11" / "144.zip", "en.model")
    with tarfile.open(root / "zhs.model.tar.bz2", "w:bz2") as archive:
        archive.add(MODEL, "zhs.model")
    (root / "repository" / "11" / "136.zip").write_bytes(b"<html><body>Please sign in</body></html>")
    handler = type("Handler", (Mirror,), {"requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv(presets.NLPL_URL_VARIABLE, f"{url}/repository/")
    monkeypatch.setenv(presets.HITSCIR_URL_VARIABLE, url)
    monkeypatch.setattr("huggingface_hub.utils._cache_assets.HF_ASSETS_CACHE", str(tmp_path / "hf-home" / "assets"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(presets, "RETRY_WAIT", 0.0)
    monkeypatch.setitem(sys.modules["huggingface_hub.utils.tqdm"].progress_bar_states, "_global", False)
    yield handler
    server.shutdown()


def convert(*args):
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["convert", "elmoformanylangs", *map(str, args)])
    return code, err.getvalue()


def test_every_language_of_the_readme_has_a_preset():
    """ELMoForManyLangs' README lists 44 NLPL archives, 11/136.zip to 11/179.zip, and the simplified-Chinese one."""
    numbers = sorted(int(p.path[3:-4]) for p in EFML_PRESETS.values() if p.host == "nlpl")
    assert numbers == list(range(136, 180))
    assert EFML_PRESETS["ja"].path == "11/160.zip" and EFML_PRESETS["ja"].segmenter == "fugashi"
    assert EFML_PRESETS["zh-hant"].path == "11/179.zip" and EFML_PRESETS["zh-hant"].segmenter == "jieba"
    assert EFML_PRESETS["zh-hans"].segmenter == "jieba" and EFML_PRESETS["en"].segmenter == "whitespace"


@pytest.mark.parametrize("name, segmenter, path", [("ja", "fugashi", "/repository/11/160.zip"),
                                                   ("zh-hant", "jieba", "/repository/11/179.zip"),
                                                   ("zh-hans", "jieba", "/zhs.model.tar.bz2"),
                                                   ("en", "whitespace", "/repository/11/144.zip")])
def test_presets_convert_from_the_mirror_with_their_segmenter(mirror, tmp_path, name, segmenter, path):
    code, err = convert("--preset", name, "--output", tmp_path / "out")
    assert code == 0, err
    assert mirror.requests == [path]
    config = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert config["segmenter"] == segmenter and config["opencc_config"] is None
    card = (tmp_path / "out" / "README.md").read_text()
    assert path in card and f"segmenter={segmenter!r}" in card
    # the traditional model says which model fits simplified text, once at conversion and in its card
    assert (presets.TRADITIONAL_NOTE in card) == (name == "zh-hant") == (f"note: {presets.TRADITIONAL_NOTE}" in err)
    assert convert(MODEL, "--output", tmp_path / "local")[0] == 0  # the same weights as a local conversion
    ours, local = load_file(tmp_path / "out" / "model.safetensors"), load_file(tmp_path / "local" / "model.safetensors")
    assert ours.keys() == local.keys() and all((ours[k] == local[k]).all() for k in ours)
    # A second conversion reuses the cache (no request), even offline.
    constants.HF_HUB_OFFLINE = True
    assert convert("--preset", name, "--output", tmp_path / "again")[0] == 0
    assert mirror.requests == [path]


def test_opencc_and_segmenter_flags(mirror, tmp_path):
    code, err = convert("--preset", "zh-hant", "--opencc", "s2t", "--segmenter", "whitespace", "--output",
                        tmp_path / "o")
    assert code == 0, err
    config = json.loads((tmp_path / "o" / "tokenizer_config.json").read_text())
    assert (config["segmenter"], config["opencc_config"]) == ("whitespace", "s2t")


def test_what_is_not_an_archive_is_refused_in_one_line(mirror, tmp_path):
    code, err = convert("--preset", "ar", "--output", tmp_path / "out")
    line = err.strip()
    assert code == 1 and "\n" not in line and "Traceback" not in line, err
    assert "/repository/11/136.zip is not ELMoForManyLangs' Arabic model (not a readable zip or tar archive" in line
    assert line.endswith(f"set {presets.NLPL_URL_VARIABLE} ({presets.HITSCIR_URL_VARIABLE} for zh-hans) to a mirror")
    assert not (tmp_path / "out").exists()
    cache = tmp_path / "hf-home" / "assets" / "elmo-transformers" / "elmoformanylangs" / "ar"
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []  # nothing half-made is kept


def test_a_missing_file_on_the_mirror_is_named(mirror, tmp_path):
    shutil.rmtree(tmp_path / "mirror" / "repository")
    code, err = convert("--preset", "ja", "--output", tmp_path / "out")
    assert code == 1 and "HTTP 404" in err and presets.NLPL_URL_VARIABLE in err, err


def test_archive_layouts(tmp_path):
    assert presets.model_folder(["config.json", "char.dic", "word.dic", "encoder.pkl", "token_embedder.pkl"]) == ""
    assert presets.model_folder([f"zht.model/{n}" for n in presets.MODEL_FILES]) == "zht.model"
    with pytest.raises(presets.ConversionError, match="no ELMoForManyLangs model in it"):
        presets.model_folder(["a/b/config.json", "a/b/encoder.pkl"])


def test_a_folder_or_a_preset(tmp_path, capsys):
    for args in ([], [MODEL, "--preset", "ja"]):
        with pytest.raises(SystemExit) as exit_code:
            main(["convert", "elmoformanylangs", *map(str, args), "--output", str(tmp_path / "out")])
        assert exit_code.value.code == 2
        assert "give an ELMoForManyLangs model folder, or --preset NAME (not both)" in capsys.readouterr().err
