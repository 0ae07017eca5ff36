"""Every fenced ```python block of README.md and docs/*.md runs as written, against the installed package, from a
folder outside the checkout (a fresh `python -I`, offline), so that what a user copies works.

The rules the documents follow (docs/code-layout.md says them too):
- A block whose first line is one of OTHER_PACKAGES shows that package's code (the "before" of a migration): it is
  not run, and the test lists it.
- The names in PLACEHOLDERS stand for a model or file of the user's; the test replaces each one (as a quoted string,
  or a bare name for the ALL_CAPS ones) by a small model or file of its own. Any other name must be defined in the
  block itself.
- The blocks of one document run in order, each with fresh globals, in one process and one working folder (a block
  may read a file an earlier one wrote).
"""

import contextlib
import json
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, REPO, SHIPPED, USER_ENV, run

OTHER_PACKAGES = ("# AllenNLP", "# TF-Hub (TensorFlow 1.x)", "# ELMoForManyLangs")
DOCUMENTS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "docs").glob("*/README.md")),
]  # the translated READMEs: docs/zh, docs/ja


def python_blocks(path):
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M)


@pytest.fixture(scope="module")
def placeholders(tiny_model_dir, tiny_heads_dir, tmp_path_factory):
    """Placeholder -> a folder or file path of the test's."""
    from elmo_transformers.cli import main

    efml, efml_ja = (tmp_path_factory.mktemp("efml") / name for name in ("zh", "ja"))
    for folder, segmenter in ((efml, "jieba"), (efml_ja, "fugashi")):  # as --preset zh-hans and ja set them
        assert (
            main(
                [
                    "convert",
                    "elmoformanylangs",
                    str(FIXTURES / "efml-charword" / "model"),
                    "--segmenter",
                    segmenter,
                    "--output",
                    str(folder),
                ]
            )
            == 0
        )
    tfhub = tmp_path_factory.mktemp("tfhub") / "converted"
    assert main(["convert", "tensorflow", str(FIXTURES / "tensorflow" / "tfhub-2layer"), "--output", str(tfhub)]) == 0
    return {
        "elmo-original-lm": SHIPPED,
        "elmo-original": tiny_model_dir,
        "elmo-zh": efml,
        "elmo-ja": efml_ja,
        "elmo-tfhub-3": tfhub,
        "DIR_OR_REPO": tiny_model_dir,
        "path/to/elmo": tiny_model_dir,
        "FOLDER_OR_REPO": tiny_heads_dir / "token",
        "POS_FOLDER": tiny_heads_dir / "token",
        "POLARITY_FOLDER": tiny_heads_dir / "sequence",
    }


def fill_in(code, placeholders):
    for name, path in placeholders.items():  # the longer of two names that start alike comes first
        quoted = f'"{path}"'
        code = code.replace(f'"{name}"', quoted)
        if name.isupper():
            code = re.sub(rf"\b{name}\b", quoted, code)
    return code


