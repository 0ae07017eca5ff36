"""The published models by name: AllenNLP's (`elmo-transformers convert allennlp --preset NAME`) and
ELMoForManyLangs' (`convert elmoformanylangs --preset NAME`): where their files are, what they must hold, a name (or
one of AllenNLP's URLs) made local files through the checked download cache (download.py; an ELMoForManyLangs
archive unpacked there by archives.py), and the converted folder's model card. Mirrors, the cache and its checks:
docs/coming-from-allennlp-and-tf-hub.md and docs/coming-from-elmoformanylangs.md.
"""

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData, cached_assets_path
from huggingface_hub.utils import WeakFileLock

from ..errors import ConversionError, first_line
from .archives import archive_members, check_archive, model_members, unpack
from .download import DownloadError, download

BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
BUCKET_URLS = (BASE_URL, "https://allennlp.s3.amazonaws.com/models/elmo")  # AllenNLP 0.x's and 1.x/2.x's spellings
URL_VARIABLE = "ELMO_TRANSFORMERS_ALLENNLP_URL"
LICENSE = "apache-2.0"  # AllenNLP publishes its code and these ELMo weights under the Apache License 2.0
# The argument of conversion.allennlp.convert (the command's flag) that takes each file when it is given by hand.
ARGUMENTS = {"options": "options_path", "weights": "weights_path", "softmax": "softmax_path", "vocab": "vocab_path"}


def published_options(lstm_dim, projection_dim, n_highway):
    """The options.json AllenNLP published with a model: all share the char CNN, two LSTM layers, clipping at 3 and
    skip connections; they differ in the LSTM's sizes and the number of highway layers."""
    return {
        "lstm": {
            "dim": lstm_dim,
            "projection_dim": projection_dim,
            "n_layers": 2,
            "cell_clip": 3,
            "proj_clip": 3,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "activation": "relu",
            "embedding": {"dim": 16},
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": n_highway,
            "n_characters": 262,
            "max_characters_per_token": 50,
        },
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
        names = {
            "options": f"{self.folder}/{self.stem}_options.json",
            "weights": f"{self.folder}/{self.stem}_weights.hdf5",
        }
        if with_lm:
            names.update(softmax=self.softmax, vocab=self.vocab)
        return names


PRESETS = {
    "small": Preset(
        "2x1024_128_2048cnn_1xhighway", "elmo_2x1024_128_2048cnn_1xhighway", published_options(1024, 128, 1)
    ),
    "medium": Preset(
        "2x2048_256_2048cnn_1xhighway", "elmo_2x2048_256_2048cnn_1xhighway", published_options(2048, 256, 1)
    ),
    "original": Preset(
        "2x4096_512_2048cnn_2xhighway",
        "elmo_2x4096_512_2048cnn_2xhighway",
        published_options(4096, 512, 2),
        softmax="2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_softmax_weights.hdf5",
        vocab="vocab-2016-09-10.txt",
    ),
    "original-5.5b": Preset(
        "2x4096_512_2048cnn_2xhighway_5.5B",
        "elmo_2x4096_512_2048cnn_2xhighway_5.5B",
        published_options(4096, 512, 2),
        softmax="2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B_softmax_weights.hdf5",
        vocab="2x4096_512_2048cnn_2xhighway_5.5B/tf_checkpoint/vocab-enwiki-news-500000.txt",
    ),
}


def unfetched(argument, problem):
    """The error for a preset's file that cannot be fetched (`problem`): about `argument`, the caller's parameter that
    gives that file itself, and what to do."""
    return ConversionError(
        f"{argument} not given, and {problem}: download the file yourself and give its path, or set "
        f"{URL_VARIABLE} to a mirror of AllenNLP's files",
        argument=argument,
    )


def base_url():
    return os.environ.get(URL_VARIABLE, BASE_URL).rstrip("/")


def fetch_preset(name, with_lm=False):
    """{"options", "weights"[, "softmax", "vocab"]: local path} of preset `name`, from the cache or downloaded; and
    {the same keys: the URL each file came from}. ConversionError in one line when a file cannot be had."""
    preset = PRESETS[name]
    if with_lm and preset.softmax is None:
        with_lm_presets = ", ".join(n for n, p in PRESETS.items() if p.softmax)
        raise ConversionError(
            f"AllenNLP published no language model for {name!r} (only for {with_lm_presets}): "
            "convert it without the language model"
        )
    fetched = {key: fetch_file(name, key) for key in preset.files(with_lm)}
    return {key: path for key, (path, _) in fetched.items()}, {key: url for key, (_, url) in fetched.items()}


def fetch_file(name, key, argument=None):
    """(local path, the URL it came from) of file `key` ("options", "weights", "softmax" or "vocab") of preset
    `name`, from the cache or downloaded from the base URL and checked; an error names `argument`, the caller's
    parameter for the file (default: `convert`'s, ARGUMENTS)."""
    argument = argument or ARGUMENTS[key]
    from .allennlp import check_published_file  # torch and transformers: not before `convert --help` has answered

    preset = PRESETS[name]
    url = f"{base_url()}/{preset.files(with_lm=True)[key]}"
    cache = cached_assets_path(library_name="elmo-transformers", namespace="allennlp", subfolder=name)

    def check(path):
        try:
            check_published_file(key, path, preset.options)
        except ConversionError as e:
            raise unfetched(
                argument,
                f"{url} is not the {key} file AllenNLP published for {name!r} ({first_line(e)}): "
                "the server sent something else",
            ) from None

    try:
        return download(url, cache / os.path.basename(url), check)
    except DownloadError as e:
        raise unfetched(argument, e) from None


def fetch_url(url, argument):
    """The local copy of one of AllenNLP's published files given by its URL, under AllenNLP's bucket (either spelling)
    or the base URL: what AllenNLP code hands to ElmoEmbedder. Fetched as its preset's file (the cache, the mirror and
    the checks apply); ConversionError naming `argument` (the caller's parameter that held the URL) for any other
    URL."""
    for name, preset in PRESETS.items():
        for key, path in preset.files(with_lm=preset.softmax is not None).items():
            if url in {f"{base}/{path}" for base in (*BUCKET_URLS, base_url())}:
                return fetch_file(name, key, argument)[0]
    raise ConversionError(
        f"{url} is not one of the files AllenNLP published for ELMo (those of the presets "
        f"{', '.join(PRESETS)} under {BASE_URL}): download it yourself and give its local path as "
        f"{argument}"
    )


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
            self.host
        ]
        return f"{os.environ.get(variable, default).rstrip('/')}/{self.path}"


