"""Absurd sizes are refused before anything is allocated: options, model configs and config.json files that ask
for huge models, and weight files that claim more than they hold, give a short error within a second, with the
process's peak memory grown by less than 100 MB (measured in a process of its own, each case after the imports)."""

import json
import shutil
import subprocess
import sys
import textwrap

import h5py
import pytest
from conftest import FIXTURES, REPO

from configuration_elmo import ElmoConfig

pytestmark = pytest.mark.slow  # each case runs in a process of its own

# One process imports torch, transformers and the package once, then forks a child for each case it reads (JSON, a
# line each: the body of a function `case` returning the error message). The child starts where a fresh process
# would be after the imports, with its peak RSS (ru_maxrss, KiB on Linux) reset to what it holds; it runs the case
# and sends back its seconds, the peak grown and the message.
MEASURER = """
import contextlib, io, json, os, resource, sys, time
sys.path[:0] = [{repo!r}]
import torch, transformers, h5py
import modeling_elmo, tokenization_elmo
from elmo_transformers.cli import main as cli
for request in sys.stdin:
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the answer is the one line the parent prints
        err = io.StringIO()
        scope = dict(cli=cli, modeling_elmo=modeling_elmo, err=err)
        exec("def case():\\n" + json.loads(request), scope)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                message = scope["case"]()
            except Exception as e:
                message = f"{{type(e).__name__}}: {{e}}"
        seconds = time.perf_counter() - start
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        os.write(write, json.dumps({{"seconds": seconds, "grown_mb": grown, "message": message,
                                    "stderr": err.getvalue()}}).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        result = f.read()
    os.wait()
    print(result.decode() or json.dumps({{"message": "the case's process died"}}), flush=True)
"""


@pytest.fixture(scope="module")
def measurer():
    process = subprocess.Popen(
        [sys.executable, "-c", MEASURER.format(repo=str(REPO))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    yield process
    process.stdin.close()
    process.wait(timeout=60)


@pytest.fixture
def measure(measurer):
    def measure(body):
        measurer.stdin.write(json.dumps(textwrap.indent(body, "    ")) + "\n")
        measurer.stdin.flush()
        line = measurer.stdout.readline()
        assert line, f"the measuring process ended (exit code {measurer.poll()})"
        result = json.loads(line)
        assert "seconds" in result, result["message"]  # the case's process died
        assert result["seconds"] < 1.0 and result["grown_mb"] < 100, result
        return result

    return measure


def allennlp_options(tmp_path, edit):
    options = json.loads((FIXTURES / "allennlp-tiny" / "options.json").read_text())
    edit(options)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    return path


def convert_allennlp(options, weights, output):
    return (
        f"code = cli(['convert', 'allennlp', '--options', {str(options)!r}, '--weights', {str(weights)!r}, "
        f"'--output', {str(output)!r}])\nassert code == 1\nreturn err.getvalue()"
    )


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda o: o["lstm"].update(dim=10**9), "lstm_dim must be an integer from 1 to 65,536"),
        (lambda o: o["lstm"].update(n_layers=10**6), "n_layers must be an integer from 1 to 64"),
        (lambda o: o["char_cnn"].update(max_characters_per_token=10**8), "max_characters_per_token must be"),
        (lambda o: o["lstm"].update(dim=8192, projection_dim=4096), "does not match the options"),  # 470M params
    ],
)
def test_allennlp_converter_refuses_absurd_options_before_allocating(tmp_path, measure, edit, fragment):
    options = allennlp_options(tmp_path, edit)
    result = measure(convert_allennlp(options, FIXTURES / "allennlp-tiny" / "weights.hdf5", tmp_path / "out"))
    assert fragment in result["message"] and len(result["message"].splitlines()) <= 12, result["message"]
    assert not (tmp_path / "out").exists()


def test_weight_file_that_claims_more_than_it_stores_is_refused(tmp_path, measure):
    """Datasets of the Original model's shapes, never written: the file is a few KB but reads as 374 MB of zeros."""
    from elmo_transformers.conversion.allennlp import config_from_options, expected_shapes, options_from_config

    options = allennlp_options(tmp_path, lambda o: o.update(options_from_config(ElmoConfig())))
    weights = tmp_path / "weights.hdf5"
    with h5py.File(weights, "w") as f:
        for name, shape in expected_shapes(config_from_options(str(options))).items():
            f.create_dataset(name, shape=shape, dtype="f4")
    assert weights.stat().st_size < 100_000
    result = measure(convert_allennlp(options, weights, tmp_path / "out"))
    assert "truncated or sparse file" in result["message"], result["message"]


def test_config_json_with_a_million_layers_is_refused_at_load(tmp_path, tiny_model_dir, measure):
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config["n_layers"] = 10**6
    (folder / "config.json").write_text(json.dumps(config))
    result = measure(f"modeling_elmo.ElmoModel.from_pretrained({str(folder)!r})")
    assert "ElmoConfig.n_layers must be an integer from 1 to 64, got 1000000" in result["message"], result


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda c: c["token_embedder"].update(max_characters_per_token=10**8), "max_characters_per_token must be"),
        (lambda c: c["encoder"].update(n_layers=10**5), "n_layers must be an integer from 1 to 64"),
        (lambda c: c["encoder"].update(n_layers=64), "... and 486 more"),  # in bounds: 62 x 8 missing
    ],
)
def test_elmoformanylangs_converter_refuses_absurd_configs_in_a_few_lines(tmp_path, measure, edit, fragment):
    model = tmp_path / "model"
    shutil.copytree(FIXTURES / "efml-charword" / "model", model)
    config = json.loads((model / "tiny_config.json").read_text())
    edit(config)
    (model / "tiny_config.json").write_text(json.dumps(config))
    result = measure(
        f"code = cli(['convert', 'elmoformanylangs', {str(model)!r}, "
        f"'--output', {str(tmp_path / 'out')!r}])"
        "\nassert code == 1\nreturn err.getvalue()"
    )
    assert fragment in result["message"] and len(result["message"].splitlines()) <= 12, result["message"]
