"""`elmo-transformers convert allennlp --preset NAME [--with-lm]` and ElmoEmbedder's bucket URLs against AllenNLP's
bucket layout served from 127.0.0.1 (ELMO_TRANSFORMERS_ALLENNLP_URL).

The bucket holds the tiny LM fixture's files under every preset's file names; most tests publish the fixture's
options as every preset's (`publish_fixture`), so that those files are what the checks expect. Against it: every name
resolves and converts and the cache is reused; concurrent conversions share one download; a mirror serving another
model, an error page, a server that never answers, trickles or cuts every transfer, and Ctrl-C all end in one line
and leave nothing in the cache that a rerun takes as complete. Timeouts are set to a fraction of a second here."""

import dataclasses
import functools
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import LM_FIXTURE, command_env, convert_lm_fixture, load_fixture
from huggingface_hub import constants
from safetensors.numpy import load_file
from tolerance import assert_close_to_reference

from elmo_transformers import ElmoEmbedder
from elmo_transformers.cli import main
from elmo_transformers.conversion import download, presets
from elmo_transformers.conversion.presets import BASE_URL, PRESETS
from elmo_transformers.errors import ConversionError

FIXTURE_OPTIONS = json.loads((LM_FIXTURE / "options.json").read_text())
SOURCES = {"options": "options.json", "weights": "weights.hdf5", "softmax": "softmax.hdf5", "vocab": "vocab.txt"}
SMALL = PRESETS["small"].files(with_lm=False)


class Bucket(http.server.SimpleHTTPRequestHandler):
    """Serves the folder (ignoring Range, as a plain static server does) and records each request. `serve` maps the
    end of a path to how it is served: "silent" (accept, never answer), "trickle" (one byte every `delay` seconds),
    "slow" (1 kB every 0.15 s), "cut" (half the file, then close), "html" (an error page with status 200)."""

    requests = []
    serve = {}
    delay = 0.1
    closing = threading.Event()

    def log_message(self, *args):
        pass

    def behaviour(self):
        return next((how for end, how in self.serve.items() if self.path.endswith(end)), None)

    def do_HEAD(self):
        type(self).requests.append(("HEAD", self.path))
        how = self.behaviour()
        if how == "silent":
            self.closing.wait()
        elif how == "html":
            self.send_response(200)
            self.send_header("Content-Length", str(len(ERROR_PAGE)))
            self.end_headers()
        else:
            super().do_HEAD()

    def do_GET(self):
        type(self).requests.append(("GET", self.path))
        how = self.behaviour()
        data = ERROR_PAGE if how == "html" else None
        if how in ("trickle", "slow", "cut", "silent-get"):
            data = open(self.translate_path(self.path), "rb").read()
        if how == "silent" or how == "silent-get":
            self.closing.wait()
            return
        if data is None:
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if how in ("trickle", "slow"):
            step, delay = (1, self.delay) if how == "trickle" else (1024, 0.15)
            for i in range(0, len(data), step):
                if self.closing.wait(delay):
                    return
                try:
                    self.wfile.write(data[i : i + step])
                    self.wfile.flush()
                except OSError:  # the client gave up
                    return
        elif how == "cut":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        else:
            self.wfile.write(data)


ERROR_PAGE = b"<html><body>Please sign in to continue</body></html>"


