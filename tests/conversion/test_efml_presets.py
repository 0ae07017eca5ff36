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
from elmo_transformers.conversion import archives, download, presets
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
    monkeypatch.setattr(download, "RETRY_WAIT", 0.0)
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


@pytest.mark.parametrize(
    "name, segmenter, path",
    [
        ("ja", "fugashi", "/repository/11/160.zip"),
        ("zh-hant", "jieba", "/repository/11/179.zip"),
        ("zh-hans", "jieba", "/zhs.model.tar.bz2"),
        ("en", "whitespace", "/repository/11/144.zip"),
    ],
)
def test_presets_convert_from_the_mirror_with_their_segmenter(mirror, tmp_path, name, segmenter, path):
    code, err = convert("--preset", name, "--output", tmp_path / "out")
    assert code == 0, err
    assert mirror.requests == [path]
    config = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert config["segmenter"] == segmenter and config["opencc_config"] is None
    card = (tmp_path / "out" / "README.md").read_text()
    assert path in card and f"segmenter={segmenter!r}" in card
    # the traditional model says which model fits simplified text, once at conversion and in its card
    note = (
        "zh-hant was trained on traditional characters (Wikipedia): for simplified-Chinese text use the preset "
        "zh-hans, or convert with opencc_config s2t (the tokenizer converts the text to traditional characters "
        "first)"
    )
    assert (note in card) == (name == "zh-hant") == (f"note: {note}\n" in err)
    assert convert(MODEL, "--output", tmp_path / "local")[0] == 0  # the same weights as a local conversion
    ours, local = load_file(tmp_path / "out" / "model.safetensors"), load_file(tmp_path / "local" / "model.safetensors")
    assert ours.keys() == local.keys() and all((ours[k] == local[k]).all() for k in ours)
    # A second conversion reuses the cache (no request), even offline.
    constants.HF_HUB_OFFLINE = True
    assert convert("--preset", name, "--output", tmp_path / "again")[0] == 0
    assert mirror.requests == [path]


def test_opencc_and_segmenter_flags(mirror, tmp_path):
    code, err = convert(
        "--preset", "zh-hant", "--opencc", "s2t", "--segmenter", "whitespace", "--output", tmp_path / "o"
    )
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
    assert archives.model_folder(["config.json", "char.dic", "word.dic", "encoder.pkl", "token_embedder.pkl"]) == ""
    assert archives.model_folder([f"zht.model/{n}" for n in archives.EFML_MODEL_FILES]) == "zht.model"
    with pytest.raises(archives.ConversionError, match="no ELMoForManyLangs model in it"):
        archives.model_folder(["a/b/config.json", "a/b/encoder.pkl"])


def test_a_folder_or_a_preset(tmp_path, capsys):
    for args in ([], [MODEL, "--preset", "ja"]):
        with pytest.raises(SystemExit) as exit_code:
            main(["convert", "elmoformanylangs", *map(str, args), "--output", str(tmp_path / "out")])
        assert exit_code.value.code == 2
        assert "give an ELMoForManyLangs model folder, or --preset NAME (not both)" in capsys.readouterr().err


# -- archives from outside: bounded, inside themselves, converting, or not kept --------------------------------------


def cache_of(tmp_path, name):
    return tmp_path / "hf-home" / "assets" / "elmo-transformers" / "elmoformanylangs" / name


def kept(tmp_path, name):
    """What preset `name` left in the cache (locks aside)."""
    cache = cache_of(tmp_path, name)
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) if cache.is_dir() else []


def serve_zip(tmp_path, number, members):
    """The mirror's 11/NUMBER.zip holding `members` ({name: bytes}) after the model's files in folder NUMBER."""
    with zipfile.ZipFile(tmp_path / "mirror" / "repository" / "11" / f"{number}.zip", "w", zipfile.ZIP_DEFLATED) as f:
        for file in sorted(MODEL.iterdir()):
            if f"{number}/{file.name}" not in members:
                f.write(file, f"{number}/{file.name}")
        for name, data in members.items():
            f.writestr(name, data)