def _nlpl(number, language, segmenter="whitespace"):
    return EfmlPreset(language, f"11/{number}.zip", segmenter)


# ELMoForManyLangs' README, "Downloads": ISO 639 codes (UD's). Trained on the CoNLL 2018 shared task's raw text,
# segmented into UD words; Chinese and Japanese are written without spaces: jieba and UniDic short units (fugashi,
# research/segmentation_f1.py) segment them. The traditional-Chinese model (Wikipedia) is zh-hant; the
# simplified one (Chinese Gigaword's Xinhua part), HIT-SCIR's zhs.model, is zh-hans. Neither the README nor the NLPL
# repository's pages publish the archives' sizes or SHA-256: none is pinned (`EfmlPreset.size`, `sha256`).
EFML_PRESETS = {
    "ar": _nlpl(136, "Arabic"),
    "bg": _nlpl(137, "Bulgarian"),
    "ca": _nlpl(138, "Catalan"),
    "cs": _nlpl(139, "Czech"),
    "cu": _nlpl(140, "Old Church Slavonic"),
    "da": _nlpl(141, "Danish"),
    "de": _nlpl(142, "German"),
    "el": _nlpl(143, "Greek"),
    "en": _nlpl(144, "English"),
    "es": _nlpl(145, "Spanish"),
    "et": _nlpl(146, "Estonian"),
    "eu": _nlpl(147, "Basque"),
    "fa": _nlpl(148, "Persian"),
    "fi": _nlpl(149, "Finnish"),
    "fr": _nlpl(150, "French"),
    "ga": _nlpl(151, "Irish"),
    "gl": _nlpl(152, "Galician"),
    "grc": _nlpl(153, "Ancient Greek"),
    "he": _nlpl(154, "Hebrew"),
    "hi": _nlpl(155, "Hindi"),
    "hr": _nlpl(156, "Croatian"),
    "hu": _nlpl(157, "Hungarian"),
    "id": _nlpl(158, "Indonesian"),
    "it": _nlpl(159, "Italian"),
    "ja": _nlpl(160, "Japanese", "fugashi"),
    "ko": _nlpl(161, "Korean"),
    "la": _nlpl(162, "Latin"),
    "lv": _nlpl(163, "Latvian"),
    "nl": _nlpl(164, "Dutch"),
    "nb": _nlpl(165, "Norwegian Bokmål"),
    "nn": _nlpl(166, "Norwegian Nynorsk"),
    "pl": _nlpl(167, "Polish"),
    "pt": _nlpl(168, "Portuguese"),
    "ro": _nlpl(169, "Romanian"),
    "ru": _nlpl(170, "Russian"),
    "sk": _nlpl(171, "Slovak"),
    "sl": _nlpl(172, "Slovene"),
    "sv": _nlpl(173, "Swedish"),
    "tr": _nlpl(174, "Turkish"),
    "ug": _nlpl(175, "Uyghur"),
    "uk": _nlpl(176, "Ukrainian"),
    "ur": _nlpl(177, "Urdu"),
    "vi": _nlpl(178, "Vietnamese"),
    "zh-hant": _nlpl(179, "Chinese (traditional)", "jieba"),
    "zh-hans": EfmlPreset("Chinese (simplified)", "zhs.model.tar.bz2", "jieba", host="hitscir"),
}
# Said when zh-hant is converted without OpenCC, and in its card: its character vocabulary is traditional.
TRADITIONAL_NOTE = (
    "zh-hant was trained on traditional characters (Wikipedia): for simplified-Chinese text use "
    "the preset zh-hans, or convert with opencc_config s2t (the tokenizer converts the text to "
    "traditional characters first)"
)
EFML_MANUAL = (
    f"download the archive yourself, unpack it and give its folder, or set {NLPL_URL_VARIABLE} "
    f"({HITSCIR_URL_VARIABLE} for zh-hans) to a mirror"
)


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
        return ConversionError(
            f"{url} is not ELMoForManyLangs' {preset.language} model ({first_line(e)}): the "
            f"server sent something else; {EFML_MANUAL}"
        )

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
        # model/ is renamed into place whole, with its config.json: a model/ of this cache without one is not a
        # finished unpacking and is unpacked again (the archive was checked when it was downloaded)
        shutil.rmtree(unpacked, ignore_errors=True)
        try:
            members = model_members(archive_members(archive))
        except ConversionError:
            forget_efml_preset(name)
            raise
        free, need = shutil.disk_usage(cache).free, sum(m.size for m in members)
        if need > free:
            raise ConversionError(
                f"unpacking {archive} takes {need:,} bytes and its disk has {free:,} free: make "
                "room, or set HF_HOME to a larger disk"
            )
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
    metadata = ModelCardData(
        library_name="transformers", language=[name.split("-")[0]], tags=["elmo", "custom_code", "elmoformanylangs"]
    )
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
