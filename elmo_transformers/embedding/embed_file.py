"""Embed a text file with ELMo into HDF5, in the layout of AllenNLP's `allennlp elmo` command.

    elmo-transformers embed INPUT OUTPUT.hdf5 [--model DIR_OR_REPO] (--all | --top | --average)
    accelerate launch --num_processes N -m elmo_transformers embed INPUT OUTPUT.hdf5 ... (or torchrun -m)

INPUT holds one sentence per line (`-` reads stdin), UTF-8, split into words as the model's tokenizer splits raw text
(on white space, or by its segmenter: raw Chinese or Japanese); a leading byte-order mark is not text. OUTPUT gets
one float32 dataset per line, keyed by its line number `str(i)` (from 0): all biLM layers
`(n_layers + 1, words, 2P)` with --all, the top layer `(words, 2P)` with --top, the plain mean of the layers
`(words, 2P)` with --average; and `sentence_to_index`, a one-element string dataset holding the JSON map
{stripped line: key}. A blank line keeps its key with an empty `(.., 0, 2P)` dataset (AllenNLP refuses such files).

Long lines: a line of more than --max-sentence-words words (default 1000) is embedded in windows of that many words
in the stateful mode of `ElmoModel.forward_windows`: each window is a sentence of its own and every LSTM starts from
the state the previous window ended in. The forward LM then reads the line as if `</S> <S>` stood between windows;
the backward LM carries its state forward across windows instead of seeing the right-hand context (bilm-tf's and
AllenNLP's stateful approximation). The model's memory depends on the window and the batch, never on a line's
length. The text itself is held in memory (every line is read before the first batch, and `sentence_to_index`, one
JSON string of every line, is written with the output's structure): memory grows by up to about 4 bytes for each
byte of input (a 200 MB line: up to about 800 MB more), and the output holds the text once more. A line longer
than 2**28 characters (about 268 million) is refused, and so is an input read from a stream (stdin from a pipe or a
terminal, a FIFO) that passes 2**28 characters in all before its end: a stream that never ends is refused once that
much is in memory (the command then holds 1.3 to 1.5 GB, a tiny model's own memory included, for lines of 2 to 25
characters), instead of filling it. A file (also one redirected to stdin with `<`) has no such bound.

A folder that `elmo-transformers export onnx` wrote, as --model, runs in onnxruntime on the CPU, in the dtype it was
exported in (another --dtype is refused), with the same layout and numbers (float rounding apart), without importing
torch; its graph is checked against its config.json first. `--runtime onnxruntime` runs a PyTorch folder that way:
its export is made on first use in the Hugging Face cache (keyed by its weights' hash and the dtype: float32, or
int8 with --dtype int8) and reused. The graph is stateless, so it cannot embed a line in windows: a line longer than
--max-sentence-words is refused before any work; raise --max-sentence-words to embed such lines whole.

Batches: lines in length order, each batch as many lines as keep lines x the longest line's words within
--batch-words (defaults.BATCH_WORDS: one budget for the CPU, a larger one for an accelerator), or --batch-size lines.
A thread prepares the next batches (the words' char ids, each word's computed once per run, padded with NumPy)
while the model runs, and another writes the finished ones, so the model waits for neither.

Each vector is written once, in place, into OUTPUT's file, made whole in its structure before the first batch and
renamed into OUTPUT once every line is done (`partial_run.PartialRun`): a kill at any moment loses at most the
batches in flight, and `--resume` continues an interrupted run without recomputing. Resuming with another input,
mode, model, dtype, --batch-size, --batch-words or --max-sentence-words is refused, naming the setting, and so is
resuming after the model changed at the same path: run.json records its config (every field but those only
training reads), its tokenizer's rules (segmenter and conversion included) and a SHA-256 of the loaded weights (of
an exported folder: runtime onnxruntime and a SHA-256 of its graph files); every key either run recorded is
compared, and the refusal names the field that differs. The batches decide the float rounding, so only the same
batches give the same numbers. OUTPUT may not be `-`: HDF5 cannot be written to stdout. While a run writes OUTPUT it
holds the lock file `OUTPUT.partial.lock`: another run on the same OUTPUT is refused while that one runs; the
operating system frees the lock of a run that ends in any way (also `kill -9`).

Several processes (accelerate launch, torchrun): every process forms the same batches and computes every N-th of
them, all write into OUTPUT's one file in OUTPUT.partial/, and the first one renames it into OUTPUT: the same file as
one process writes (to float rounding), and `--resume` works with any number of processes.
"""

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import time
from dataclasses import dataclass
from itertools import islice