def shell_command_lines(path):
    """The `elmo-transformers ...` lines of a document's ```bash blocks, continuations joined, comments cut."""
    lines = []
    for block in re.findall(r"^```(?:bash|shell|sh|console)\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.split(" #")[0].strip().removeprefix("$ ")
            if line.startswith("elmo-transformers "):
                lines.append(line)
    return lines


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_every_python_block_parses(document):
    """Also the blocks the slow test does not run (other packages' code) and in the fast loop."""
    for number, block in enumerate(python_blocks(document)):
        compile(block, f"{document.name}, python block {number}", "exec")


def command_help(words, capsys):
    """What `elmo-transformers WORDS --help` prints (and --help-trainer for the training commands)."""
    from elmo_transformers.cli import main

    text = ""
    for flag in ("--help", "--help-trainer") if words[0] in ("pretrain", "finetune") else ("--help",):
        with contextlib.suppress(SystemExit):  # argparse's --help exits 0
            main([*words, flag])
        text += capsys.readouterr().out
    return text


def test_every_command_line_in_the_docs_names_a_command_and_its_flags(capsys):
    """Each `elmo-transformers` line of a ```bash block: a command, its format or task where it has them, and only
    flags that command's --help (or --help-trainer) lists."""
    from elmo_transformers.cli import COMMANDS

    helps, checked = {}, 0
    for document in DOCUMENTS:
        for line in shell_command_lines(document):
            words = line.split()[1:]
            assert words[0] in COMMANDS, f"{document.name}: {line}"
            command = words[:2] if words[0] in ("convert", "export", "finetune") else words[:1]
            key = " ".join(command)
            if key not in helps:
                helps[key] = command_help(command, capsys)
                assert "usage" in helps[key].lower(), f"{document.name}: {line}: {helps[key][:300]}"
            for flag in (word.split("=")[0] for word in words if word.startswith("--")):
                assert re.search(rf"{re.escape(flag)}(?![\w-])", helps[key]), f"{document.name}: {flag} in {line}"
                checked += 1
    assert checked > 0


@pytest.mark.slow
def test_every_command_on_the_samples_runs(placeholders, tmp_path, monkeypatch, capsys):
    """The fine-tuning commands of the docs name files of docs/samples/, not files of the user's: each runs as
    written from a folder holding them, and every sample is used."""
    samples = REPO / "docs" / "samples"
    lines = [line for document in DOCUMENTS for line in shell_command_lines(document) if "docs/samples/" in line]
    used = {word for line in lines for word in shlex.split(line) if word.startswith("docs/samples/")}
    assert used == {f"docs/samples/{p.name}" for p in samples.iterdir()}
    for number, line in enumerate(lines):
        folder = tmp_path / str(number)
        shutil.copytree(samples, folder / "docs" / "samples")
        monkeypatch.chdir(folder)
        code, err = run([str(placeholders.get(word, word)) for word in shlex.split(line)[1:]], capsys)
        assert code == 0, f"{line}\n{err[-3000:]}"


# Runs the documents' blocks (argv[1]: a JSON file of {document: {"folder": ..., "blocks": [...]}}); prints, as its
# last line, JSON {document: the failure, or None}. Each document runs in a process of its own, forked after torch and
# transformers are imported (what every document's code imports first, paid once): no document sees what another
# one's code did (an `elmo_transformers.register()`, a model loaded, a folder's code imported). In it, the blocks run
# in order in the document's folder, each with fresh globals.
RUNNER = """
import json, os, sys, traceback
import torch, transformers
failures = {}
for document, run in json.load(open(sys.argv[1], encoding="utf-8")).items():
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        os.chdir(run["folder"])
        failure = None
        for number, block in enumerate(run["blocks"]):
            try:
                exec(compile(block, f"{document}, block {number}", "exec"), {"__name__": "__main__"})
            except BaseException:
                failure = f"python block {number} of the runnable ones:\\n{block}\\n{traceback.format_exc()}"
                break
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(write, json.dumps(failure).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        failure = answer.read()
    _, status = os.wait()
    failures[document] = json.loads(failure) if failure else f"its process ended with status {status}"
print(json.dumps(failures))
"""


@pytest.fixture(scope="module")
def blocks_run(placeholders, tmp_path_factory):
    """Every document's runnable blocks, run from one fresh `python -I` (a user's process; RUNNER), each document in
    a folder of its own holding sentences.txt: (the failures, by document; the process)."""
    runs = {}
    for document in DOCUMENTS:
        blocks = [fill_in(b, placeholders) for b in python_blocks(document) if not b.startswith(OTHER_PACKAGES)]
        if blocks:
            folder = tmp_path_factory.mktemp(document.stem)
            (folder / "sentences.txt").write_text(
                "The cat sat on the mat .\nELMo reads whole words .\n", encoding="utf-8"
            )
            runs[str(document)] = {"folder": str(folder), "blocks": blocks}
    request = tmp_path_factory.mktemp("blocks") / "runs.json"
    request.write_text(json.dumps(runs), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-I", "-c", RUNNER, str(request)],
        env=USER_ENV,
        cwd=request.parent,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1]), done


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_python_block_runs(document, blocks_run):
    blocks = python_blocks(document)
    skipped = [b.splitlines()[0] for b in blocks if b.startswith(OTHER_PACKAGES)]
    failures, done = blocks_run
    if len(blocks) > len(skipped):
        assert str(document) in failures and failures[str(document)] is None, (
            f"{document.name}: {failures.get(str(document))}\n{done.stderr[-2000:]}"
        )
    print(f"{document.name}: {len(blocks) - len(skipped)} blocks run; other packages' code not run: {skipped}")
