"""AllenNLP's published ELMo models by name (`elmo-transformers convert allennlp --preset NAME`): where their files
are, what they must hold, and a download cache a second conversion reuses.

The files live under one base URL, AllenNLP's bucket, or `ELMO_TRANSFORMERS_ALLENNLP_URL` (a mirror, or a folder
served inside an air-gapped site). Downloads go through huggingface_hub's HTTP client (its offline mode:
`HF_HUB_OFFLINE=1` refuses them) into huggingface_hub's assets cache,
`$HF_HOME/assets/elmo-transformers/allennlp/PRESET/` (`HF_ASSETS_CACHE` moves it), under huggingface_hub's lock per
file, so that concurrent runs download a file once. A download is written under a temporary name of its own and
gets its cached name only once it is complete and is the file the preset publishes (the options equal the published
ones, the weights and softmax hold that model's datasets, the vocabulary is UTF-8 text): an interrupted or cut
download, or what a mirror or an error page serves in its place, is never cached (and a temporary file a killed run
left is removed by the next). `NAME.source` beside a cached file records the URL it came from, for the model card.

huggingface_hub's `http_get` is not used: it resets its count of retries whenever bytes arrive, so a server that
cuts every transfer at the same byte is retried forever. Here the metadata request waits `HF_HUB_ETAG_TIMEOUT`
seconds and the transfer `HF_HUB_DOWNLOAD_TIMEOUT` seconds for data (huggingface_hub's variables), a transfer
bringing under `MIN_BYTES` in that time has stalled, and `ATTEMPTS` attempts in a row that bring no new byte end the
download.
"""

import glob
import importlib
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import huggingface_hub
from huggingface_hub import ModelCard, ModelCardData, cached_assets_path, constants
from huggingface_hub.errors import OfflineModeIsEnabled
from huggingface_hub.utils import WeakFileLock, get_session, tqdm

from ..errors import ConversionError, first_line

# huggingface_hub's HTTP client, whose errors its session raises: httpx2 from huggingface_hub 2.0 on, httpx before.
httpx = importlib.import_module("httpx2" if int(huggingface_hub.__version__.split(".")[0]) >= 2 else "httpx")

BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
BUCKET_URLS = (BASE_URL, "https://allennlp.s3.amazonaws.com/models/elmo")  # AllenNLP 0.x's and 1.x/2.x's spellings
URL_VARIABLE = "ELMO_TRANSFORMERS_ALLENNLP_URL"
LICENSE = "apache-2.0"  # AllenNLP publishes its code and these ELMo weights under the Apache License 2.0
ATTEMPTS = 5  # attempts in a row without a new byte before a download gives up (huggingface_hub's http_get: 5)
MIN_BYTES = 1024  # a transfer bringing fewer bytes in HF_HUB_DOWNLOAD_TIMEOUT seconds has stalled
RETRY_WAIT = 1.0  # seconds between attempts, as http_get waits
FILE_KEYS = ("options", "weights", "softmax", "vocab")
# The argument of conversion.allennlp.convert (the command's flag) that takes each file when it is given by hand.
ARGUMENTS = {"options": "options_path", "weights": "weights_path", "softmax": "softmax_path", "vocab": "vocab_path"}