import numpy as np
from tqdm import tqdm

from ..errors import DataError, UnfinishedRunError
from ..runtime import process_state, traits
from ..text_input import MAX_LINE_CHARS, checked_lines
from .batches import WordRows, Writer, in_background, work_units
from .defaults import BATCH_WORDS, FILE_FORMATS, MAX_SENTENCE_WORDS, MODES
from .parquet_output import ParquetRun
from .partial_run import FORMAT, PartialRun, check_paths, covered

WORD = re.compile(r"\S+")  # the words of str.split() (\s is str.isspace), found one at a time
LONG_LINE_CHARS = 1 << 20  # from here on words are counted without building a list of them
MAX_STREAM_CHARS = MAX_LINE_CHARS  # the most read from stdin or a pipe: what one line may hold, no more
# Config fields that only training reads: the vectors do not depend on them, so a resumed run may differ there.
FULL_DISK = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # a disk, a quota or a file-size limit that is full
TRAINING_ONLY = {"dropout", "freeze_bilm", "task_encoder", "task_encoder_dim", "mix_l2_lambda", "lm_vocab_size",
                 "lm_n_negative_samples", "lm_dropout"}


def count_words(line, tokenizer):
    """How many words `tokenizer` finds in `line` (`len(line.split())` in bounded memory for a line of any length
    where it splits on white space)."""
    if not tokenizer.splits_on_whitespace:
        return len(tokenizer.split_words(line))
    tokenizer.check_segmented(line)
    return len(line.split()) if len(line) < LONG_LINE_CHARS else sum(1 for _ in WORD.finditer(line))


def line_words(line, tokenizer):
    """The words of `line`, one at a time, as `tokenizer` splits raw text."""
    if tokenizer.splits_on_whitespace:
        return (m.group() for m in WORD.finditer(line))
    return iter(tokenizer.split_words(line))


def input_name(source):
    return "stdin" if source == "-" else getattr(source, "name", source)


def is_stream(file):
    """True for an open file whose size is not known before it ends: stdin from a pipe or a terminal, a FIFO."""
    try:
        return not stat.S_ISREG(os.fstat(file.fileno()).st_mode)
    except (AttributeError, OSError):  # no file descriptor (StringIO): already in memory
        return False


def stripped_lines(file, name):
    """The stripped lines of the open text file `file`; from a stream, at most MAX_STREAM_CHARS characters."""
    limit = MAX_STREAM_CHARS if is_stream(file) else None
    lines, read = [], 0
    for line in checked_lines(file, name):
        read += len(line)
        if limit is not None and read > limit:
            raise DataError(f"{name}: more than {limit:,} characters before its end, the most embed reads from a "
                            "stream (it holds the whole input in memory until the end): save the text to a file "
                            "and embed the file")
        lines.append(line.strip())
    return lines


TABLE_READERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def read_column(source, column):
    """The stripped texts of column `column` of a JSON lines, CSV or Parquet file (pyarrow's readers, those of
    `datasets`), a missing value as a blank line."""
    kind = TABLE_READERS.get(os.path.splitext(str(source))[1].lower())
    if kind is None:
        raise DataError(f"{source}: {{text_column}} reads a column of a JSON lines (.jsonl), CSV (.csv) or Parquet "
                        "(.parquet) file; a text file is read one sentence a line without it", source,
                        arguments=["text_column"])
    import pyarrow as pa

    reader = {"json": "pyarrow.json:read_json", "csv": "pyarrow.csv:read_csv",
              "parquet": "pyarrow.parquet:read_table"}[kind].split(":")
    try:
        table = getattr(__import__(reader[0], fromlist=[reader[1]]), reader[1])(str(source))
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"{source}: cannot read it as {kind}: {str(e).splitlines()[0]}", source) from None
    if column not in table.column_names:
        raise DataError(f"{column}: no such column in {source} (it has {', '.join(table.column_names)})", column,
                        arguments=["text_column"])
    values = table.column(column)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type) or pa.types.is_null(values.type)):
        raise DataError(f"{column}: the column of {source} holds {values.type}, not text", column,
                        arguments=["text_column"])
    return [(text or "").strip() for text in values.to_pylist()]


