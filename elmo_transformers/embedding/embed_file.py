"""Embed a text file with ELMo into HDF5 (AllenNLP's layout) or Parquet: the run of `elmo-transformers embed`, from
its checks to the finished output. docs/embedding-files.md states its rules; its parts are the modules beside this
one: the input (`inputs`), the batches and the threads that prepare and write them (`batches`), the device step
(`embedder.ElmoEmbedder.layers`), the resumable state (`partial_run`) and the two outputs (`hdf5_output`,
`parquet_output`). Under accelerate launch / torchrun every process calls `embed_file` with the same arguments."""

import contextlib
import errno
import os
import shutil
import sys
import time
from dataclasses import dataclass
from functools import partial
from itertools import islice

import numpy as np
from tqdm import tqdm

from ..errors import DataError, UnfinishedRunError, UserError
from ..runtime import process_state, traits
from .batches import Writer, in_background, work_units
from .defaults import BATCH_WORDS, FILE_FORMATS, MAX_BATCH_WORDS, MAX_SENTENCE_WORDS, MODES, OUTPUT_DTYPES
from .inputs import count_words, input_name, line_words, read_lines, text_sha256
from .partial_run import FORMAT, PartialRun, check_paths, covered

FULL_DISK = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # a disk, a quota or a file-size limit that is full
MANY_LINES = 100_000  # from here on, making the HDF5 layout takes long enough to say so


@dataclass
class Report:
    """What a run did and where its time went (seconds): `load` (before the first batch: loading the model, reading
    and counting the input, making the output), `tokenizing` and `writing` (in their own threads, beside the model),
    `model` (the forward passes, with copying the inputs in), `waiting` (the model waiting for a batch), `total`;
    and how it ran: `threads` (of the model on a CPU), `dtype`, `runtime`, `device`."""

    lines: int = 0
    words: int = 0
    load: float = 0.0
    tokenizing: float = 0.0
    model: float = 0.0
    writing: float = 0.0
    waiting: float = 0.0
    total: float = 0.0
    threads: int | None = None
    dtype: str = ""
    runtime: str = ""
    device: str = ""
    main_process: bool = True  # (the one that reports, under a launcher)


class timed:
    """Add the seconds a `with` block takes to `report.<part>`."""

    def __init__(self, report, part):
        self.report, self.part = report, part

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        setattr(self.report, self.part, getattr(self.report, self.part) + time.perf_counter() - self.start)


def check_settings(output_format, batch_size, batch_words, max_sentence_words, file_format, output_dtype, threads):
    """Refuse, before any work, a setting that cannot be used, naming it: each number within its bound (a batch's
    memory grows with its padded words: MAX_BATCH_WORDS; more threads than CPUs only slow the LSTM's steps, and
    tens of thousands crash the threading libraries)."""
    if output_format not in MODES:
        raise DataError(f"{{output_format}} {output_format!r:.50}: one of {', '.join(MODES)}", output_format,
                        arguments=["output_format"])
    cpus = os.cpu_count() or 1
    for name, value, most, why in [
        ("batch_size", batch_size, MAX_BATCH_WORDS, f"a batch holds at most {MAX_BATCH_WORDS:,} padded words"),
        ("batch_words", batch_words, MAX_BATCH_WORDS, "the most a batch may hold (its memory grows with it)"),
        ("threads", threads, cpus, f"this machine has {cpus} CPUs, and more threads only slow the LSTM"),
        ("max_sentence_words", max_sentence_words, MAX_BATCH_WORDS, "the longest window a batch may hold"),
    ]:
        if value is not None and (isinstance(value, bool) or not (isinstance(value, int) and value > 0)):
            raise DataError(f"{{{name}}} {value!r:.50}: must be a positive int", value, arguments=[name])
        if value is not None and value > most:
            raise DataError(f"{{{name}}} {value:,}: at most {most:,} ({why})", value, arguments=[name])
    if max_sentence_words is None:
        raise DataError("{max_sentence_words} None: must be a positive int", arguments=["max_sentence_words"])
    if batch_size is not None and batch_words is not None:
        raise DataError(f"{{batch_size}} {batch_size}: give it or {{batch_words}}, not both", batch_size,
                        arguments=["batch_size", "batch_words"])
    if file_format not in FILE_FORMATS:
        raise DataError(f"{{file_format}} {file_format!r:.50}: one of {', '.join(FILE_FORMATS)}", file_format,
                        arguments=["file_format"])
    if output_dtype not in OUTPUT_DTYPES:
        why = ": neither HDF5 nor Parquet holds bfloat16" if output_dtype == "bfloat16" else ""
        raise DataError(f"{{output_dtype}} {output_dtype!r:.50}{why}; one of {', '.join(OUTPUT_DTYPES)}", output_dtype,
                        arguments=["output_dtype"])


def default_batch_words(embedder):
    """The word budget of a batch on the device `embedder` runs on (defaults.BATCH_WORDS)."""
    device = getattr(embedder.model, "device", None)
    kind = "cpu" if device is None or getattr(device, "type", "cpu") == "cpu" else "accelerator"
    return BATCH_WORDS[kind]