def refused_in_one_line(tmp_path, name, fragment):
    code, err = convert("--preset", name, "--output", tmp_path / "out")
    line = err.strip()
    assert code == 1 and "\n" not in line and "Traceback" not in line and fragment in line, err
    assert not (tmp_path / "out").exists()
    assert kept(tmp_path, name) == []  # nothing of a refused archive stays cached
    return line


def test_an_archive_that_expands_past_what_model_files_do_is_refused_unpacked(mirror, tmp_path):
    """A 20 MB member deflated to about 20 KB (a 1.6 MB archive held 1.5 GB): refused before anything is unpacked."""
    serve_zip(tmp_path, 136, {"136/encoder.pkl": bytes(20_000_000)})
    line = refused_in_one_line(tmp_path, "ar", "its member '136/encoder.pkl' expands")
    assert f"over the {archives.MAX_EXPANSION} times a model file can" in line


def test_an_archive_with_two_members_of_one_name_is_refused(mirror, tmp_path):
    """A second 136/word.dic after the model's own: unpacked, one would replace the other. It is refused in one line
    (no raw FileExistsError), and nothing of it stays cached."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile's "Duplicate name"
        serve_zip(tmp_path, 136, {"136/word.dic": b"other words\n", "./136/word.dic": b"more words\n"})
    refused_in_one_line(tmp_path, "ar", "it holds two members named")


@pytest.mark.parametrize("member", ["../escaped.txt", "136/../../escaped.txt", "/tmp/escaped.txt", "C:/escaped.txt"])
def test_a_member_naming_a_path_outside_the_archive_is_refused(mirror, tmp_path, member):
    serve_zip(tmp_path, 136, {member: b"x"})
    refused_in_one_line(tmp_path, "ar", f"its member {member!r} names a path outside the archive")
    assert not list(tmp_path.rglob("escaped.txt"))


@pytest.mark.parametrize("link", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_links_in_an_archive_are_refused(mirror, tmp_path, link):
    """zhs.model.tar.bz2 whose char.dic is a link to a file of this machine."""
    with tarfile.open(tmp_path / "mirror" / "zhs.model.tar.bz2", "w:bz2") as archive:
        for file in sorted(MODEL.iterdir()):
            if file.name != "char.dic":
                archive.add(file, f"zhs.model/{file.name}")
        member = tarfile.TarInfo("zhs.model/char.dic")
        member.type, member.linkname = link, str(MODEL / "char.dic")
        archive.addfile(member)
    refused_in_one_line(tmp_path, "zh-hans", "its member 'zhs.model/char.dic' is a link or a device, not a file")


def test_a_config_naming_a_file_outside_the_archive_is_refused(mirror, tmp_path):
    """config.json naming an absolute config_path made the converter read that file of this machine (with the
    outside file's values when it was shaped like a model config)."""
    outside = tmp_path / "outside.json"
    outside.write_text((MODEL / "tiny_config.json").read_text())
    serve_zip(
        tmp_path, 136, {"136/config.json": json.dumps({"config_path": str(outside)}), "136/tiny_config.json": "{}"}
    )
    refused_in_one_line(tmp_path, "ar", f"names the model config {str(outside)!r}, an absolute path")


def test_a_model_that_does_not_convert_is_not_kept_and_a_fixed_mirror_is_downloaded_again(mirror, tmp_path):
    serve_zip(tmp_path, 136, {"136/encoder.pkl": (MODEL / "encoder.pkl").read_bytes()[:-100]})
    refused_in_one_line(tmp_path, "ar", "is not ELMoForManyLangs' Arabic model (cannot read")
    zip_model(tmp_path / "mirror" / "repository" / "11" / "136.zip", "136")  # the mirror fixed
    code, err = convert("--preset", "ar", "--output", tmp_path / "out")
    assert code == 0, err
    assert kept(tmp_path, "ar") == ["136.zip", "136.zip.source", "model"]
    assert sorted(p.name for p in (cache_of(tmp_path, "ar") / "model").iterdir()) == sorted(
        p.name for p in MODEL.iterdir()
    )  # only the model folder's files are unpacked


def test_an_archive_must_fit_in_the_space_free(mirror, tmp_path, monkeypatch):
    usage = shutil.disk_usage(tmp_path)
    small = usage._replace(free=1000)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: small)
    code, err = convert("--preset", "ja", "--output", tmp_path / "out")
    assert code == 1 and "bytes do not fit in the 1,000 free on the cache's disk" in err, err
    assert kept(tmp_path, "ja") == []
    # Downloaded, then unpacking does not fit: the archive is kept (it is the published one) for after the room made.
    sizes = iter([usage, small])
    monkeypatch.setattr(shutil, "disk_usage", lambda path: next(sizes, usage))
    code, err = convert("--preset", "ja", "--output", tmp_path / "out")
    assert code == 1 and "bytes and its disk has 1,000 free: make room, or set HF_HOME" in err, err
    assert kept(tmp_path, "ja") == ["160.zip", "160.zip.source"]
    assert convert("--preset", "ja", "--output", tmp_path / "out")[0] == 0
    assert mirror.requests == ["/repository/11/160.zip"]