def read_lines(source, text_column=None):
    """Stripped lines of a path, "-" (stdin) or an open text file, as AllenNLP reads them, without a leading
    byte-order mark (an editor's encoding mark, not part of the first word); with `text_column`, the texts of that
    column of a JSON lines, CSV or Parquet file, one a line."""
    if text_column is not None:
        return read_column(source, text_column)
    try:
        if hasattr(source, "read"):
            lines = stripped_lines(source, input_name(source))
        else:
            with open(sys.stdin.fileno() if source == "-" else source, encoding="utf-8", closefd=source != "-") as f:
                lines = stripped_lines(f, input_name(source))
    except OSError as e:
        raise OSError(f"cannot read the input {input_name(source)}: {e.strerror or e}") from None
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:].strip()
    return lines


def select(layers, mode):
    """The chosen layout of float32 biLM layers [n_layers + 1, words, 2P]."""
    return {"all": layers, "top": layers[-1], "average": layers.mean(axis=0)}[mode]


def dataset_shape(words, mode, config):
    """The shape of a line's dataset: [n_layers + 1, words, 2P] (all), else [words, 2P]."""
    return (config.n_layers + 1, words, config.hidden_size) if mode == "all" else (words, config.hidden_size)


def load_lstm_state(path, n_layers, like):
    """The LSTM state stored with a window (`PartialRun.add_window`), as `lstm_state` for the model (the device and
    dtype of the tensor `like`)."""
    import torch

    with np.load(path) as saved:
        return tuple(
            tuple(torch.from_numpy(saved[f"{kind}{k}"]).to(like.device, like.dtype) for kind in "hc")
            for k in range(n_layers)
        )


def embed_long_line(embedder, run, line_number, line, window, mode, done):
    """Embed one long line window by window, continuing after the windows already `done`."""
    start = covered(done)
    state = None
    if start:
        state = load_lstm_state(done[-1][2], embedder.model.config.n_layers, next(embedder.model.parameters()))
    words = islice(line_words(line, embedder.tokenizer), start, None)
    while chunk := list(islice(words, window)):
        layers, state = embedder.embed_window(chunk, state)
        run.add_window(line_number, start, select(layers, mode), state)
        start += len(chunk)


def weights_sha256(model):
    """SHA-256 over the name, dtype, shape and bytes of every parameter and buffer: what identifies the numbers a
    model computes with, wherever it was loaded from (the same folder path may hold other weights tomorrow)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def mapping_sha256(mapping):
    """SHA-256 of a {str: int} vocabulary (an ELMoForManyLangs char.dic or word.dic), or None without one."""
    return None if mapping is None else hashlib.sha256(json.dumps(sorted(mapping.items())).encode()).hexdigest()


def package_version(name):
    """The installed version of the distribution `name`, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def tokenizer_settings(tokenizer):
    """Everything of `tokenizer` that decides the words of a line and their ids: its byte or vocabulary rules, its
    segmenter and OpenCC conversion (white space included: every key is recorded whatever its value) and the
    versions of the packages that segment or convert (another version may split otherwise)."""
    packages = tokenizer.basic.segmenter.packages()
    return {"max_characters_per_token": tokenizer.max_characters_per_token,
            "char_vocab_sha256": mapping_sha256(tokenizer.char_vocab),
            "word_vocab_sha256": mapping_sha256(tokenizer.word_vocab),
            "segmenter": tokenizer.segmenter, "opencc_config": tokenizer.opencc_config,
            "mask_token": str(tokenizer.mask_token),  # a segmenter keeps it whole
            "packages": {name: package_version(name) for name in packages}}