def dataset_shape(words, mode, config):
    """The shape of a line's vectors: [n_layers + 1, words, 2P] (all), else [words, 2P]."""
    return (config.n_layers + 1, words, config.hidden_size) if mode == "all" else (words, config.hidden_size)


@contextlib.contextmanager
def cpu_threads(threads, runtime):
    """Around a run of a PyTorch model: torch's threads set to `threads` (default: the CPUs free to this process
    now, `runtime.threads.free_cpus`, unless OMP_NUM_THREADS is set), and back afterwards. Yields the count the
    model runs with (None for an exported graph, whose onnxruntime threads are set when it loads)."""
    if runtime != "torch":
        yield None
        return
    import torch

    from ..runtime.threads import free_cpus

    before = torch.get_num_threads()
    if threads is not None or "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(threads or free_cpus())
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def check_windows(embedder, counts, max_words, source):
    """Refuse, before any work, a line that would be embedded in stateful windows by a model that cannot carry the
    LSTM state (an exported ONNX model), naming the longest such line and the two ways on."""
    if embedder.traits.stateful:
        return
    longest = max(range(len(counts)), key=counts.__getitem__, default=None)
    if longest is None or counts[longest] <= max_words:
        return
    raise DataError(
        f"{{max_sentence_words}} {max_words}: shorter than line {longest + 1} of {input_name(source)} "
        f"({counts[longest]:,} words), and an exported ONNX model cannot embed a line in windows (its graph is "
        "stateless: no LSTM state carries from one window to the next): give "
        f"{counts[longest]:,} or more to embed every line whole (memory then grows with the line), or use the PyTorch "
        "model for stateful windows", max_words, arguments=["max_sentence_words"])


def embed_file(model, input_file, output_file_path, output_format="all", batch_size=None, *, batch_words=None,
               max_sentence_words=MAX_SENTENCE_WORDS, resume=False, overwrite=False, progress=True,
               file_format="hdf5", text_column=None, output_dtype="float32", dtype=None, device=None, runtime=None,
               threads=None):
    """Embed `input_file` (a path, "-" for stdin, or an open text file; with `text_column`, that column of a JSON
    lines, CSV or Parquet file) into `output_file_path` (`file_format` "hdf5": one file; "parquet": a folder) with
    `model`: an `ElmoEmbedder`, or a model (a folder, Hub repo id or ModelFolder) loaded here in `dtype` on `device`
    in `runtime` once the paths are checked. `output_format` ("all", "top", "average") chooses the layers, stored in
    `output_dtype` (float32, or float16 at half the disk). Batches hold `batch_size` lines, or (by default) as many
    lines as fit `batch_words` padded words (default: BATCH_WORDS of the device); a line longer than
    `max_sentence_words` is embedded in stateful windows. `threads`: the model's CPU threads (`cpu_threads`).
    Returns a `Report` of what this process did and where its time went."""
    from .embedder import ElmoEmbedder

    report, started_at = Report(), time.perf_counter()
    check_settings(output_format, batch_size, batch_words, max_sentence_words, file_format, output_dtype, threads)
    given = model if isinstance(model, ElmoEmbedder) else None
    if given is None:
        from ..model_folder import open_model

        model = open_model(model)
    output, finished = check_paths(input_file, output_file_path, overwrite, resume,
                                   given.source if given is not None else model.path, file_format)
    if finished:  # the interrupted run had computed every line: its OUTPUT is now in place
        report.total = time.perf_counter() - started_at
        return report
    if resume and given is not None and given.identity() is None:
        raise UserError("{resume}: this embedder's model was given already loaded, so nothing identifies it to "
                        "resume by: save it (save_pretrained) and embed with its folder", arguments=["resume"])
    embedder = given or ElmoEmbedder(model, device=device, dtype=dtype, runtime=runtime, threads=threads)
    run_traits = traits(embedder.model)
    with cpu_threads(threads, run_traits.runtime) as torch_threads:
        report.threads = torch_threads or getattr(embedder.model, "threads", None)  # (onnxruntime's own)
        report.dtype, report.runtime = run_traits.dtype, run_traits.runtime
        report.device = str(getattr(embedder.model, "device", "cpu"))
        _run(embedder, report, started_at, input_file, output, output_format, batch_size, batch_words,
             max_sentence_words, overwrite, progress, file_format, text_column, output_dtype)
    report.total = time.perf_counter() - started_at
    return report