def published_options(lstm_dim, projection_dim, n_highway):
    """The options.json AllenNLP published with a model: all share the char CNN, two LSTM layers, clipping at 3 and
    skip connections; they differ in the LSTM's sizes and the number of highway layers."""
    return {
        "lstm": {"dim": lstm_dim, "projection_dim": projection_dim, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
                 "use_skip_connections": True},
        "char_cnn": {"activation": "relu", "embedding": {"dim": 16},
                     "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                     "n_highway": n_highway, "n_characters": 262, "max_characters_per_token": 50},
    }


@dataclass(frozen=True)
class Preset:
    """A published model: its folder under the base URL, the files' common stem, its options (what the downloaded
    files are checked against), and the language model's softmax weights and vocabulary (paths under the base URL)
    where AllenNLP published them."""

    folder: str
    stem: str
    options: dict
    softmax: str | None = None
    vocab: str | None = None

    def files(self, with_lm):
        names = {"options": f"{self.folder}/{self.stem}_options.json",
                 "weights": f"{self.folder}/{self.stem}_weights.hdf5"}
        if with_lm:
            names.update(softmax=self.softmax, vocab=self.vocab)
        return names


PRESETS = {
    "small": Preset("2x1024_128_2048cnn_1xhighway", "elmo_2x1024_128_2048cnn_1xhighway",
                    published_options(1024, 128, 1)),
    "medium": Preset("2x2048_256_2048cnn_1xhighway", "elmo_2x2048_256_2048cnn_1xhighway",
                     published_options(2048, 256, 1)),
    "original": Preset(
        "2x4096_512_2048cnn_2xhighway", "elmo_2x4096_512_2048cnn_2xhighway", published_options(4096, 512, 2),
        softmax="2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_softmax_weights.hdf5",
        vocab="vocab-2016-09-10.txt",
    ),
    "original-5.5b": Preset(
        "2x4096_512_2048cnn_2xhighway_5.5B", "elmo_2x4096_512_2048cnn_2xhighway_5.5B", published_options(4096, 512, 2),
        softmax="2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B_softmax_weights.hdf5",
        vocab="2x4096_512_2048cnn_2xhighway_5.5B/tf_checkpoint/vocab-enwiki-news-500000.txt",
    ),
}


def manual(key):
    """What to do when file `key` of a preset cannot be downloaded (the error names `ARGUMENTS[key]`)."""
    return (f"download it yourself and give its path as {{{ARGUMENTS[key]}}}, or set {URL_VARIABLE} to a mirror of "
            "AllenNLP's files")


def base_url():
    return os.environ.get(URL_VARIABLE, BASE_URL).rstrip("/")


def fetch_preset(name, with_lm=False):
    """{"options", "weights"[, "softmax", "vocab"]: local path} of preset `name`, from the cache or downloaded; and
    {the same keys: the URL each file came from}. ConversionError in one line when a file cannot be had."""
    preset = PRESETS[name]
    if with_lm and preset.softmax is None:
        with_lm_presets = ", ".join(n for n, p in PRESETS.items() if p.softmax)
        raise ConversionError(f"AllenNLP published no language model for {name!r} (only for {with_lm_presets}): "
                              "convert it without the language model")
    fetched = {key: fetch_file(name, key) for key in preset.files(with_lm)}
    return {key: path for key, (path, _) in fetched.items()}, {key: url for key, (_, url) in fetched.items()}


def fetch_file(name, key):
    """(local path, the URL it came from) of file `key` ("options", "weights", "softmax" or "vocab") of preset
    `name`, from the cache or downloaded from the base URL and checked."""
    from .allennlp import check_published_file  # torch and transformers: not before `convert --help` has answered

    preset = PRESETS[name]
    url = f"{base_url()}/{preset.files(with_lm=True)[key]}"
    cache = cached_assets_path(library_name="elmo-transformers", namespace="allennlp", subfolder=name)

    def check(path):
        try:
            check_published_file(key, path, preset.options)
        except ConversionError as e:
            raise ConversionError(f"{url} is not the {key} file AllenNLP published for {name!r} ({first_line(e)}): "
                                  f"the server sent something else; {manual(key)}",
                                  arguments=[ARGUMENTS[key]]) from None

    try:
        return download(url, cache / os.path.basename(url), check)
    except DownloadError as e:
        raise ConversionError(f"{e}: {manual(key)}", arguments=[ARGUMENTS[key]]) from None


def fetch_url(url, argument):
    """The local copy of one of AllenNLP's published files given by its URL, under AllenNLP's bucket (either spelling)
    or the base URL: what AllenNLP code hands to ElmoEmbedder. Fetched as its preset's file (the cache, the mirror and
    the checks apply); ConversionError naming `argument` (the caller's parameter that held the URL) for any other
    URL."""
    for name, preset in PRESETS.items():
        for key, path in preset.files(with_lm=preset.softmax is not None).items():
            if url in {f"{base}/{path}" for base in (*BUCKET_URLS, base_url())}:
                return fetch_file(name, key)[0]
    raise ConversionError(f"{url} is not one of the files AllenNLP published for ELMo (those of the presets "
                          f"{', '.join(PRESETS)} under {BASE_URL}): download it yourself and give its local path as "
                          f"{argument}")


def download(url, path, check):
    """(`path`, the URL its copy came from): downloaded from `url` and passed through `check` (which raises for a
    file that is not the expected one) unless a copy is there already (only checked, complete files get this name).
    One run at a time downloads a given file; the others wait and reuse its copy."""
    source = path.with_name(path.name + ".source")
    with WeakFileLock(path.with_name(path.name + ".lock")):
        if path.is_file() and source.is_file():
            return path, source.read_text(encoding="utf-8").strip()
        # Under the lock no other run writes this file: a temporary file of it (or of its .source) is a killed
        # run's (kill -9).
        for stale in path.parent.glob(f"{glob.escape(path.name)}.*.incomplete"):
            stale.unlink(missing_ok=True)
        partial = temporary_file(path)
        try:
            with open(partial, "r+b") as file:
                fetch(url, file, path.name)
            check(partial)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)  # an interrupted or refused download leaves nothing behind
        record = temporary_file(source)  # after the file: a file without its record is downloaded again
        record.write_text(url, encoding="utf-8")
        os.replace(record, source)
    return path, url