def model_settings(embedder):
    """What decides the numbers `embedder` computes, as run.json records it: for an exported ONNX model its runtime
    (onnxruntime), the compute dtype, the weights (an ONNX model's: its graph files), the config (every field but
    those only training reads) and the tokenizer's rules. A resume is refused naming the first that differs, so the
    order says what: the dtype comes before the weights, whose hash it changes too, and the weights before the config
    (another model at the same path is named by its weights, not by a config field it happens to differ in)."""
    model, tokenizer, config = embedder.model, embedder.tokenizer, embedder.model.config
    runtime = traits(model)
    torch_model = runtime.runtime == "torch"
    fields = type(config).__annotations__ if torch_model else config.fields  # an export's: those of its config.json
    return {
        **({} if torch_model else {"runtime": runtime.runtime}),  # (runs started before exports have no runtime)
        "dtype": runtime.dtype,
        "weights_sha256": weights_sha256(model) if torch_model else model.weights_sha256(),
        "config": {name: getattr(config, name) for name in fields if name not in TRAINING_ONLY},
        "tokenizer": tokenizer_settings(tokenizer),
    }


def check_windows(embedder, counts, max_words, source):
    """Refuse, before any work, a line that would be embedded in stateful windows by a model that cannot carry the
    LSTM state (an exported ONNX model), naming the longest such line and the two ways on."""
    if traits(embedder.model).stateful:
        return
    longest = max(range(len(counts)), key=counts.__getitem__, default=None)
    if longest is None or counts[longest] <= max_words:
        return
    raise DataError(
        f"{max_words}: shorter than line {longest + 1} of {input_name(source)} ({counts[longest]:,} words), and an "
        "exported ONNX model cannot embed a line in windows (its graph is stateless: no LSTM state carries from one "
        f"window to the next): give {counts[longest]:,} or more to embed every line whole (memory then grows with the "
        "line), or use the PyTorch model for stateful windows", max_words)


@dataclass
class Report:
    """What a run did and where its time went (seconds): `load` (before the first batch: reading, counting, the
    output's file), `tokenizing` and `writing` (in their own threads, beside the model), `model` (the forward passes,
    with copying the inputs in), `waiting` (the model waiting for a batch), `total`."""

    lines: int = 0
    words: int = 0
    load: float = 0.0
    tokenizing: float = 0.0
    model: float = 0.0
    writing: float = 0.0
    waiting: float = 0.0
    total: float = 0.0


class timed:
    """Add the seconds a `with` block takes to `report.<part>`."""

    def __init__(self, report, part):
        self.report, self.part = report, part

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        setattr(self.report, self.part, getattr(self.report, self.part) + time.perf_counter() - self.start)


def default_batch_words(embedder):
    """The word budget of a batch on the device `embedder` runs on (defaults.BATCH_WORDS)."""
    device = getattr(embedder.model, "device", None)
    kind = "cpu" if device is None or getattr(device, "type", "cpu") == "cpu" else "accelerator"
    return BATCH_WORDS[kind]


def check_batching(batch_size, batch_words):
    """Refuse a batch size or word budget that is not a positive int, and both at once."""
    for name, value in [("batch_size", batch_size), ("batch_words", batch_words)]:
        if value is not None and (isinstance(value, bool) or not (isinstance(value, int) and value > 0)):
            raise DataError(f"{{{name}}} {value!r}: must be a positive int", value, arguments=[name])
    if batch_size is not None and batch_words is not None:
        raise DataError(f"{{batch_size}} {batch_size}: give it or {{batch_words}}, not both", batch_size,
                        arguments=["batch_size", "batch_words"])


