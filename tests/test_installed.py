"""The installed package, used as a new user would: the `elmo-transformers` command and the default model from a folder
outside the checkout, in isolated processes (`python -I`: no PYTHONPATH, no current folder on the path), so that
only what `pip install` put into the environment is used (.ci/run installs the project without -e)."""

import json
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
from conftest import FIXTURES, REPO, USER_ENV

from elmo_transformers.cli import COMMANDS

pytestmark = pytest.mark.slow


def installed(*args, cwd, timeout=600):
    """`elmo-transformers ARGS` of this environment, isolated from the checkout; the finished process."""
    command = Path(sys.executable).parent / "elmo-transformers"
    if not command.exists():
        pytest.fail(f"{command} is missing: install the project (pip install .) into this environment")
    argv = [str(command), *map(str, args)]
    done = subprocess.run(argv, env=USER_ENV, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"elmo-transformers {' '.join(map(str, args))}:\n{done.stderr[-3000:]}"
    return done


def isolated_python(code, cwd, *args):
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, *args], env=USER_ENV, cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_package_and_its_model_come_from_the_environment(tmp_path):
    got = json.loads(
        isolated_python(
            "import json, elmo_transformers, numpy as np\n"
            "e = elmo_transformers.ElmoEmbedder()\n"
            "v = e.embed_sentence(['The', 'bank', 'is', 'closed', '.'])\n"
            "print(json.dumps({'package': elmo_transformers.__file__, 'model': elmo_transformers.DEFAULT_MODEL,\n"
            "                  'source': e.source, 'shape': list(v.shape), 'finite': bool(np.isfinite(v).all())}))",
            tmp_path,
        ).splitlines()[-1]
    )
    site = str(Path(sys.prefix).resolve())  # this environment, wherever it is (.ci/run keeps it in the checkout)
    assert got["package"].startswith(site) and got["model"].startswith(site), got
    assert not got["package"].startswith(str(REPO / "elmo_transformers")), got
    assert got["source"] == got["model"] and Path(got["model"], "model.safetensors").is_file()
    assert got["shape"] == [3, 5, 256] and got["finite"]


def test_every_command_answers_help(tmp_path):
    listing = installed("--help", cwd=tmp_path).stdout
    same = subprocess.run(
        [sys.executable, "-I", "-m", "elmo_transformers", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert same.stdout == listing
    usages = json.loads(
        isolated_python(
            "import contextlib, io, json\n"
            "from elmo_transformers.cli import COMMANDS, main\n"
            "usages = {}\n"
            "for name in COMMANDS:\n"
            "    out = io.StringIO()\n"
            "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
            "        main([name, '--help'])\n"
            "    usages[name] = out.getvalue()\n"
            "print(json.dumps(usages))",
            tmp_path,
        ).splitlines()[-1]
    )
    for name in COMMANDS:
        assert name in listing
        assert f"elmo-transformers {name}" in usages[name], usages[name][:300]


# Runs the commands of argv[1] (JSON: a list of argument lists) in turn through the installed package's `cli.main`,
# up to the first that fails; prints, as its last line, JSON [exit code, stdout, stderr's end] for each.
CHAIN = """
import contextlib, io, json, sys
from elmo_transformers.cli import main
ran = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    ran.append([code, out.getvalue(), err.getvalue()[-3000:]])
    if code != 0:
        break
print(json.dumps(ran))
"""


def test_the_commands_run_outside_the_checkout(tmp_path):
    """convert -> embed -> finetune -> push (dry run) on the tiny fixture, pretrain one step from it, perplexity and
    the demo on the default model: the chain a new user follows, all from a folder of their own, in one isolated
    process (the console script itself answers --help above)."""
    tiny = FIXTURES / "allennlp-tiny"
    (tmp_path / "text.txt").write_text("The cat sat on the mat .\nELMo reads characters .\n")
    (tmp_path / "train.jsonl").write_text(
        "".join(
            json.dumps({"text": text, "label": label}) + "\n"
            for text, label in [("a fine film", "pos"), ("a dull film", "neg")] * 4
        )
    )
    (tmp_path / "corpus.txt").write_text("the cat sat on the mat .\nthe dog sat on the rug .\n" * 8)
    trainer_flags = [
        "--max-steps",
        "1",
        "--per-device-train-batch-size",
        "4",
        "--report-to",
        "none",
        "--save-strategy",
        "no",
        "--use-cpu",
    ]
    chain = [
        [
            "convert",
            "allennlp",
            "--options",
            tiny / "options.json",
            "--weights",
            tiny / "weights.hdf5",
            "--output",
            "tiny",
        ],
        ["embed", "text.txt", "vectors.hdf5", "--model", "tiny", "--top"],
        [
            "finetune",
            "sequence-classification",
            "--model-name-or-path",
            "tiny",
            "--train-file",
            "train.jsonl",
            "--output-dir",
            "head",
            "--do-train",
            *trainer_flags,
        ],
        ["push", "head", "me/elmo-head", "--dry-run", "--staging-dir", "stage"],
        [
            "pretrain",
            "--model-name-or-path",
            "tiny",
            "--train-file",
            "corpus.txt",
            "--output-dir",
            "lm",
            "--do-train",
            *trainer_flags,
        ],
        ["perplexity", "corpus.txt", "--model", "lm"],
        ["perplexity", "text.txt"],  # the default model
        ["demo"],
    ]
    chain = [[str(arg) for arg in argv] for argv in chain]
    ran = json.loads(isolated_python(CHAIN, tmp_path, json.dumps(chain)).splitlines()[-1])
    for argv, (code, _, err) in zip(chain, ran):
        assert code == 0, f"elmo-transformers {' '.join(argv)}:\n{err}"
    assert len(ran) == len(chain)
    outputs = dict(zip((" ".join(argv[:2]) for argv in chain), (out for _, out, _ in ran)))

    with h5py.File(tmp_path / "vectors.hdf5") as f:
        assert f["0"].shape == (7, 16) and f["1"].shape == (4, 16)
    assert json.loads((tmp_path / "head" / "config.json").read_text())["architectures"] == [
        "ElmoForSequenceClassification"
    ]
    assert "dry run: would upload" in outputs["push head"] and (tmp_path / "stage" / "modeling_elmo.py").is_file()
    assert "forward" in outputs["perplexity corpus.txt"] and "backward" in outputs["perplexity corpus.txt"]
    assert "text.txt: 11 words" in outputs["perplexity text.txt"], outputs["perplexity text.txt"]
    assert 'The word "bank" in 4 places' in outputs["demo"]