def test_a_pinned_archive_must_be_the_published_file(mirror, tmp_path, monkeypatch):
    """Where the published archive's size and SHA-256 are known, another file is refused (none is known for
    ELMoForManyLangs' archives today: EFML_PRESETS pins none)."""
    import dataclasses
    import hashlib

    path = tmp_path / "mirror" / "repository" / "11" / "160.zip"
    published = dataclasses.replace(
        EFML_PRESETS["ja"], size=path.stat().st_size, sha256=hashlib.sha256(path.read_bytes()).hexdigest()
    )
    monkeypatch.setitem(EFML_PRESETS, "ja", dataclasses.replace(published, size=published.size + 1))
    refused_in_one_line(
        tmp_path, "ja", f"(it has {published.size:,} bytes, the published archive {published.size + 1:,})"
    )
    monkeypatch.setitem(EFML_PRESETS, "ja", dataclasses.replace(published, sha256="0" * 64))
    refused_in_one_line(tmp_path, "ja", f"its SHA-256 is {published.sha256}, the published archive's {'0' * 64}")
    monkeypatch.setitem(EFML_PRESETS, "ja", published)
    assert convert("--preset", "ja", "--output", tmp_path / "out")[0] == 0


def test_a_cached_model_folder_without_config_json_is_unpacked_again(mirror, tmp_path):
    """A model/ in the cache without config.json (here holding the archive's folder 179/) is replaced by the model
    folder's files."""
    shutil.copytree(MODEL, cache_of(tmp_path, "zh-hant") / "model" / "179")
    code, err = convert("--preset", "zh-hant", "--output", tmp_path / "out")
    assert code == 0, err
    assert sorted(p.name for p in (cache_of(tmp_path, "zh-hant") / "model").iterdir()) == sorted(
        p.name for p in MODEL.iterdir()
    )


def test_a_tar_that_expands_past_what_model_files_do_is_refused_unpacked(mirror, tmp_path):
    """A tar is compressed as a whole: its members together may expand at most MAX_EXPANSION times its size."""
    with tarfile.open(tmp_path / "mirror" / "zhs.model.tar.bz2", "w:bz2") as archive:
        archive.add(MODEL, "zhs.model")
        member = tarfile.TarInfo("zhs.model/padding.bin")
        member.size = 20_000_000
        archive.addfile(member, io.BytesIO(bytes(member.size)))
    refused_in_one_line(tmp_path, "zh-hans", f"over {archives.MAX_EXPANSION} times its size")