def temporary_file(path):
    """A new empty file beside `path` whose name no other run uses and no run takes for a complete file, created
    with the permissions of any file this process creates (the umask's; mkstemp's 0600 would hide a cache in a
    group-shared HF_HOME from the group, which huggingface_hub's own downloads do not)."""
    name = path.with_name(f"{path.name}.{secrets.token_hex(8)}.incomplete")
    os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    return name


class DownloadError(Exception):
    """A file cannot be downloaded: the message names the URL and the last failure; `fetch_file` adds what to do."""


def fetch(url, file, name):
    """Write `url`'s body into the empty `file`, resuming a cut transfer where the server allows it, or
    DownloadError naming the URL and the last failure."""
    session, size, furthest, failures = get_session(), None, 0, 0
    while True:
        try:
            if size is None:
                size = content_length(session, url)
                free = shutil.disk_usage(os.path.dirname(file.name)).free
                if size > free:
                    raise DownloadError(f"cannot download {url}: its {size:,} bytes do not fit in the {free:,} free "
                                        "on the cache's disk (make room, or set HF_HOME to a larger disk)")
            with tqdm(total=size, unit="B", unit_scale=True, desc=name) as bar:
                transfer(session, url, file, size, bar)
            return
        except OfflineModeIsEnabled:
            raise DownloadError(f"cannot download {url}: HF_HUB_OFFLINE is set (unset it)") from None
        except (httpx.TransportError, httpx.HTTPStatusError, ConnectionError, TimeoutError) as e:
            reason = failure(e, size is None)
            if isinstance(e, httpx.HTTPStatusError) and e.response.status_code not in (408, 429, 500, 502, 503, 504):
                raise DownloadError(f"cannot download {url} ({reason})") from None
            got = file.tell()
            failures = 0 if got > furthest and not isinstance(e, TimeoutError) else failures + 1
            furthest = max(furthest, got)
            if failures >= ATTEMPTS:
                raise DownloadError(f"cannot download {url} ({reason}; {ATTEMPTS} attempts in a row brought no new "
                                    "data)") from None
            time.sleep(RETRY_WAIT)


def content_length(session, url):
    """The size of `url`'s file, from a HEAD request (huggingface_hub's metadata request and its timeout)."""
    head = session.head(url, follow_redirects=True, timeout=constants.HF_HUB_ETAG_TIMEOUT)
    head.raise_for_status()
    try:
        return int(head.headers["Content-Length"])
    except (KeyError, ValueError):
        raise DownloadError(f"cannot download {url}: the server gives no file size (Content-Length)") from None