@pytest.fixture
def bucket(tmp_path, monkeypatch):
    """The bucket layout with the LM fixture's files, served at a loopback URL that is the base URL; the cache in
    tmp_path, online, timeouts of half a second. Yields (base URL, handler class)."""
    root = tmp_path / "bucket"
    for preset in PRESETS.values():
        for key, name in preset.files(with_lm=preset.softmax is not None).items():
            (root / "elmo" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(LM_FIXTURE / SOURCES[key], root / "elmo" / name)
    handler = type("Handler", (Bucket,), {"requests": [], "serve": {}, "closing": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/elmo"
    monkeypatch.setenv(presets.URL_VARIABLE, url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # for the subprocesses
    monkeypatch.setattr("huggingface_hub.utils._cache_assets.HF_ASSETS_CACHE", str(tmp_path / "hf-home" / "assets"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 0.5)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.5)
    monkeypatch.setattr(download, "RETRY_WAIT", 0.0)
    monkeypatch.setitem(sys.modules["huggingface_hub.utils.tqdm"].progress_bar_states, "_global", False)  # no bars
    yield url, handler
    handler.closing.set()
    server.shutdown()


@pytest.fixture
def publish_fixture(monkeypatch):
    """The fixture's options as every preset's published options (in this process)."""
    for name, preset in PRESETS.items():
        monkeypatch.setitem(PRESETS, name, dataclasses.replace(preset, options=FIXTURE_OPTIONS))


# The same as `publish_fixture` in a command run as a subprocess: argv[1:] are the command's arguments.
PUBLISHED_FIXTURE_COMMAND = f"""
import dataclasses, json, sys
from elmo_transformers.conversion.presets import PRESETS
for name, preset in PRESETS.items():
    PRESETS[name] = dataclasses.replace(preset, options=json.loads({json.dumps(json.dumps(FIXTURE_OPTIONS))}))
from elmo_transformers.cli import main
sys.exit(main(sys.argv[1:]))
"""


def published_fixture_command(*args):
    return [sys.executable, "-c", PUBLISHED_FIXTURE_COMMAND, *map(str, args)]


def subprocess_env(**variables):
    return {**command_env(**variables), "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def convert(*args):
    return main(["convert", "allennlp", *map(str, args)])


def cache_files(tmp_path):
    return sorted(p.name for p in (tmp_path / "hf-home").rglob("*") if p.is_file() and not p.name.endswith(".lock"))


def error_line(capsys):
    """The one line a failed command printed on stderr."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture(scope="module")
def direct(tmp_path_factory):
    """The LM fixture converted from disk: what every preset conversion of the bucket must equal."""
    folder = tmp_path_factory.mktemp("direct") / "converted"
    assert convert_lm_fixture(folder) == 0
    return load_file(folder / "model.safetensors")


def assert_same_model(output, direct):
    got = load_file(output / "model.safetensors")
    for key, value in got.items():  # the biLM (and softmax) as a direct conversion of the files
        np.testing.assert_array_equal(value, direct.get(key, direct.get(f"elmo.{key}")), err_msg=key)


def test_every_preset_converts_from_the_bucket_and_reuses_the_cache(bucket, publish_fixture, direct, tmp_path):
    url, handler = bucket
    # small; original and original-5.5b with their language models (medium: in the timeout tests' reruns)
    for name, with_lm in (("small", False), ("original", True), ("original-5.5b", True)):
        preset = PRESETS[name]
        output = tmp_path / f"{name}{'-lm' if with_lm else ''}"
        assert convert("--preset", name, "--output", output, *(["--with-lm"] if with_lm else [])) == 0
        assert_same_model(output, direct)
        card = (output / "README.md").read_text()
        assert "license: apache-2.0" in card and f"{url}/{preset.folder}/{preset.stem}_weights.hdf5" in card
        assert json.loads((output / "config.json").read_text()).get("lm_vocab_size") == (32 if with_lm else None)
    gets = [path for method, path in handler.requests if method == "GET"]
    assert len(gets) == len(set(gets)) == 10  # each file fetched once; later conversions used the cache
    assert convert("--preset", "small", "--output", tmp_path / "again") == 0
    assert [path for method, path in handler.requests if method == "GET"] == gets, "the cache must be reused"
    assert not [f for f in cache_files(tmp_path) if f.endswith(".incomplete")]


def test_with_lm_is_refused_where_no_lm_was_published(tmp_path, capsys):
    assert convert("--preset", "small", "--with-lm", "--output", tmp_path / "o") == 1
    assert "published no language model for 'small'" in error_line(capsys) and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_concurrent_conversions_share_one_download(bucket, direct, tmp_path):
    """Two conversions started at once on one cache (workers of a cluster job): the weights take about 9 s to arrive;
    the second run waits for the first one's download and reuses it; both models are the fixture's weights (each run
    writing the same temporary file left tensors of zeros)."""
    url, handler = bucket
    handler.serve = {"_weights.hdf5": "slow"}
    env = subprocess_env(**{presets.URL_VARIABLE: url, "HF_HOME": str(tmp_path / "hf-home")})
    runs = [
        subprocess.Popen(
            published_fixture_command("convert", "allennlp", "--preset", "small", "--output", tmp_path / f"out{i}"),
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for run in runs:
        assert run.wait(timeout=120) == 0, run.stderr.read()
    for i in range(2):
        assert_same_model(tmp_path / f"out{i}", direct)
    assert [path for method, path in handler.requests if method == "GET"].count(f"/elmo/{SMALL['weights']}") == 1
    assert not [f for f in cache_files(tmp_path) if f.endswith(".incomplete")]


def test_a_mirror_serving_another_model_is_refused_and_the_card_names_the_mirror(bucket, tmp_path, capsys, monkeypatch):
    """The bucket's tiny model is not the published 'small': its options are refused; with the published options
    in their place, its weights are. Then, published as 'small', the card of a conversion from the cache names the
    mirror the files came from, whatever the base URL is by then."""
    url, handler = bucket
    assert convert("--preset", "small", "--output", tmp_path / "out") == 1
    line = error_line(capsys)
    assert line.startswith(
        f"error: --options not given, and {url}/{SMALL['options']} is not the options file "
        "AllenNLP published for 'small' "
        "(the options of another model: lstm.dim is 16, published 1024; "
    )
    assert f"set {presets.URL_VARIABLE} to a mirror" in line
    options = bucket_path(tmp_path, SMALL["options"])
    options.write_text(json.dumps(PRESETS["small"].options))
    assert convert("--preset", "small", "--output", tmp_path / "out") == 1
    line = error_line(capsys)
    assert line.startswith(
        f"error: --weights not given, and {url}/{SMALL['weights']} is not the weights file "
        "AllenNLP published for 'small' "
        "(the weights of another model: "
    )
    assert "dataset char_embed has shape (261, 4), expected (261, 16)" in line or "missing dataset" in line
    assert not (tmp_path / "out").exists() and cache_files(tmp_path) == [options.name, options.name + ".source"]

    for name, preset in PRESETS.items():
        monkeypatch.setitem(PRESETS, name, dataclasses.replace(preset, options=FIXTURE_OPTIONS))
    shutil.copy(LM_FIXTURE / "options.json", options)
    shutil.rmtree(tmp_path / "hf-home")  # it holds the options published for the real 'small'
    assert convert("--preset", "small", "--output", tmp_path / "out") == 0
    monkeypatch.setenv(presets.URL_VARIABLE, BASE_URL)  # offline from now on: the cache must serve
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert convert("--preset", "small", "--output", tmp_path / "again") == 0
    card = (tmp_path / "again" / "README.md").read_text()
    assert f"<{url}/{SMALL['weights']}>" in card and BASE_URL not in card


def bucket_path(tmp_path, name):
    return tmp_path / "bucket" / "elmo" / name


@pytest.mark.parametrize(
    "key, content, problem",
    [
        ("options", ERROR_PAGE, f"not JSON, it begins {ERROR_PAGE[:40]!r}"),
        ("weights", ERROR_PAGE, "not an HDF5 file"),
        ("vocab", "<S>\n</S>\n<UNK>\nword\n".encode("utf-16"), "not a vocabulary of UTF-8 text"),
        ("softmax", (LM_FIXTURE / "weights.hdf5").read_bytes(), "expected the datasets softmax/W [vocabulary, 8]"),
    ],
)
def test_what_is_not_the_published_file_is_refused_before_it_is_cached(
    bucket, publish_fixture, tmp_path, capsys, key, content, problem
):
    """An error page served with status 200 (or a UTF-16 vocabulary, the weights in place of the softmax) is refused
    in one line and never gets the cached name: once the mirror serves the right file, the rerun succeeds."""
    url, handler = bucket
    name = PRESETS["original"].files(with_lm=True)[key]
    bucket_path(tmp_path, name).write_bytes(content)
    assert convert("--preset", "original", "--with-lm", "--output", tmp_path / "out") == 1
    line = error_line(capsys)
    flag = {"options": "--options", "weights": "--weights", "softmax": "--softmax-weights", "vocab": "--vocab"}[key]
    assert line.startswith(
        f"error: {flag} not given, and {url}/{name} is not the {key} file AllenNLP published for 'original' ({problem}"
    )
    assert line.endswith(
        "the server sent something else: download the file yourself and give its path, or set "
        f"{presets.URL_VARIABLE} to a mirror of AllenNLP's files"
    )
    assert not (tmp_path / "out").exists() and name.rsplit("/")[-1] not in cache_files(tmp_path)
    assert not [f for f in cache_files(tmp_path) if f.endswith(".incomplete")]
    shutil.copy(LM_FIXTURE / SOURCES[key], bucket_path(tmp_path, name))  # the mirror mended
    assert convert("--preset", "original", "--with-lm", "--output", tmp_path / "out") == 0


@pytest.mark.parametrize(
    "serve, reason",
    [
        ({"_options.json": "silent"}, "no answer within 0.5 s, set by HF_HUB_ETAG_TIMEOUT"),
        ({"_weights.hdf5": "silent-get"}, "no answer within 0.5 s, set by HF_HUB_DOWNLOAD_TIMEOUT"),
        (
            {"_weights.hdf5": "trickle"},
            "the transfer stalled: under 1,024 bytes in 0.5 s, set by HF_HUB_DOWNLOAD_TIMEOUT",
        ),
        ({"_weights.hdf5": "cut"}, "peer closed connection without sending complete message body"),
    ],
)
def test_a_server_that_hangs_trickles_or_cuts_ends_in_one_line(
    bucket, publish_fixture, tmp_path, capsys, serve, reason
):
    """A bounded number of attempts without progress (huggingface_hub's http_get retries a transfer cut at the same
    byte forever), each bounded by huggingface_hub's timeouts; then one line naming the URL and what to do."""
    url, handler = bucket
    handler.serve = serve
    file = SMALL["options"] if "_options.json" in serve else SMALL["weights"]
    start = time.monotonic()
    assert convert("--preset", "medium" if "cut" in serve.values() else "small", "--output", tmp_path / "out") == 1
    assert time.monotonic() - start < 30
    line = error_line(capsys)
    if "cut" in serve.values():
        file = PRESETS["medium"].files(with_lm=False)["weights"]
    flag = "--options" if file.endswith(".json") else "--weights"
    assert line.startswith(f"error: {flag} not given, and cannot download {url}/{file} ({reason}")
    assert line.endswith(
        f"{download.ATTEMPTS} attempts in a row brought no new data): download the file yourself and "
        f"give its path, or set {presets.URL_VARIABLE} to a mirror of AllenNLP's files"
    )
    tries = [request for request in handler.requests if request[1] == f"/elmo/{file}"]
    assert len(tries) <= 2 * (download.ATTEMPTS + 1), tries
    assert not (tmp_path / "out").exists()
    assert not [f for f in cache_files(tmp_path) if f.endswith((".hdf5", ".incomplete"))], cache_files(tmp_path)
    handler.serve = {}  # the server mended: a rerun downloads again and succeeds
    assert convert("--preset", "medium" if "cut" in serve.values() else "small", "--output", tmp_path / "out") == 0


def test_an_unreachable_server_and_offline_mode_fail_in_one_line(bucket, tmp_path, capsys, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv(presets.URL_VARIABLE, f"http://127.0.0.1:{closed}/elmo")
    assert convert("--preset", "original", "--output", tmp_path / "o") == 1
    assert error_line(capsys).startswith(
        f"error: --options not given, and cannot download http://127.0.0.1:{closed}/elmo/"
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert convert("--preset", "original", "--output", tmp_path / "o") == 1
    options = PRESETS["original"].files(with_lm=False)["options"]
    assert error_line(capsys) == (
        f"error: --options not given, and cannot download {presets.base_url()}/{options}: "
        "HF_HUB_OFFLINE is set (unset it): download the file yourself and give its path, or "
        f"set {presets.URL_VARIABLE} to a mirror of AllenNLP's files"
    )
    assert not (tmp_path / "o").exists()
    with pytest.raises(
        ConversionError,
        match="^options_path not given, and cannot download .*: HF_HUB_OFFLINE is set "
        r"\(unset it\): download the file yourself and give its path, or set",
    ):
        presets.fetch_preset("original")  # a Python caller reads the argument of conversion.allennlp.convert


@pytest.mark.slow
def test_the_timeout_variables_and_ctrl_c_in_a_command(bucket, tmp_path):
    """As a user runs it: HF_HUB_ETAG_TIMEOUT bounds a server that never answers; Ctrl-C during a download prints
    one line and leaves nothing a rerun takes as complete (only the options, downloaded whole and checked)."""
    url, handler = bucket
    handler.serve = {"_options.json": "silent"}
    env = subprocess_env(
        **{presets.URL_VARIABLE: url, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_ETAG_TIMEOUT": "1"}
    )
    run = published_fixture_command("convert", "allennlp", "--preset", "small", "--output", tmp_path / "out")
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"error: --options not given, and cannot download {url}/{SMALL['options']} (no answer within 1 s, set by "
            "HF_HUB_ETAG_TIMEOUT"
        )
    )

    handler.serve, handler.delay = {"_weights.hdf5": "trickle"}, 0.01
    interrupted = subprocess.Popen(
        run, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    )  # as a terminal
    while ("GET", f"/elmo/{SMALL['weights']}") not in handler.requests:
        assert interrupted.poll() is None, interrupted.stderr.read()
        time.sleep(0.05)
    time.sleep(0.5)
    interrupted.send_signal(signal.SIGINT)
    assert interrupted.wait(timeout=60) == 130
    last_line = interrupted.stderr.read().strip().splitlines()[-1]
    assert last_line == "interrupted by Ctrl+C (SIGINT): elmo-transformers convert stopped before it finished"
    options = SMALL["options"].split("/")[-1]
    assert cache_files(tmp_path) == [options, f"{options}.source"]  # the weights neither cached nor left half-done


def test_allennlp_0x_code_with_the_bucket_urls(bucket, publish_fixture, tmp_path):
    """`ElmoEmbedder(options_file, weight_file, cuda_device=-1)` with AllenNLP's bucket URLs (as AllenNLP 0.x code
    has them): the files come from the mirror through the presets' cache, converted in memory; the vectors are
    AllenNLP's (the bucket holds the allennlp-tiny weights)."""
    url, handler = bucket
    embedder = ElmoEmbedder(f"{BASE_URL}/{SMALL['options']}", f"{BASE_URL}/{SMALL['weights']}", cuda_device=-1)
    sentences, expected, _ = load_fixture("allennlp-tiny")
    for i, vectors in enumerate(embedder.embed_batch(sentences)):
        assert_close_to_reference(vectors, expected[f"sent_{i}_activations"], what=f"sentence {i}")
    assert sorted(path for method, path in handler.requests if method == "GET") == sorted(
        f"/elmo/{SMALL[key]}" for key in ("options", "weights")
    )
    again = ElmoEmbedder(options_file=f"{url}/{SMALL['options']}", weight_file=f"{url}/{SMALL['weights']}")
    assert len(handler.requests) == 4 and again.source == f"{url}/{SMALL['weights']}"  # the cache's copies
    with pytest.raises(
        ValueError,
        match=r"https://example.org/options.json is not one of the files AllenNLP "
        r"published for ELMo .*: download it yourself and give its local path "
        r"as options_file",
    ):
        ElmoEmbedder("https://example.org/options.json", f"{BASE_URL}/{SMALL['weights']}")


def test_a_download_failing_in_elmo_embedder_names_its_argument(bucket, monkeypatch):
    """The error names ElmoEmbedder's own argument for the file (options_file, weight_file), not convert's."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    options, weights = f"{BASE_URL}/{SMALL['options']}", f"{BASE_URL}/{SMALL['weights']}"
    for files, argument in (
        ((options, weights), "options_file"),
        ((LM_FIXTURE / "options.json", weights), "weight_file"),
    ):
        with pytest.raises(ConversionError) as raised:
            ElmoEmbedder(*files)
        assert str(raised.value).startswith(f"{argument} not given, and cannot download "), str(raised.value)
        assert str(raised.value).endswith(
            ": download the file yourself and give its path, or set "
            f"{presets.URL_VARIABLE} to a mirror of AllenNLP's files"
        ), str(raised.value)


def test_a_killed_download_leaves_nothing_the_next_run_keeps(bucket, publish_fixture, tmp_path):
    """kill -9 leaves the temporary file of the download it stopped (nothing can clean up after SIGKILL); the next
    run, holding the file's lock, removes it and downloads anew."""
    cache = tmp_path / "hf-home" / "assets" / "elmo-transformers" / "allennlp" / "small"
    cache.mkdir(parents=True)
    weights = SMALL["weights"].rsplit("/")[-1]
    (cache / f"{weights}.0123abcd.incomplete").write_bytes(b"half a download")
    (cache / f"{weights}.source.4567cdef.incomplete").write_text("http://")
    assert convert("--preset", "small", "--output", tmp_path / "out") == 0
    assert not [f for f in cache_files(tmp_path) if f.endswith(".incomplete")], cache_files(tmp_path)


def test_cached_files_follow_the_umask_in_a_shared_cache(bucket, publish_fixture, tmp_path):
    """A group-shared HF_HOME (umask 002): the group reads and writes the cached files, as huggingface_hub's own."""
    umask = os.umask(0o002)
    try:
        assert convert("--preset", "small", "--output", tmp_path / "out") == 0
    finally:
        os.umask(umask)
    cache = tmp_path / "hf-home" / "assets" / "elmo-transformers" / "allennlp" / "small"
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in cache.iterdir() if not p.name.endswith(".lock")}
    assert len(modes) == 4 and set(modes.values()) == {"0o664"}, modes