def _run(embedder, report, started_at, input_file, output, mode, batch_size, batch_words, max_sentence_words,
         overwrite, progress, file_format, text_column, output_dtype):
    """`embed_file` once its settings, paths and model are checked."""
    if batch_size is None and batch_words is None:
        batch_words = default_batch_words(embedder)
    run = PartialRun(output, file_format)
    lines = read_lines(input_file, text_column)
    if not lines and file_format == "parquet":
        raise DataError(f"{input_name(input_file)} has no lines: nothing to embed (`datasets` cannot read a Parquet "
                        "folder of no rows)", input_file)
    counts = [count_words(line, embedder.tokenizer) for line in lines]
    check_windows(embedder, counts, max_sentence_words, input_file)
    settings = {
        "format": FORMAT,
        "file_format": file_format,
        "input_sha256": text_sha256(lines),
        "mode": mode,
        "output_dtype": output_dtype,
        "model": embedder.source,
        "batch_size": batch_size,
        "batch_words": batch_words,
        "max_sentence_words": max_sentence_words,
        **(embedder.identity() or {"identity": None}),
    }
    resumed = run.exists()
    if resumed:
        run.check(settings)
    state = process_state(embedder.model)
    report.main_process = state.is_main_process
    state.wait_for_everyone()  # every process has checked the folder before the first one writes into it
    started = not os.path.exists(run.folder)
    if state.is_main_process:
        run.claim()
    try:
        if state.is_main_process and not run.exists():
            if progress and file_format == "hdf5" and len(lines) >= MANY_LINES:
                print(f"making the HDF5 file's {len(lines):,} datasets (AllenNLP's layout, one a line) before the "
                      "first batch; --format parquet has no such step", file=sys.stderr)
            run.start(settings, lines, [dataset_shape(n, mode, embedder.model.config) for n in counts], output_dtype)
        state.wait_for_everyone()
        words_of = partial(words_of_line, lines, embedder.tokenizer)
        run.open(state.process_index, words_of)
        units = work_units(counts, batch_size, max_sentence_words, batch_words)
        if resumed:
            run.check_progress(units, lines, words_of)
        done = run.progress()
        # Every process shares out the work left by what was done before any process adds to it: a process that read
        # the journals after another had written its first batch would share out a shorter list, and lines be lost.
        state.wait_for_everyone()
        report.load = time.perf_counter() - started_at
        _embed_lines(embedder, run, state, done, lines, counts, units, mode, max_sentence_words, progress, report,
                     output_dtype)
        run.close()
        state.wait_for_everyone()
        if state.is_main_process:
            run.finish(counts, overwrite)
        state.wait_for_everyone()
    except BaseException as error:
        run.close()
        if state.is_main_process and started and os.path.isdir(run.folder) and not run.finished_lines():
            shutil.rmtree(run.folder)  # this call made it and computed nothing: leave nothing that looks resumable
        if isinstance(error, OSError) and error.errno in FULL_DISK:
            kept = run.finished_lines()
            keep = (f"the {kept:,} finished lines are kept in {run.folder}: free space there and rerun with "
                    "{resume}") if kept else "nothing was finished: free space there and rerun"
            raise UnfinishedRunError(f"writing {output} failed: {os.strerror(error.errno)}; {keep}",
                                     run.folder) from None
        raise
    finally:
        if state.is_main_process:
            run.release()


def words_of_line(lines, tokenizer, i):
    """The words of line `i`, as `tokenizer` splits raw text (what the Parquet output stores beside its vectors)."""
    return list(line_words(lines[i], tokenizer))


def embed_long_line(embedder, run, line_number, line, window, mode, output_dtype, done):
    """Embed one long line window by window, continuing after the windows already `done`."""
    start = covered(done)
    state = None
    if start:
        state = load_lstm_state(done[-1][2], embedder.model)
    words = islice(line_words(line, embedder.tokenizer), start, None)
    while chunk := list(islice(words, window)):
        vectors, state = embedder.embed_window(chunk, state, mode, output_dtype)
        run.add_window(line_number, start, vectors, state)
        start += len(chunk)


def load_lstm_state(path, model):
    """The LSTM state stored with a window (`PartialRun.add_window`), as `lstm_state` for `model` (its device and
    dtype)."""
    import torch

    like = next(model.parameters())
    try:
        with np.load(path) as saved:
            return tuple(
                tuple(torch.from_numpy(saved[f"{kind}{k}"]).to(like.device, like.dtype) for kind in "hc")
                for k in range(model.config.n_layers)
            )
    except (OSError, ValueError, KeyError, EOFError):  # (np.load's errors for a cut or foreign file)
        raise DataError(f"cannot resume: the window state {path} cannot be read: delete {os.path.dirname(path)} to "
                        "start over") from None


def _embed_lines(embedder, run, state, done, lines, counts, units, mode, max_sentence_words, progress, report,
                 output_dtype):
    """The work once the output is open: this process's share of the batches not yet `done` (`run.progress()` as
    every process read it before any wrote), prepared (tokenized, padded, pinned) in one thread, computed here
    (`ElmoEmbedder.layers`), written in another; then its long lines, window by window."""
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
    tokenizer = embedder.tokenizer

    def prepare(unit):
        with timed(report, "tokenizing"):
            return unit, embedder.pinned(embedder.encode([list(line_words(lines[i], tokenizer)) for i in unit]))

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
                    writer.put((unit, *embedder.layers(batch, mode, output_dtype)))
                report.lines += len(unit)
                report.words += sum(counts[i] for i in unit)
        for unit in mine:
            if isinstance(unit, int):
                with timed(report, "model"):
                    embed_long_line(embedder, run, unit, lines[unit], max_sentence_words, mode, output_dtype,
                                    windows.get(unit, []))
                report.lines += 1
                report.words += counts[unit]
                bar.update(1)
