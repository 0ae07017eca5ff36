import atexit
import contextlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Under pytest-xdist (`-n auto`: a worker per core) each worker's torch, and the commands it starts, take their share
# of the cores, not all of them: OpenMP threads that outnumber the cores spin and wait on each other.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    os.environ.setdefault(
        "OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    )

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_NAMES = ["allennlp-tiny", "allennlp-tiny-edge"]
SHIPPED = REPO / "elmo_transformers" / "models" / "elmo-en-small"  # the default model, as the checkout has it


def command(*args):
    """The `elmo-transformers` command line of this checkout, for subprocess.run / Popen (env: `command_env()`)."""
    return [sys.executable, "-m", "elmo_transformers", *map(str, args)]


def run_command(*args, env=None, **options):
    """subprocess.run of `command(*args)` in a fresh process, with `env` (None: `command_env()`): for a test whose
    subject is the process (signals, kill -9, what it imports, resource limits); any other runs `run_cli`."""
    return subprocess.run(command(*args), env=command_env() if env is None else env, **options)


def start_command(*args, env=None, **options):
    """subprocess.Popen of `command(*args)`, as `run_command`."""
    return subprocess.Popen(command(*args), env=command_env() if env is None else env, **options)


def command_env(**variables):
    """A subprocess environment that runs this checkout's code, never an installed copy (the repository root comes
    first on the path), offline."""
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "research")]), HF_HUB_OFFLINE="1", **variables
    )


@contextlib.contextmanager
def process_state_kept():
    """What a command may change in the process that runs it, put back afterwards, so that the next test finds the
    process as it was: the environment, the working folder, the root logger's handlers and level (the training
    commands' `logging.basicConfig`), torch's thread count, the signal handlers, and the random states of Python,
    NumPy and torch (the training commands' `set_seed`; a model's new layers draw from torch's). (Warning filters
    that a module adds when it is first imported stay, as they would after any import.)"""
    import random
    import signal

    import torch

    randoms = random.getstate(), np.random.get_state(), torch.get_rng_state()
    environment, folder, root = dict(os.environ), os.getcwd(), logging.getLogger()
    handlers, level = list(root.handlers), root.level
    threads = torch.get_num_threads()
    signals = {
        number: signal.getsignal(number)
        for number in signal.valid_signals()
        if signal.getsignal(number) is not None and number not in (signal.SIGKILL, signal.SIGSTOP)
    }
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environment)
        os.chdir(folder)
        root.handlers[:] = handlers
        root.setLevel(level)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        for number, handler in signals.items():
            if signal.getsignal(number) is not handler:
                signal.signal(number, handler)
        random.setstate(randoms[0])
        np.random.set_state(randoms[1])
        torch.set_rng_state(randoms[2])


def cli_in_process(argv):
    """`elmo-transformers ARGV` run in this process by `cli.main(argv)`, as the console entry point runs it, with what
    it changes in the process put back (`process_state_kept`): (exit code, the message of a SystemExit that carries
    one, which Python itself would print on exit: argparse's usage errors)."""
    from elmo_transformers.cli import main  # imported here: HF_HUB_OFFLINE above must come first

    with process_state_kept():
        try:
            return main([str(arg) for arg in argv]), ""
        except SystemExit as e:
            return (e.code or 0, "") if isinstance(e.code, (int, type(None))) else (1, str(e.code))


@pytest.fixture
def run_cli(capfd):
    """`run_cli(*args)`: (exit code, stdout, stderr) of `elmo-transformers ARGS` run in this process
    (`cli_in_process`). The output is read from the file descriptors, so that what a child process of the command
    prints is there too."""

    def run_cli(*args):
        capfd.readouterr()  # (what came before is not the command's)
        code, message = cli_in_process(args)
        out, err = capfd.readouterr()
        return code, out, err + message

    return run_cli


# The environment of a user's isolated process (`python -I`) in the tests: a minimal one, offline, with a HOME and
# an HF_HOME of the tests' (never the user's) and the worker's share of the cores.
USER_HOME = Path(tempfile.mkdtemp(prefix="elmo-tests-home-"))
atexit.register(shutil.rmtree, USER_HOME, ignore_errors=True)
USER_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": str(USER_HOME),
    "HF_HOME": str(USER_HOME / "hf_home"),
    "HF_HUB_OFFLINE": "1",
    **{k: os.environ[k] for k in ("OMP_NUM_THREADS",) if k in os.environ},
}


