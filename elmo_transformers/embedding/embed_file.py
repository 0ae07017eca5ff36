"""Embed a text file with ELMo into HDF5, in the layout of AllenNLP's `allennlp elmo` command.

    elmo-transformers embed INPUT OUTPUT.hdf5 [--model DIR_OR_REPO] (--all | --top | --average)
    accelerate launch --num_processes N -m elmo_transformers embed INPUT OUTPUT.hdf5 ... (or torchrun -m)

INPUT holds one whitespace-tokenized sentence per line (`-` reads stdin), UTF-8; a leading byte-order mark is not
text. OUTPUT gets one float32 dataset per line, keyed by its line number `str(i)` (from 0): all biLM layers
`(n_layers + 1, words, 2P)` with --all, the top layer `(words, 2P)` with --top, the plain mean of the layers
`(words, 2P)` with --average; and `sentence_to_index`, a one-element string dataset holding the JSON map
{stripped line: key}. A blank line keeps its key with an empty `(.., 0, 2P)` dataset (AllenNLP refuses such files).

Long lines: a line of more than --max-sentence-words words (default 1000) is embedded in windows of that many words
in the stateful mode of `ElmoModel.forward_windows`: each window is a sentence of its own and every LSTM starts from
the state the previous window ended in. The forward LM then reads the line as if `</S> <S>` stood between windows;
the backward LM carries its state forward across windows instead of seeing the right-hand context (bilm-tf's and
AllenNLP's stateful approximation). The model's memory depends on the window and --batch-size, never on a line's
length. The text itself is held in memory, since `sentence_to_index` (one JSON string of every line) is written at
the end: memory grows by up to about 4 bytes for each byte of input (a 200 MB line: up to about 800 MB more), and
the output holds the text once more.

Nothing is lost on interruption: each finished batch (and each window of a long line) is written atomically into
OUTPUT.partial/, OUTPUT appears (by a rename) only once every line is done, and `--resume` continues an interrupted
run without recomputing. Resuming with another input, mode, model, dtype, --batch-size or --max-sentence-words is
refused, and so is resuming after the model's weights changed, even at the same path (run.json records a SHA-256 of
the loaded weights): the batches decide the float rounding, so only the same batches give the same numbers. While a
run writes OUTPUT, `OUTPUT.partial.owner` names its process: another run on the same OUTPUT is refused while that
one is alive.

Several processes (accelerate launch, torchrun): every process forms the same batches and computes every N-th of
them, all write into OUTPUT.partial/, and the first one assembles OUTPUT: the same file as one process writes (to
float rounding), and `--resume` works with any number of processes.
"""

import hashlib
import json
import multiprocessing
import os
import re
import shutil
import sys
from itertools import islice

import h5py
import numpy as np
import torch
from tqdm import tqdm

from ..errors import DataError
from ..output_paths import check_file_output, check_output_apart, owner_is_gone, read_owner_file, write_owner_file
from ..text_input import checked_lines
from .defaults import DEFAULT_BATCH_SIZE, DTYPE_NAMES, MAX_SENTENCE_WORDS, MODES
from .embedder import process_state

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES if name != "int8"}  # int8: quantization_config
WORD = re.compile(r"\S+")  # the words of str.split() (\s is str.isspace), found one at a time
LONG_LINE_CHARS = 1 << 20  # from here on words are counted without building a list of them


def count_words(line):
    """`len(line.split())`, in bounded memory for a line of any length."""
    return len(line.split()) if len(line) < LONG_LINE_CHARS else sum(1 for _ in WORD.finditer(line))


def input_name(source):
    return "stdin" if source == "-" else getattr(source, "name", source)


def read_lines(source):
    """Stripped lines of a path, "-" (stdin) or an open text file, as AllenNLP reads them, without a leading
    byte-order mark (an editor's encoding mark, not part of the first word)."""
    try:
        if hasattr(source, "read"):
            lines = [line.strip() for line in checked_lines(source, input_name(source))]
        else:
            with open(sys.stdin.fileno() if source == "-" else source, encoding="utf-8", closefd=source != "-") as f:
                lines = [line.strip() for line in checked_lines(f, input_name(source))]
    except OSError as e:
        raise OSError(f"cannot read the input {input_name(source)}: {e.strerror or e}") from None
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:].strip()
    return lines


