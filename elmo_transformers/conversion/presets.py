"""AllenNLP's published ELMo models by name (`elmo-transformers convert allennlp --preset NAME`): where their files
are, and a download cache a second conversion reuses.

The files live under one base URL, AllenNLP's bucket, or `ELMO_TRANSFORMERS_ALLENNLP_URL` (a mirror, or a folder
served inside an air-gapped site). Downloads go through huggingface_hub's HTTP client (its progress bar, its
offline mode: `HF_HUB_OFFLINE=1` refuses them) into huggingface_hub's assets cache,
`$HF_HOME/assets/elmo-transformers/allennlp/PRESET/` (`HF_ASSETS_CACHE` moves it). A file is written under a
temporary name and renamed only once its size equals the server's Content-Length and, for weights, it opens as
HDF5, so an interrupted download is never taken for a complete one.
"""

import os
from dataclasses import dataclass

import h5py
from huggingface_hub import ModelCard, ModelCardData, cached_assets_path
from huggingface_hub.file_download import http_get
from huggingface_hub.utils import get_session

from ..errors import ConversionError, first_line

BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
URL_VARIABLE = "ELMO_TRANSFORMERS_ALLENNLP_URL"
LICENSE = "apache-2.0"  # AllenNLP publishes its code and these ELMo weights under the Apache License 2.0


@dataclass(frozen=True)
class Preset:
    """A published model: its folder under the base URL, the files' common stem, and the language model's softmax
    weights and vocabulary (paths under the base URL) where AllenNLP published them."""

    folder: str
    stem: str
    softmax: str | None = None
    vocab: str | None = None

    def files(self, with_lm):
        names = {"options": f"{self.folder}/{self.stem}_options.json",
                 "weights": f"{self.folder}/{self.stem}_weights.hdf5"}
        if with_lm:
            names.update(softmax=self.softmax, vocab=self.vocab)
        return names


PRESETS = {
    "small": Preset("2x1024_128_2048cnn_1xhighway", "elmo_2x1024_128_2048cnn_1xhighway"),
    "medium": Preset("2x2048_256_2048cnn_1xhighway", "elmo_2x2048_256_2048cnn_1xhighway"),
    "original": Preset(
        "2x4096_512_2048cnn_2xhighway", "elmo_2x4096_512_2048cnn_2xhighway",
        softmax="2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_softmax_weights.hdf5",
        vocab="vocab-2016-09-10.txt",
    ),
    "original-5.5b": Preset(
        "2x4096_512_2048cnn_2xhighway_5.5B", "elmo_2x4096_512_2048cnn_2xhighway_5.5B",
        softmax="2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B_softmax_weights.hdf5",
        vocab="2x4096_512_2048cnn_2xhighway_5.5B/tf_checkpoint/vocab-enwiki-news-500000.txt",
    ),
}


def base_url():
    return os.environ.get(URL_VARIABLE, BASE_URL).rstrip("/")


def fetch_preset(name, with_lm=False):
    """{"options", "weights"[, "softmax", "vocab"]: local path} of preset `name`, from the cache or downloaded; and
    {the same keys: URL}. ConversionError in one line when a file cannot be had."""
    preset = PRESETS[name]
    if with_lm and preset.softmax is None:
        with_lm_presets = ", ".join(n for n, p in PRESETS.items() if p.softmax)
        raise ConversionError(f"--with-lm: AllenNLP published no language model for {name!r} (only for "
                              f"{with_lm_presets}); leave out --with-lm")
    cache = cached_assets_path(library_name="elmo-transformers", namespace="allennlp", subfolder=name)
    urls = {key: f"{base_url()}/{path}" for key, path in preset.files(with_lm).items()}
    paths = {key: download(url, cache / os.path.basename(url), hdf5=url.endswith(".hdf5")) for key, url in urls.items()}
    return paths, urls


def download(url, path, hdf5):
    """`path`, downloaded from `url` unless a complete copy is there already (only complete files get this name)."""
    if path.is_file():
        return path
    manual = (f"download it yourself and pass --options/--weights (and --softmax-weights/--vocab), or set "
              f"{URL_VARIABLE} to a mirror")
    partial = path.with_name(path.name + ".incomplete")
    try:
        response = get_session().head(url, follow_redirects=True)
        response.raise_for_status()
        size = int(response.headers["Content-Length"])
        with open(partial, "wb") as f:
            http_get(url, f, expected_size=size, displayed_filename=path.name)
        got = partial.stat().st_size
        if got != size:
            raise OSError(f"got {got:,} of {size:,} bytes")
        if hdf5:
            with h5py.File(partial, "r"):
                pass
    except Exception as e:  # the HTTP client's, h5py's and the file system's errors all mean: no usable file
        partial.unlink(missing_ok=True)
        raise ConversionError(f"cannot download {url} ({first_line(e)}): {manual}") from None
    os.replace(partial, path)
    return path


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