def failure(error, metadata):
    """What went wrong in an attempt, in words (which timeout, for a timeout)."""
    if isinstance(error, httpx.TimeoutException):
        variable = "HF_HUB_ETAG_TIMEOUT" if metadata else "HF_HUB_DOWNLOAD_TIMEOUT"
        return f"no answer within {getattr(constants, variable)} s, set by {variable}"
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code} {error.response.reason_phrase}"
    return first_line(error)


def transfer(session, url, file, size, bar):
    """One GET of `url` into `file`, from the bytes `file` already holds where the server honours a range; raises
    ConnectionError when the transfer ends early, TimeoutError when it stalls (under MIN_BYTES a
    HF_HUB_DOWNLOAD_TIMEOUT)."""
    have, window = file.tell(), constants.HF_HUB_DOWNLOAD_TIMEOUT
    headers = {"Range": f"bytes={have}-"} if have else {}
    with session.stream("GET", url, headers=headers, follow_redirects=True, timeout=window) as response:
        response.raise_for_status()
        if response.status_code != 206 or not response.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
            file.seek(0)  # the whole file again (a server that ignores ranges)
            file.truncate()
            if response.status_code == 206:
                raise ConnectionError("the server answered another range than the one asked for")
        start, got = time.monotonic(), 0
        for chunk in response.iter_bytes():
            file.write(chunk)
            bar.update(file.tell() - bar.n)
            if file.tell() > size:
                raise ConnectionError(f"the server sent more than the {size:,} bytes it announced")
            got += len(chunk)
            if time.monotonic() - start >= window:
                if got < MIN_BYTES:
                    raise TimeoutError(f"the transfer stalled: under {MIN_BYTES:,} bytes in {window} s, set by "
                                       "HF_HUB_DOWNLOAD_TIMEOUT")
                start, got = time.monotonic(), 0
    if file.tell() != size:
        raise ConnectionError(f"the transfer ended at byte {file.tell():,} of {size:,}")


def preset_card(urls):
    """The converted folder's model card: where its files came from and their licence."""
    sources = "\n".join(f"- {key}: <{url}>" for key, url in urls.items())
    metadata = ModelCardData(license=LICENSE, library_name="transformers", tags=["elmo", "custom_code"])
    return ModelCard(
        f"---\n{metadata.to_yaml()}\n---\n\n"
        "# ELMo converted from AllenNLP's published files\n\n"
        "The biLM of Peters et al. (2018), *Deep contextualized word representations*, converted by "
        "`elmo-transformers convert allennlp --preset` from:\n\n"
        f"{sources}\n\nAllenNLP publishes these weights under the Apache License 2.0 (`{LICENSE}`).\n"
    )


# -- ELMoForManyLangs' published models (`convert elmoformanylangs --preset NAME`) -----------------------------------

NLPL_URL = "http://vectors.nlpl.eu/repository"  # the NLPL vectors repository, where ELMoForManyLangs' README links
NLPL_URL_VARIABLE = "ELMO_TRANSFORMERS_NLPL_URL"
HITSCIR_URL = "http://39.96.43.154"  # HIT-SCIR's own server: the simplified-Chinese model (its README's link)
HITSCIR_URL_VARIABLE = "ELMO_TRANSFORMERS_HITSCIR_URL"
MODEL_FILES = ("config.json", "token_embedder.pkl", "encoder.pkl", "word.dic")  # char.dic too where char_dim > 0


@dataclass(frozen=True)
class EfmlPreset:
    """One of ELMoForManyLangs' models: its language, its archive (the path below the base URL, and which base:
    "nlpl" or "hitscir"), how the text it was trained on was split into words (the tokenizer's `segmenter`), and the
    published archive's size and SHA-256 where they are known (a download that differs is refused)."""

    language: str
    path: str
    segmenter: str = "whitespace"
    host: str = "nlpl"
    size: int | None = None
    sha256: str | None = None

    def url(self):
        variable, default = {"nlpl": (NLPL_URL_VARIABLE, NLPL_URL), "hitscir": (HITSCIR_URL_VARIABLE, HITSCIR_URL)}[
            self.host]
        return f"{os.environ.get(variable, default).rstrip('/')}/{self.path}"