def embed_file(embedder, input_file, output_file_path, output_format="all", batch_size=None, *, batch_words=None,
               max_sentence_words=MAX_SENTENCE_WORDS, resume=False, overwrite=False, progress=True,
               file_format="hdf5", text_column=None):
    """Embed `input_file` (a path, "-" for stdin, or an open text file; with `text_column`, that column of a JSON
    lines, CSV or Parquet file) into the HDF5 file `output_file_path` (`file_format` "parquet": a folder of Parquet
    files, `parquet_output`) with `embedder` (an `ElmoEmbedder`); see the module docstring for the layout and the
    rules. Batches hold
    `batch_size` lines, or (by default) as many lines as fit `batch_words` padded words (default: BATCH_WORDS of the
    device). Under accelerate launch / torchrun every process calls this with the same arguments. Returns a
    `Report` of what this process did and where its time went."""
    report, started_at = Report(), time.perf_counter()
    if output_format not in MODES:
        raise DataError(f"output_format must be one of {MODES}, got {output_format!r}")
    check_batching(batch_size, batch_words)
    if isinstance(max_sentence_words, bool) or not (isinstance(max_sentence_words, int) and max_sentence_words > 0):
        raise DataError(f"max_sentence_words must be a positive int, got {max_sentence_words!r}")
    if batch_size is None and batch_words is None:
        batch_words = default_batch_words(embedder)
    if file_format not in FILE_FORMATS:
        raise DataError(f"{{file_format}} {file_format!r}: one of {', '.join(FILE_FORMATS)}", file_format,
                        arguments=["file_format"])
    output = check_paths(input_file, output_file_path, overwrite, resume, getattr(embedder, "source", None),
                         file_format)
    run = (ParquetRun if file_format == "parquet" else PartialRun)(output)
    lines = read_lines(input_file, text_column)
    counts = [count_words(line, embedder.tokenizer) for line in lines]
    check_windows(embedder, counts, max_sentence_words, input_file)
    fingerprint = hashlib.sha256()
    for line in lines:
        for start in range(0, len(line), LONG_LINE_CHARS):  # a piece at a time: no copy of a long line
            fingerprint.update(line[start : start + LONG_LINE_CHARS].encode("utf-8", "surrogatepass"))
        fingerprint.update(b"\n")
    settings = {
        "format": FORMAT,
        "file_format": file_format,
        "input_sha256": fingerprint.hexdigest(),
        "mode": output_format,
        "model": embedder.source,
        "batch_size": batch_size,
        "batch_words": batch_words,
        "max_sentence_words": max_sentence_words,
        **model_settings(embedder),
    }
    if run.exists():
        run.check(settings)
    state = process_state(embedder.model)
    state.wait_for_everyone()  # every process has checked the folder before the first one writes into it
    started = not os.path.exists(run.folder)
    if state.is_main_process:
        run.claim()
    try:
        if state.is_main_process and not run.exists():
            run.start(settings, lines, [dataset_shape(n, output_format, embedder.model.config) for n in counts])
        state.wait_for_everyone()
        run.open(state.process_index, lambda i: list(line_words(lines[i], embedder.tokenizer)))
        done = run.progress()
        # Every process shares out the work left by what was done before any process adds to it: a process that read
        # the journals after another had written its first batch would share out a shorter list, and lines be lost.
        state.wait_for_everyone()
        report.load = time.perf_counter() - started_at
        units = work_units(counts, batch_size, max_sentence_words, batch_words)
        _embed_lines(embedder, run, state, done, lines, counts, units, output_format, max_sentence_words, progress,
                     report)
        run.close()
        state.wait_for_everyone()
        if state.is_main_process:
            run.finish(counts)
        state.wait_for_everyone()
    except BaseException as error:
        run.close()
        if state.is_main_process and started and os.path.isdir(run.folder) and not run.finished_lines():
            shutil.rmtree(run.folder)  # this call made it and computed nothing: leave nothing that looks resumable
        if isinstance(error, OSError) and error.errno in FULL_DISK:
            kept = run.finished_lines()
            keep = (f"the {kept:,} finished lines are kept in {run.folder}: free space there and rerun with "
                    "{resume}") if kept else "nothing was finished: free space there and rerun"
            raise UnfinishedRunError(f"writing {output} failed: {error.strerror}; {keep}", run.folder) from None
        raise
    finally:
        if state.is_main_process:
            run.release()
    report.total = time.perf_counter() - started_at
    return report