def check_paths(source, output, overwrite, resume, model=None):
    """Everything about INPUT and OUTPUT that can be wrong, found before any work is done; `model` (its folder) is
    an input too."""
    if isinstance(source, (str, os.PathLike)) and source != "-":
        try:
            open(source, "rb").close()
        except OSError as e:
            raise OSError(f"cannot read the input {source}: {e.strerror or e}") from None
    check_output_apart(output, [source, model])
    check_file_output(output, overwrite)
    run = PartialRun(output)
    run.check_not_running()
    if run.exists() and not resume:
        raise DataError(f"{run.folder} holds an interrupted run: pass --resume to continue it, or delete it")


def select(layers, mode):
    """The chosen layout of float32 biLM layers [n_layers + 1, words, 2P]."""
    return {"all": layers, "top": layers[-1], "average": layers.mean(axis=0)}[mode]


def work_units(counts, batch_size, max_words):
    """The same list on every process and every run: batches of line numbers of similar length (little padding),
    then each line longer than `max_words` (an int) on its own."""
    order = sorted(range(len(counts)), key=counts.__getitem__)
    short = [i for i in order if counts[i] <= max_words]
    return [short[k : k + batch_size] for k in range(0, len(short), batch_size)] + [
        i for i in order if counts[i] > max_words
    ]