def _nlpl(number, language, segmenter="whitespace"):
    return EfmlPreset(language, f"11/{number}.zip", segmenter)


# ELMoForManyLangs' README, "Downloads": ISO 639 codes (UD's). Trained on the CoNLL 2018 shared task's raw text,
# segmented into UD words; Chinese and Japanese are written without spaces: jieba and UniDic short units (fugashi,
# research/segmentation_f1.py) segment them. The traditional-Chinese model (Wikipedia) is zh-hant; the
# simplified one (Chinese Gigaword's Xinhua part), HIT-SCIR's zhs.model, is zh-hans. Neither the README nor the NLPL
# repository's pages publish the archives' sizes or SHA-256: none is pinned (`EfmlPreset.size`, `sha256`).
EFML_PRESETS = {
    "ar": _nlpl(136, "Arabic"), "bg": _nlpl(137, "Bulgarian"), "ca": _nlpl(138, "Catalan"),
    "cs": _nlpl(139, "Czech"), "cu": _nlpl(140, "Old Church Slavonic"), "da": _nlpl(141, "Danish"),
    "de": _nlpl(142, "German"), "el": _nlpl(143, "Greek"), "en": _nlpl(144, "English"), "es": _nlpl(145, "Spanish"),
    "et": _nlpl(146, "Estonian"), "eu": _nlpl(147, "Basque"), "fa": _nlpl(148, "Persian"),
    "fi": _nlpl(149, "Finnish"), "fr": _nlpl(150, "French"), "ga": _nlpl(151, "Irish"), "gl": _nlpl(152, "Galician"),
    "grc": _nlpl(153, "Ancient Greek"), "he": _nlpl(154, "Hebrew"), "hi": _nlpl(155, "Hindi"),
    "hr": _nlpl(156, "Croatian"), "hu": _nlpl(157, "Hungarian"), "id": _nlpl(158, "Indonesian"),
    "it": _nlpl(159, "Italian"), "ja": _nlpl(160, "Japanese", "fugashi"), "ko": _nlpl(161, "Korean"),
    "la": _nlpl(162, "Latin"), "lv": _nlpl(163, "Latvian"), "nl": _nlpl(164, "Dutch"),
    "nb": _nlpl(165, "Norwegian Bokmål"), "nn": _nlpl(166, "Norwegian Nynorsk"), "pl": _nlpl(167, "Polish"),
    "pt": _nlpl(168, "Portuguese"), "ro": _nlpl(169, "Romanian"), "ru": _nlpl(170, "Russian"),
    "sk": _nlpl(171, "Slovak"), "sl": _nlpl(172, "Slovene"), "sv": _nlpl(173, "Swedish"), "tr": _nlpl(174, "Turkish"),
    "ug": _nlpl(175, "Uyghur"), "uk": _nlpl(176, "Ukrainian"), "ur": _nlpl(177, "Urdu"),
    "vi": _nlpl(178, "Vietnamese"), "zh-hant": _nlpl(179, "Chinese (traditional)", "jieba"),
    "zh-hans": EfmlPreset("Chinese (simplified)", "zhs.model.tar.bz2", "jieba", host="hitscir"),
}
# Said when zh-hant is converted without OpenCC, and in its card: its character vocabulary is traditional.
TRADITIONAL_NOTE = ("zh-hant was trained on traditional characters (Wikipedia): for simplified-Chinese text use "
                    "--preset zh-hans, or convert with --opencc s2t (the tokenizer's opencc_config)")
EFML_MANUAL = (f"download the archive yourself, unpack it and give its folder, or set {NLPL_URL_VARIABLE} "
               f"({HITSCIR_URL_VARIABLE} for zh-hans) to a mirror")


# What an archive may hold before anything is unpacked: a member (zip) or the whole (tar) expands to at most this many
# times its compressed size (published weights deflate to about 0.93 of their size, word lists to about 0.4), and
# what is unpacked, member by member and in all, must fit in the space free in the cache.
MAX_EXPANSION = 100