def run_isolated(code, *args, folder, hf_home=None):
    """A fresh `python -I` running the script `code` with `args` in `folder` (USER_ENV; `hf_home` as HF_HOME where
    given): a user's process, which sees the installed package and the model folder, never this checkout (-I leaves
    the current folder, PYTHONPATH and user site-packages off the path). The CompletedProcess (text)."""
    script = Path(folder) / "child.py"
    script.write_text(code)
    env = dict(USER_ENV, **({"HF_HOME": str(hf_home)} if hf_home else {}))
    return subprocess.run(
        [sys.executable, "-I", str(script), *map(str, args)],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def load_fixture(name):
    """(sentences, expected arrays, options) of one AllenNLP reference fixture."""
    folder = FIXTURES / name
    sentences = json.loads((folder / "sentences.json").read_text(encoding="utf-8"))
    expected = dict(np.load(folder / "expected.npz", allow_pickle=False))
    options = json.loads((folder / "options.json").read_text())
    return sentences, expected, options


@pytest.fixture(scope="session", autouse=True)
def graphs_traced_once(tmp_path_factory):
    """The tests export the same few small models to ONNX again and again (on first use, cached, damaged, exported
    again, as a command); torch.export's trace of one is most of a minute's CPU on 2 cores. A model's graph is a
    function of its weights and config (this run's code being fixed), so `onnx_export.export_graph` traces each model
    once per test run, for every xdist worker (a file lock), and copies that graph afterwards; everything around the
    trace (the folder, the int8 rewrite, the card, the export cache and its checks, onnxruntime) runs as for a user.
    A test that replaces torch's exporter (to make it fail) gets no copy."""
    import hashlib

    import filelock
    import torch

    from elmo_transformers.runtime import onnx_export

    trace, exporter = onnx_export.export_graph, torch.onnx.export
    store = run_store(tmp_path_factory, "traced-graphs")

    def export_graph(model, tokenizer, path, contract):
        weights = model.state_dict()
        if torch.onnx.export is not exporter or sum(t.numel() * t.element_size() for t in weights.values()) > 2**27:
            return trace(model, tokenizer, path, contract)
        config = {k: v for k, v in model.config.to_dict().items() if k != "_name_or_path"}  # (not the numbers)
        key = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
        for name, tensor in sorted(weights.items()):
            key.update(name.encode() + tensor.detach().cpu().contiguous().numpy().tobytes())
        graph, opset = store / f"{key.hexdigest()}.onnx", store / f"{key.hexdigest()}.opset"
        with filelock.FileLock(f"{graph}.lock"):
            if not opset.exists():
                opset.write_text(str(trace(model, tokenizer, str(graph), contract)))
        shutil.copyfile(graph, path)
        return int(opset.read_text())

    onnx_export.export_graph = export_graph
    yield
    onnx_export.export_graph = trace


def run_store(tmp_path_factory, name):
    """A folder of this test run's, shared by its xdist workers (their base folders are in the run's)."""
    run_folder = tmp_path_factory.getbasetemp()
    store = (run_folder.parent if "PYTEST_XDIST_WORKER" in os.environ else run_folder) / name
    store.mkdir(exist_ok=True)
    return store


UNFILLED = re.compile(r"\{[A-Za-z_]\w*\}")  # a `{name}` left in a message, as a template would leave it


class LoggedMessages(logging.Handler):
    """The messages the package's own loggers (elmo_transformers.*, the model modules *_elmo) log, into `made`."""

    def __init__(self, made):
        super().__init__(logging.DEBUG)
        self.made = made

    def emit(self, record):
        if record.name.split(".")[0] == "elmo_transformers" or record.name.rsplit(".", 1)[-1].endswith("_elmo"):
            self.made.append((record.getMessage(), None))


@pytest.fixture(autouse=True)
def messages_are_whole(monkeypatch):
    """Every UserError a test makes, every line a command prints for an error (`cli.one_line`) and every message the
    package logs is whole: no unfilled `{name}`. An error about an argument starts with the argument's name, which
    `cli.one_line` replaces by the flag. Checked after each test, so that the test that reached a message names it."""
    from elmo_transformers import cli, errors

    made, init, word = [], errors.UserError.__init__, cli.one_line
    logged = LoggedMessages(made)
    logging.getLogger().addHandler(logged)

    def recorded(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append((str(self), self.argument))

    def printed(error):
        line = word(error)
        made.append((line, None))
        return line

    monkeypatch.setattr(errors.UserError, "__init__", recorded)
    monkeypatch.setattr(cli, "one_line", printed)
    yield
    logging.getLogger().removeHandler(logged)
    for message, argument in made:
        assert not UNFILLED.search(message), f"unfilled placeholder in: {message}"
        assert argument is None or message.startswith(argument), f"does not start with {argument}: {message}"


@pytest.fixture(scope="session", autouse=True)
def load_checks_once(tmp_path_factory):
    """push and push --space check the staged folder in a fresh `python -I -B` (the user's first load of it), which
    the tests ask for dozens of times, of a few folders. The check's answer is a function of its command line and the
    folder's files (this run's code being fixed; README.md aside, which no load reads), so each such folder is checked
    in a fresh process once per test run, for every xdist worker (a file lock), and that answer is given again, its
    folder named as the one asked for."""
    import hashlib
    import types

    import filelock

    from elmo_transformers.hub import repo

    store = run_store(tmp_path_factory, "load-checks")

    def run(argv, **options):
        folder = Path(argv[argv.index("-c") + 2])  # (python -I -B -c CHECK FOLDER ...)
        key = hashlib.sha256(json.dumps([a for a in argv if a != str(folder)]).encode())
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "README.md"):
            key.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
        answer = store / f"{key.hexdigest()}.json"
        with filelock.FileLock(f"{answer}.lock"):
            if not answer.exists():
                done = subprocess.run(argv, **options)
                answer.write_text(
                    json.dumps(
                        [
                            done.returncode,
                            *(text.replace(str(folder), "{folder}") for text in (done.stdout, done.stderr)),
                        ]
                    )
                )
        code, out, err = json.loads(answer.read_text())
        return subprocess.CompletedProcess(
            argv, code, out.replace("{folder}", str(folder)), err.replace("{folder}", str(folder))
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repo, "subprocess", types.SimpleNamespace(run=run))  # (check_in_fresh_process: both checks)
        yield


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """The allennlp-tiny fixture converted by the converter (both fixtures share these weights)."""
    from elmo_transformers.conversion.output import save_atomically
    from elmo_transformers.conversion.allennlp import convert

    folder = FIXTURES / "allennlp-tiny"
    model, tokenizer = convert(folder / "options.json", folder / "weights.hdf5")
    return save_atomically(model, tokenizer, tmp_path_factory.mktemp("converted") / "tiny")


@pytest.fixture(scope="session")
def tiny(tiny_model_dir):
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    return ElmoModel.from_pretrained(tiny_model_dir).eval(), ElmoTokenizer.from_pretrained(tiny_model_dir)


@contextlib.contextmanager
def char_cnn_rows_counted(model):
    """The number of words the char CNN encodes in each call, while the block runs."""
    rows = []
    hook = model.bilm.char_cnn.register_forward_hook(lambda module, args, out: rows.append(args[0].shape[0]))
    try:
        yield rows
    finally:
        hook.remove()


LM_FIXTURE = FIXTURES / "allennlp-lm-tiny"  # a biLM with AllenNLP's published softmax format, and AllenNLP's scores


def convert_lm_fixture(output, softmax=LM_FIXTURE / "softmax.hdf5", vocab=LM_FIXTURE / "vocab.txt", extra=()):
    """`elmo-transformers convert allennlp` of the LM fixture with its softmax; the exit code."""
    from elmo_transformers.cli import main

    return main(
        [
            "convert",
            "allennlp",
            "--options",
            str(LM_FIXTURE / "options.json"),
            "--weights",
            str(LM_FIXTURE / "weights.hdf5"),
            "--output",
            str(output),
            "--softmax-weights",
            str(softmax),
            "--vocab",
            str(vocab),
            *map(str, extra),
        ]
    )


@pytest.fixture(scope="session")
def lm_dir(tmp_path_factory):
    """The LM fixture converted with its softmax (ElmoForLanguageModeling), read-only for the tests."""
    folder = tmp_path_factory.mktemp("lm") / "converted"
    assert convert_lm_fixture(folder) == 0
    return folder


TOKEN_LABELS = ["O", "B-X", "I-X"]


@pytest.fixture(scope="session")
def tiny_heads_dir(tiny_model_dir, tmp_path_factory):
    """A token head (labels TOKEN_LABELS) and a sequence head (negative/positive) on the tiny converted model, with
    seeded random classifiers, saved as `token/` and `sequence/` with the tokenizer (as fine-tuning saves them)."""
    import torch

    from modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification
    from tokenization_elmo import ElmoTokenizer

    root = tmp_path_factory.mktemp("heads")
    token = ElmoForTokenClassification.from_pretrained(
        tiny_model_dir,
        id2label=dict(enumerate(TOKEN_LABELS)),
        label2id={label: i for i, label in enumerate(TOKEN_LABELS)},
    )
    sequence = ElmoForSequenceClassification.from_pretrained(
        tiny_model_dir, id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1}
    )
    torch.manual_seed(0)
    with torch.no_grad():  # sharp predictions, with runs of I-X (multi-word entity groups)
        token.classifier.weight.normal_(std=3.0)
        token.classifier.bias.copy_(torch.tensor([0.0, 0.0, 1.0]))
        sequence.classifier.weight.normal_(std=3.0)
    tokenizer = ElmoTokenizer.from_pretrained(tiny_model_dir)
    for name, model in (("token", token), ("sequence", sequence)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root


@pytest.fixture
def fake_hub(monkeypatch):
    """HfApi's create_repo and upload_folder replaced by recorders, so that a push runs without a network. Returns
    the dict they fill: "create_repo" (repo id, keyword arguments), "upload_folder" (keyword arguments), "files" (the
    uploaded folder's names) and "readme" (its README.md, read before the push removes a temporary folder)."""
    from huggingface_hub import HfApi

    calls = {}

    def create_repo(self, repo_id, **kwargs):
        calls["create_repo"] = (repo_id, kwargs)
        return f"https://huggingface.co/{'spaces/' if kwargs.get('repo_type') == 'space' else ''}{repo_id}"

    def upload_folder(self, **kwargs):
        folder = kwargs["folder_path"]
        readme = os.path.join(folder, "README.md")
        calls.update(
            upload_folder=kwargs,
            files=sorted(os.listdir(folder)),
            readme=Path(readme).read_text(encoding="utf-8") if os.path.exists(readme) else None,
        )

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    return calls


# -- the command line, run in-process or as the console entry point ------------------------------------------


def run(argv, capsys):
    """(exit code, what the user reads on stderr) of a command line run in this process (`cli_in_process`)."""
    code, message = cli_in_process(argv)
    return code, capsys.readouterr().err + message


def one_line(code, err, *fragments):
    """Exit 1 and the last stderr line is `error: ...` holding `fragments` (progress bars may come before it)."""
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert code == 1 and last.startswith("error: ") and "Traceback" not in err, err[-2000:]
    for fragment in fragments:
        assert fragment in last, last
    return last


def run_entry_point(argv, cwd, modules):
    """(exit status, which of `modules` got imported, stdout, stderr) of `elmo-transformers ARGV` in a new process."""
    code = (
        "import json, sys, elmo_transformers_cli\n"
        "try:\n    status = elmo_transformers_cli.main(sys.argv[1:])\n"
        "except SystemExit as e:\n    status = e.code\n"
        f"print(json.dumps({{'status': status, 'loaded': sorted(set({modules}) & set(sys.modules))}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, argv)],
        cwd=cwd,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(done.stdout.splitlines()[-1])
    return result["status"], result["loaded"], done.stdout, done.stderr


def missing_model_commands(tmp_path, name):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat .\n")
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a b", "label": "x"}\n')
    return {
        "demo": ["demo", "--model", name],
        "embed": ["embed", text, tmp_path / "out.hdf5", "--top", "--model", name],
        "perplexity": ["perplexity", text, "--model", name],
        "finetune": [
            "finetune",
            "sequence-classification",
            "--model-name-or-path",
            name,
            "--train-file",
            data,
            "--output-dir",
            tmp_path / "ft",
            "--do-train",
        ],
        "pretrain": [
            "pretrain",
            "--model-name-or-path",
            name,
            "--train-file",
            text,
            "--output-dir",
            tmp_path / "pt",
            "--do-train",
        ],
    }


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("the cat sat on the mat .\nthe dog sat .\n")
    return path


# Real sentences (Pride and Prejudice), for the int8 and export comparisons.
SENTENCES = [
    "It is a truth universally acknowledged , that a single man in possession of a good fortune , must be in want "
    "of a wife .",
    "However little known the feelings or views of such a man may be on his first entering a neighbourhood , this "
    "truth is so well fixed in the minds of the surrounding families .",
    "My dear Mr. Bennet , said his lady to him one day , have you heard that Netherfield Park is let at last ?",
    "Mr. Bennet replied that he had not .",
    "She put the money in the bank and sat down by the river to rest .",
    "The old man walked slowly along the bank of the river , looking for his boat .",
    "Call me Ishmael .",
    "In the beginning God created the heaven and the earth .",
]


def read_hdf5(path):
    with h5py.File(path, "r") as f:
        arrays = {key: f[key][...] for key in f if key != "sentence_to_index"}
        index = json.loads(f["sentence_to_index"][0])
        dtypes = {f[key].dtype for key in arrays}
    return arrays, index, dtypes


def interrupt_after(monkeypatch, method, calls):
    """Make `PartialRun.<method>` (the run of either output format) raise KeyboardInterrupt (Ctrl-C) once it has
    stored `calls` results."""
    from elmo_transformers.embedding.partial_run import PartialRun as run_class

    original = getattr(run_class, method)
    stored = []

    def store(self, *args):
        if len(stored) == calls:
            raise KeyboardInterrupt
        stored.append(args)
        return original(self, *args)

    monkeypatch.setattr(run_class, method, store)


def one_line_error(args):
    """The stderr of `elmo-transformers embed ARGS`, which must fail with one line `error: ...`, exit 1."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli_in_process(["embed", *args])[0] == 1
    message = err.getvalue().strip().split("\n")[-1]  # after the progress bars, if any
    assert message.startswith("error: ") and "Traceback" not in err.getvalue()
    return message