def forward(embedder, batch, mode):
    """The model on one encoded batch: float32 [batch, n_layers + 1, words, 2P] (all) or [batch, words, 2P], on
    the model's device (the mean of --average taken there too), a NumPy array for an exported model."""
    model = embedder.model
    if embedder.traits.runtime != "torch":
        layers = np.stack(model(**batch, output_hidden_states=True).hidden_states, axis=1)
        return select_batch(layers, mode)
    import torch

    device = model.device
    inputs = {name: torch.as_tensor(array).to(device, non_blocking=device.type == "cuda")  # pinned: `pinned`
              for name, array in batch.items()}
    with torch.no_grad():
        hidden = model(**inputs, output_hidden_states=True, return_dict=True).hidden_states
        if mode == "top":
            return hidden[-1].float()
        layers = torch.stack(hidden, dim=1).float()
        return layers if mode == "all" else layers.mean(dim=1)


def pinned(embedder, batch):
    """`batch` in page-locked memory where the model runs on a CUDA device (its copy in then overlaps the model's
    work), else as it is."""
    if embedder.traits.runtime != "torch" or embedder.model.device.type != "cuda":
        return batch
    import torch

    return {name: torch.from_numpy(array).pin_memory() for name, array in batch.items()}


def select_batch(layers, mode):
    """`select` for a batch [batch, n_layers + 1, words, 2P]."""
    return {"all": layers, "top": layers[:, -1], "average": layers.mean(axis=1)}[mode]


def to_host(output):
    """(array or tensor on its way to the CPU, a callable that waits for it): on a CUDA device the copy back is
    started here and waited for in the writer's thread, so that the device goes on with the next batch; from
    another device it is made here."""
    if isinstance(output, np.ndarray) or output.device.type == "cpu":
        return output, lambda: None
    if output.device.type != "cuda":
        return output.cpu(), lambda: None
    import torch

    host = output.to("cpu", non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    return host, event.synchronize


def _embed_lines(embedder, run, state, done, lines, counts, units, mode, max_sentence_words, progress, report):
    """The work of `embed_file` once OUTPUT's file is open: this process's share of the batches not yet `done`
    (`run.progress()` as every process read it before any wrote), prepared (tokenized, padded, pinned) in one thread,
    computed here, written in another; then its long lines, window by window."""
    batches, windows = done
    pending = [
        unit for unit in units
        if (unit not in batches and covered(windows.get(unit, [])) < counts[unit] if isinstance(unit, int)
            else unit[0] not in batches)
    ]
    mine = pending[state.process_index :: state.num_processes]
    if progress and state.is_main_process and state.num_processes > 1:
        print(f"{len(pending)} batches and long lines to embed, shared by {state.num_processes} processes",
              file=sys.stderr)
    size = sum(1 if isinstance(unit, int) else len(unit) for unit in mine)
    tokenizer, rows = embedder.tokenizer, WordRows(embedder.tokenizer)

    def prepare(unit):
        with timed(report, "tokenizing"):
            return unit, pinned(embedder, rows.encode([list(line_words(lines[i], tokenizer)) for i in unit]))

    def write(item):
        unit, output, wait = item
        with timed(report, "writing"):
            wait()
            output = output if isinstance(output, np.ndarray) else output.numpy()
            run.add_batch({i: output[j, ..., : counts[i], :] for j, i in enumerate(unit)})
            bar.update(len(unit))

    with tqdm(total=size, unit="line", desc="embedding", disable=not (progress and state.is_main_process)) as bar:
        with in_background(prepare(unit) for unit in mine if not isinstance(unit, int)) as prepared, \
                Writer(write) as writer:
            batches = iter(prepared)
            while True:
                with timed(report, "waiting"):
                    unit, batch = next(batches, (None, None))
                if unit is None:
                    break
                with timed(report, "model"):
                    output = forward(embedder, batch, mode)
                    writer.put((unit, *to_host(output)))
                report.lines += len(unit)
                report.words += sum(counts[i] for i in unit)
        for unit in mine:
            if isinstance(unit, int):
                with timed(report, "model"):
                    embed_long_line(embedder, run, unit, lines[unit], max_sentence_words, mode,
                                    windows.get(unit, []))
                report.lines += 1
                report.words += counts[unit]
                bar.update(1)