@dataclass(frozen=True)
class Member:
    """An archive member: its name, its size unpacked, its compressed size (None in a tar, compressed as a whole)
    and whether it is a regular file (not a folder, link or device)."""

    name: str
    size: int
    compressed: int | None
    is_file: bool
    is_dir: bool


def archive_members(path):
    """The `Member`s of the zip or tar archive `path`, every zip member's CRC checked; ConversionError for anything
    else."""
    import stat
    import tarfile
    import zipfile

    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
                if bad is not None:
                    raise ConversionError(f"{bad} is damaged in the archive")
                return [Member(i.filename, i.file_size, i.compress_size,
                               not i.is_dir() and not stat.S_ISLNK(i.external_attr >> 16), i.is_dir())
                        for i in archive.infolist()]
        with tarfile.open(path) as archive:
            return [Member(m.name, m.size, None, m.isfile(), m.isdir()) for m in archive.getmembers()]
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile) as e:
        raise ConversionError(f"not a readable zip or tar archive ({first_line(e)})") from None


def check_archive(path, members):
    """ConversionError unless every member of archive `path` names a path inside it, is a file or a folder, and
    expands at most MAX_EXPANSION times."""
    for member in members:
        parts = member.name.replace("\\", "/").split("/")
        if member.name.startswith(("/", "\\")) or ":" in parts[0] or ".." in parts:
            raise ConversionError(f"its member {member.name!r} names a path outside the archive")
        if not member.is_file and not member.is_dir:
            raise ConversionError(f"its member {member.name!r} is a link or a device, not a file")
        if member.compressed is not None and member.size > MAX_EXPANSION * max(member.compressed, 1):
            raise ConversionError(f"its member {member.name!r} expands {member.size / max(member.compressed, 1):,.0f} "
                                  f"times ({member.size:,} bytes), over the {MAX_EXPANSION} times a model file can")
    total = sum(m.size for m in members)
    if total > MAX_EXPANSION * os.path.getsize(path):
        raise ConversionError(f"it expands to {total:,} bytes, over {MAX_EXPANSION} times its size")


def model_folder(names):
    """The folder inside an archive (listed by `names`) that holds an ELMoForManyLangs model: the top or one folder
    down; ConversionError naming what is missing otherwise."""
    names = {name.strip("/").removeprefix("./") for name in names}
    for folder in sorted({os.path.dirname(n) for n in names if os.path.basename(n) == "encoder.pkl"}, key=len):
        if folder.count("/") <= 1 and all(os.path.join(folder, f) in names for f in MODEL_FILES):
            return folder
    raise ConversionError(f"no ELMoForManyLangs model in it (a folder holding {', '.join(MODEL_FILES)})")


def model_members(members):
    """The members of the model folder (`model_folder`) inside an archive: the files a conversion reads."""
    folder = model_folder(m.name for m in members)
    return [m for m in members if m.is_file and os.path.dirname(m.name.strip("/").removeprefix("./")) == folder]


def check_pin(preset, path):
    """ConversionError when the archive `path` is not the published file (`preset.size`, `preset.sha256`)."""
    import hashlib

    size = os.path.getsize(path)
    if preset.size is not None and size != preset.size:
        raise ConversionError(f"it has {size:,} bytes, the published archive {preset.size:,}")
    if preset.sha256 is not None:
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        if digest != preset.sha256:
            raise ConversionError(f"its SHA-256 is {digest}, the published archive's {preset.sha256}")


def unpack(archive, members, folder):
    """Write `members` (regular files of `archive`, one folder deep at most) into `folder` by their file names."""
    import tarfile
    import zipfile

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as f:
            for member in members:
                with f.open(member.name) as source, open(folder / os.path.basename(member.name), "xb") as target:
                    shutil.copyfileobj(source, target)
        return
    with tarfile.open(archive) as f:
        for member in members:
            with f.extractfile(member.name) as source, open(folder / os.path.basename(member.name), "xb") as target:
                shutil.copyfileobj(source, target)


