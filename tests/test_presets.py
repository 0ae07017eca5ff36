"""`elmo-transformers convert allennlp --preset NAME [--with-lm]` against AllenNLP's bucket layout served from
127.0.0.1 (ELMO_TRANSFORMERS_ALLENNLP_URL), with the tiny fixtures' files under every preset's file names: every
name resolves and converts, the cache is reused, a cut download and an unreachable server fail in one line and
leave nothing that looks complete."""

import functools
import http.server
import json
import shutil
import socket
import subprocess
import threading

import numpy as np
import pytest
from conftest import FIXTURES, command, command_env, convert_lm_fixture
from safetensors.numpy import load_file

from elmo_transformers.conversion.presets import PRESETS


class Bucket(http.server.SimpleHTTPRequestHandler):
    """Serves the folder; counts GETs; with `cut` set, sends half of each .hdf5 file and closes the connection."""

    gets = []
    cut = False

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).gets.append(self.path)
        if self.cut and self.path.endswith(".hdf5"):
            path = self.translate_path(self.path)
            data = open(path, "rb").read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        super().do_GET()


@pytest.fixture
def bucket(tmp_path):
    """The bucket layout with the tiny fixture's files, served at a loopback URL; yields (url, handler class)."""
    root = tmp_path / "bucket"
    for preset in PRESETS.values():
        for key, name in preset.files(with_lm=preset.softmax is not None).items():
            source = {"options": FIXTURES / "allennlp-lm-tiny" / "options.json",
                      "weights": FIXTURES / "allennlp-lm-tiny" / "weights.hdf5",
                      "softmax": FIXTURES / "allennlp-lm-tiny" / "softmax.hdf5",
                      "vocab": FIXTURES / "allennlp-lm-tiny" / "vocab.txt"}[key]
            (root / "elmo" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, root / "elmo" / name)
    handler = type("Handler", (Bucket,), {"gets": [], "cut": False})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/elmo", handler
    server.shutdown()


def convert(tmp_path, url, *args):
    env = {**command_env(ELMO_TRANSFORMERS_ALLENNLP_URL=url, HF_HOME=str(tmp_path / "hf-home")), "HF_HUB_OFFLINE": "0"}
    return subprocess.run(command("convert", "allennlp", *args), env=env, capture_output=True, text=True, timeout=300)


def cache_files(tmp_path):
    return sorted(p.name for p in (tmp_path / "hf-home").rglob("*") if p.is_file())


@pytest.mark.slow
def test_every_preset_converts_from_the_bucket_and_reuses_the_cache(bucket, tmp_path):
    url, handler = bucket
    direct = tmp_path / "direct"
    assert convert_lm_fixture(direct) == 0  # the same files converted from disk
    want = load_file(direct / "model.safetensors")
    # small; original and original-5.5b with their language models (medium: the cut-download test's rerun)
    for name, with_lm in (("small", False), ("original", True), ("original-5.5b", True)):
        preset = PRESETS[name]
        output = tmp_path / f"{name}{'-lm' if with_lm else ''}"
        done = convert(tmp_path, url, "--preset", name, "--output", output, *(["--with-lm"] if with_lm else []))
        assert done.returncode == 0, done.stderr
        got = load_file(output / "model.safetensors")
        for key, value in got.items():  # the biLM (and softmax) as a direct conversion of the files
            np.testing.assert_array_equal(value, want.get(key, want.get(f"elmo.{key}")), err_msg=key)
        card = (output / "README.md").read_text()
        assert "license: apache-2.0" in card and f"{url}/{preset.folder}/{preset.stem}_weights.hdf5" in card
        assert json.loads((output / "config.json").read_text()).get("lm_vocab_size") == (32 if with_lm else None)
    requested = list(handler.gets)
    assert len(requested) == len(set(requested))  # each file fetched once; later conversions used the cache
    assert convert(tmp_path, url, "--preset", "small", "--output", tmp_path / "again").returncode == 0
    assert handler.gets == requested, "a second conversion must not download again"
    assert not [f for f in cache_files(tmp_path) if f.endswith(".incomplete")]


def test_with_lm_is_refused_where_no_lm_was_published(tmp_path):
    done = convert(tmp_path, "http://127.0.0.1:9/elmo", "--preset", "small", "--with-lm", "--output", tmp_path / "o")
    assert done.returncode == 1 and "published no language model for 'small'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_cut_download_and_an_unreachable_server_fail_cleanly(bucket, tmp_path):
    url, handler = bucket
    handler.cut = True
    done = convert(tmp_path, url, "--preset", "medium", "--output", tmp_path / "out")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith("error: cannot download ") and "--options/--weights" in last
    assert f"{url}/2x2048_256_2048cnn_1xhighway/" in last and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
    assert not [f for f in cache_files(tmp_path) if f.endswith(".hdf5")], cache_files(tmp_path)
    handler.cut = False  # the server mended: a rerun downloads again and succeeds
    assert convert(tmp_path, url, "--preset", "medium", "--output", tmp_path / "out").returncode == 0

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    done = convert(tmp_path, f"http://127.0.0.1:{closed}/elmo", "--preset", "original", "--output", tmp_path / "o2")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith(f"error: cannot download http://127.0.0.1:{closed}/elmo/")
    assert "Traceback" not in done.stderr and not (tmp_path / "o2").exists()