class PartialRun:
    """OUTPUT.partial/: `run.json` (what is being computed), one `shard-*.npz` per finished batch and one
    `window-LINE-START-STOP.npz` per window of a long line (with the LSTM state after it), each written to a
    temporary name and renamed, so a killed process leaves only whole files."""

    def __init__(self, output):
        self.output = output
        self.folder = output + ".partial"
        self.owner_file = self.folder + ".owner"  # names the process writing OUTPUT (output_paths.py's owner files)

    def check_not_running(self):
        """Refuse while another run, still alive, writes the same OUTPUT."""
        if not os.path.exists(self.owner_file):
            return
        owner = read_owner_file(self.owner_file) or {}
        if owner.get("pid") != os.getpid() and not owner_is_gone(owner):
            raise DataError(
                f"{self.output} is being written by process {owner.get('pid', '?')} on {owner.get('host', '?')} "
                f"(named in {self.owner_file}): wait for it to finish or stop it; "
                "if it no longer runs, delete that file"
            )

    def claim(self):
        """Announce this process as the writer of OUTPUT, taking over from a run that was killed."""
        try:
            write_owner_file(self.owner_file)
        except FileExistsError:
            self.check_not_running()
            os.remove(self.owner_file)
            write_owner_file(self.owner_file)

    def release(self):
        if (read_owner_file(self.owner_file) or {}).get("pid") == os.getpid():
            os.remove(self.owner_file)

    def exists(self):
        """Shards are written only after run.json, so a folder without it holds nothing to resume."""
        return os.path.isfile(os.path.join(self.folder, "run.json"))

    def start(self, settings):
        os.makedirs(self.folder, exist_ok=True)
        self._write("run.json", lambda f: f.write(json.dumps(settings, indent=1).encode()))

    def check(self, settings):
        """Refuse to resume a run whose input or settings differ, naming the difference."""
        with open(os.path.join(self.folder, "run.json")) as f:
            saved = json.load(f)
        for key, value in settings.items():
            if saved.get(key) != value:
                raise DataError(
                    f"cannot resume {self.folder}: it was started with {key}={saved.get(key)!r}, now "
                    f"{key}={value!r} (use the first run's settings, or delete the folder to start over)"
                )

    def progress(self):
        """(line -> shard path of finished batches, line -> sorted [(start, stop, path)] of long-line windows)."""
        batches, windows = {}, {}
        for name in sorted(os.listdir(self.folder)):
            path = os.path.join(self.folder, name)
            if name.startswith("shard-") and name.endswith(".npz"):
                with np.load(path) as shard:
                    batches.update((int(key), path) for key in shard.files)
            elif name.startswith("window-") and name.endswith(".npz"):
                line, start, stop = (int(part) for part in name[len("window-") : -len(".npz")].split("-"))
                windows.setdefault(line, []).append((start, stop, path))
        return batches, windows

    def add_batch(self, arrays):
        """Store a finished batch: {line number: array}."""
        name = f"shard-{min(arrays):09d}.npz"  # batches are disjoint: their first line names them
        self._write(name, lambda f: np.savez(f, **{str(i): a for i, a in arrays.items()}))

    def add_window(self, line, start, vectors, lstm_state):
        state = {
            f"{kind}{k}": s.float().cpu().numpy() for k, layer in enumerate(lstm_state) for kind, s in zip("hc", layer)
        }
        name = f"window-{line:09d}-{start:012d}-{start + vectors.shape[-2]:012d}.npz"
        self._write(name, lambda f: np.savez(f, vectors=vectors, **state))

    @staticmethod
    def load_state(path, n_layers, like):
        """The LSTM state stored with a window, as `lstm_state` for the model (its device and dtype)."""
        with np.load(path) as saved:
            return tuple(
                tuple(torch.from_numpy(saved[f"{kind}{k}"]).to(like.device, like.dtype) for kind in "hc")
                for k in range(n_layers)
            )

    def _write(self, name, write):
        path = os.path.join(self.folder, name)
        with open(path + ".tmp", "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)

    def finish(self, output, lines, counts, progress=True):
        """Assemble OUTPUT (written inside the partial folder, then renamed into place), then remove the folder.

        The HDF5 file is written by a child process: a full disk can crash h5py (a segfault, not an exception),
        and the computed lines must survive that with a clear message. Free space is checked first. The child
        reports each line it has written, for a progress bar of this step, which takes minutes on a large input.
        """
        batches, windows = self.progress()
        missing = [i for i, n in enumerate(counts) if i not in batches and covered(windows.get(i, [])) != n]
        if missing:
            raise DataError(f"{self.folder} lacks lines {missing[:10]}: rerun with --resume")
        files = [os.path.join(self.folder, name) for name in os.listdir(self.folder)]
        text = sum(len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass")) for line in lines)
        needed = sum(map(os.path.getsize, files)) + text + 1024 * len(lines)  # ~1 KB HDF5 per dataset
        free = shutil.disk_usage(self.folder).free
        keep = f"the computed lines are kept in {self.folder}: free space there and rerun with --resume"
        if needed > free:
            raise OSError(f"not enough disk space for {output}: it needs about {needed / 1e6:,.1f} MB, "
                          f"{free / 1e6:,.1f} MB are free; {keep}")
        staging = os.path.join(self.folder, "assembling.hdf5")
        shards = sorted(set(batches.values()))
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        receive, send = context.Pipe(duplex=False)
        writer = context.Process(target=write_hdf5_reporting, args=(send, staging, shards, windows, lines))
        writer.start()
        send.close()
        failure = None
        with tqdm(total=len(lines), unit="line", desc="writing HDF5", disable=not progress) as bar:
            try:
                while isinstance(message := receive.recv(), int):  # lines written; then None (done) or the error
                    bar.update(message)
                failure = message
            except EOFError:  # it died before reporting
                pass
        writer.join()
        if failure is not None or writer.exitcode != 0:
            failure = failure or f"the HDF5 writer died with exit code {writer.exitcode}"
            if os.path.exists(staging):
                os.remove(staging)
            raise OSError(f"writing {output} failed ({failure}; is the disk full?); {keep}")
        os.replace(staging, output)
        shutil.rmtree(self.folder)


def covered(windows):
    """Words covered by a long line's windows, counting only an unbroken run from word 0."""
    end = 0
    for start, stop, _ in windows:
        if start != end:
            break
        end = stop
    return end


def write_hdf5(path, shards, windows, lines, written=lambda lines: None):
    """The output file: each shard's datasets, each long line filled window by window, and sentence_to_index (the
    JSON map of `lines`, built here, in the writer process); `written(n)` is told as each shard's n lines and each
    long line are in."""
    with h5py.File(path, "w") as f:
        for shard in shards:
            with np.load(shard) as arrays:
                for key in arrays.files:
                    f.create_dataset(key, data=arrays[key])
                written(len(arrays.files))
        for line, pieces in windows.items():
            dataset = None
            for start, stop, piece in pieces:
                with np.load(piece) as arrays:
                    vectors = arrays["vectors"]
                if dataset is None:
                    shape = (*vectors.shape[:-2], pieces[-1][1], vectors.shape[-1])
                    dataset = f.create_dataset(str(line), shape=shape, dtype=np.float32)
                dataset[..., start:stop, :] = vectors
            written(1)
        index = json.dumps({line: str(i) for i, line in enumerate(lines)})
        f.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())[0] = index


def write_hdf5_reporting(send, path, *args):
    """`write_hdf5` in the child process: sends the number of lines written as it goes, then None, or the error's
    first line (h5py's own noise goes to a log)."""
    log = os.open(os.path.join(os.path.dirname(path), "assembly.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 2)
    try:
        write_hdf5(path, *args, written=send.send)
        send.send(None)
    except Exception as e:  # reported by the parent, which keeps the shards
        send.send(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def embed_long_line(embedder, run, line_number, line, window, mode, done):
    """Embed one long line window by window, continuing after the windows already `done`."""
    start = covered(done)
    state = None
    if start:
        state = run.load_state(done[-1][2], embedder.model.config.n_layers, next(embedder.model.parameters()))
    words = islice((m.group() for m in WORD.finditer(line)), start, None)
    while chunk := list(islice(words, window)):
        layers, state = embedder.embed_window(chunk, state)
        run.add_window(line_number, start, select(layers, mode), state)
        start += len(chunk)


def weights_sha256(model):
    """SHA-256 over the name, dtype, shape and bytes of every parameter and buffer: what identifies the numbers a
    model computes with, wherever it was loaded from (the same folder path may hold other weights tomorrow)."""
    digest = hashlib.sha256()
    for name, tensor in sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def embed_file(embedder, input_file, output_file_path, output_format="all", batch_size=DEFAULT_BATCH_SIZE, *,
               max_sentence_words=MAX_SENTENCE_WORDS, resume=False, overwrite=False, progress=True):
    """Embed `input_file` (a path, "-" for stdin, or an open text file) into the HDF5 file `output_file_path`
    with `embedder` (an `ElmoEmbedder`); see the module docstring for the layout and the rules. Under accelerate
    launch / torchrun every process calls this with the same arguments."""
    if output_format not in MODES:
        raise DataError(f"output_format must be one of {MODES}, got {output_format!r}")
    for name, value in [("batch_size", batch_size), ("max_sentence_words", max_sentence_words)]:
        if isinstance(value, bool) or not (isinstance(value, int) and value > 0):
            raise DataError(f"{name} must be a positive int, got {value!r}")
    output = os.path.abspath(output_file_path)
    check_paths(input_file, output, overwrite, resume, getattr(embedder, "source", None))
    run = PartialRun(output)
    lines = read_lines(input_file)
    fingerprint = hashlib.sha256()
    for line in lines:
        for start in range(0, len(line), LONG_LINE_CHARS):  # a piece at a time: no copy of a long line
            fingerprint.update(line[start : start + LONG_LINE_CHARS].encode("utf-8", "surrogatepass"))
        fingerprint.update(b"\n")
    settings = {
        "input_sha256": fingerprint.hexdigest(),
        "mode": output_format,
        "model": embedder.source,
        "weights_sha256": weights_sha256(embedder.model),
        "dtype": ("int8" if getattr(embedder.model, "is_quantized", False)
                  else str(embedder.model.dtype).removeprefix("torch.")),
        "batch_size": batch_size,
        "max_sentence_words": max_sentence_words,
    }
    if run.exists():
        run.check(settings)
    state = process_state()
    state.wait_for_everyone()  # every process has checked the folder before the first one writes into it
    if state.is_main_process:
        run.claim()
    try:
        _embed_lines(embedder, run, state, lines, settings, output_format, batch_size, max_sentence_words, progress)
    finally:
        if state.is_main_process:
            run.release()


def _embed_lines(embedder, run, state, lines, settings, output_format, batch_size, max_sentence_words, progress):
    """The work of `embed_file` once the paths are checked and this run owns OUTPUT."""
    if state.is_main_process and not run.exists():
        run.start(settings)
    state.wait_for_everyone()

    counts = [count_words(line) for line in lines]
    batches, windows = run.progress()
    pending = [
        unit for unit in work_units(counts, batch_size, max_sentence_words)
        if (covered(windows.get(unit, [])) < counts[unit] if isinstance(unit, int) else unit[0] not in batches)
    ]
    mine = pending[state.process_index :: state.num_processes]
    if progress and state.is_main_process and state.num_processes > 1:
        print(f"{len(pending)} batches and long lines to embed, shared by {state.num_processes} processes",
              file=sys.stderr)
    size = sum(1 if isinstance(unit, int) else len(unit) for unit in mine)
    with tqdm(total=size, unit="line", desc="embedding", disable=not (progress and state.is_main_process)) as bar:
        for unit in mine:
            if isinstance(unit, int):
                embed_long_line(embedder, run, unit, lines[unit], max_sentence_words, output_format,
                                windows.get(unit, []))
                bar.update(1)
            else:
                arrays = embedder.embed_batch([lines[i].split() for i in unit])
                run.add_batch({i: select(a, output_format) for i, a in zip(unit, arrays)})
                bar.update(len(unit))
    state.wait_for_everyone()
    if state.is_main_process:
        run.finish(run.output, lines, counts, progress)
    state.wait_for_everyone()


if __name__ == "__main__":  # python -m elmo_transformers.embedding.embed_file: the same as `elmo-transformers embed`
    from ..cli import main

    sys.exit(main(["embed", *sys.argv[1:]]))