def fetch_efml_preset(name):
    """(the unpacked model folder, the URL its archive came from) of ELMoForManyLangs' model `name`, from the cache
    or downloaded (the checked, locked, resumable `download`) and unpacked once under the same lock: only the model
    folder's files, from an archive whose members all stay inside it and expand as model files do, once they fit in
    the space free. An archive whose model does not convert leaves the cache (the next run downloads it again)."""
    from .elmoformanylangs import convert  # torch: not before `convert --help` has answered

    preset = EFML_PRESETS[name]
    url = preset.url()
    cache = cached_assets_path(library_name="elmo-transformers", namespace="elmoformanylangs", subfolder=name)

    def refused(e):
        return ConversionError(f"{url} is not ELMoForManyLangs' {preset.language} model ({first_line(e)}): the "
                               f"server sent something else; {EFML_MANUAL}")

    def check(path):
        try:
            check_pin(preset, path)
            members = archive_members(path)
            check_archive(path, members)
            model_members(members)
        except ConversionError as e:
            raise refused(e) from None

    try:
        archive, source = download(url, cache / os.path.basename(url), check)
    except DownloadError as e:
        raise ConversionError(f"{e}: {EFML_MANUAL}") from None
    unpacked = cache / "model"
    with WeakFileLock(cache / "model.lock"):
        if (unpacked / "config.json").is_file():
            return unpacked, source
        shutil.rmtree(unpacked, ignore_errors=True)  # an earlier version's copy (the archive's folders kept): again
        try:
            check(archive)  # also an archive cached before these checks
            members = model_members(archive_members(archive))
        except ConversionError:
            forget_efml_preset(name)
            raise
        free, need = shutil.disk_usage(cache).free, sum(m.size for m in members)
        if need > free:
            raise ConversionError(f"unpacking {archive} takes {need:,} bytes and its disk has {free:,} free: make "
                                  "room, or set HF_HOME to a larger disk")
        staging = Path(tempfile.mkdtemp(dir=cache, prefix="model.", suffix=".incomplete"))
        try:
            unpack(archive, members, staging)
            convert(str(staging))  # what it holds converts before it is kept
            os.replace(staging, unpacked)
        except ConversionError as e:
            forget_efml_preset(name)
            raise refused(e) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return unpacked, source


def forget_efml_preset(name):
    """Remove preset `name`'s archive, its record and its unpacked model from the cache: what a refused archive must
    not leave."""
    cache = cached_assets_path(library_name="elmo-transformers", namespace="elmoformanylangs", subfolder=name)
    archive = cache / os.path.basename(EFML_PRESETS[name].path)
    for path in (archive.with_name(archive.name + ".source"), archive):
        path.unlink(missing_ok=True)
    shutil.rmtree(cache / "model", ignore_errors=True)


def efml_preset_card(name, url, segmenter):
    """The converted folder's model card: the source archive, how raw text is split, and where to cite."""
    preset = EFML_PRESETS[name]
    metadata = ModelCardData(library_name="transformers", language=[name.split("-")[0]],
                             tags=["elmo", "custom_code", "elmoformanylangs"])
    return ModelCard(
        f"---\n{metadata.to_yaml()}\n---\n\n"
        f"# ELMo for {preset.language}, converted from ELMoForManyLangs\n\n"
        "HIT-SCIR's ELMoForManyLangs model (Che et al., 2018, *Towards Better UD Parsing: Deep Contextualized Word "
        "Embeddings, Ensemble, and Treebank Concatenation*), converted by `elmo-transformers convert "
        f"elmoformanylangs --preset {name}` from <{url}>.\n\n"
        f"Raw text is split into words with `segmenter={segmenter!r}` (tokenizer_config.json)."
        f"{' Note: ' + TRADITIONAL_NOTE + '.' if name == 'zh-hant' else ''} The licence of the weights is the "
        "publisher's: see ELMoForManyLangs and the NLPL vectors repository.\n"
    )
