"""Embed a text file with an `ElmoEmbedder` into HDF5 (AllenNLP's layout) or Parquet: the run of `elmo-transformers
embed` and of `ElmoEmbedder.embed_file`, from its checks to the finished output, orchestration only. Its parts are
the modules beside this one: the settings (`settings.EmbedSettings`), the input (`inputs`), the batches and the
threads that prepare and write them (`batches`), the device step (the embedder's `layers`), the resumable state
(`partial_run`) and the two outputs (`hdf5_output`, `parquet_output`); docs/embedding-files.md states its rules.
The command checks the paths (`partial_run.check_paths`) before it loads its model, then calls `embed`. Under
accelerate launch / torchrun every process runs it with the same arguments."""

import contextlib
import errno
import os
import shutil
import sys
import time
from dataclasses import dataclass, replace
from functools import partial
from itertools import islice

import numpy as np
from tqdm import tqdm

from ..errors import DataError, OutputError, UnfinishedRunError, UserError
from ..runtime import process_state, traits
from ..runtime.threads import cpu_threads
from .batches import Batch, LongLine, Plan, Writer, in_background
from .defaults import BATCH_WORDS, MAX_SENTENCE_WORDS
from .inputs import Input, count_words, input_name, line_words
from .partial_run import PartialRun, check_paths, covered
from .settings import EmbedSettings

FULL_DISK = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # a disk, a quota or a file-size limit that is full
MANY_LINES = 100_000  # from here on, making the HDF5 layout takes long enough to say so


@dataclass
class Report:
    """What a run did and where its time went: the `lines` and `words` it embedded (under a launcher, those of all
    its `processes` together); this process's seconds: `load` (before the first batch: reading and counting the
    input, making or opening the output), `tokenizing` and `writing` (in their own threads, beside the model),
    `model` (the forward passes, with copying the inputs in), `waiting` (the model waiting for a batch), `total` (of
    `embed`); and how it ran: `threads` (of the model on a CPU), `dtype`, `runtime`, `device`."""

    lines: int = 0
    words: int = 0
    processes: int = 1
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


def default_batch_words(embedder):
    """The word budget of a batch on the device `embedder` runs on (defaults.BATCH_WORDS)."""
    device = getattr(embedder.model, "device", None)
    kind = "cpu" if device is None or getattr(device, "type", "cpu") == "cpu" else "accelerator"
    return BATCH_WORDS[kind]


def line_shape(mode, config):
    """The shape of a line's vectors, with 0 for its words: [n_layers + 1, words, 2P] (all), else [words, 2P]."""
    return (config.n_layers + 1, 0, config.hidden_size) if mode == "all" else (0, config.hidden_size)


def dataset_shapes(counts, mode, config):
    """The shape of each line's vectors, a row a line (an int64 array: a few bytes a line, where tuples take some
    60), for the HDF5 layout (one dataset a line)."""
    shapes = np.tile(np.array(line_shape(mode, config), np.int64), (len(counts), 1))
    shapes[:, -2] = counts
    return shapes


def check_windows(embedder, scan, max_words, source):
    """Refuse, before any work, a line that would be embedded in stateful windows by a model that cannot carry the
    LSTM state (an exported ONNX model), naming the longest such line (`scan.longest`: the first of them) and the
    two ways on."""
    longest, words = scan.longest
    if embedder.traits.stateful or words <= max_words:
        return
    raise DataError(
        f"max_sentence_words {max_words}: shorter than line {longest + 1} of {input_name(source)} "
        f"({words:,} words), and an exported ONNX model cannot embed a line in windows (its graph is "
        "stateless: no LSTM state carries from one window to the next): give "
        f"{words:,} or more to embed every line whole (memory then grows with the line), or use the PyTorch "
        "model for stateful windows",
        max_words,
        argument="max_sentence_words",
    )


def embed_file(
    embedder,
    input_file,
    output_file_path,
    output_format="all",
    batch_size=None,
    *,
    batch_words=None,
    max_sentence_words=MAX_SENTENCE_WORDS,
    resume=False,
    overwrite=False,
    progress=True,
    file_format="hdf5",
    text_column=None,
    output_dtype="float32",
    threads=None,
):
    """Embed `input_file` (a path, "-" for stdin, or an open text file; with `text_column`, that column of a JSON
    lines, CSV or Parquet file) into `output_file_path` (`file_format` "hdf5": one file; "parquet": a folder) with
    `embedder`, an `ElmoEmbedder` (`ElmoEmbedder.embed_file` calls this). `output_format` ("all", "top", "average")
    chooses the layers, stored in `output_dtype` (float32, or float16 at half the disk). Batches hold `batch_size`
    lines, or (by default) as many lines as fit `batch_words` padded words (default: BATCH_WORDS of the device); a
    line longer than `max_sentence_words` is embedded in stateful windows. `threads`: the model's CPU threads
    (`runtime.threads.cpu_threads`). Returns a `Report` of what the run did and where this process's time went."""
    settings = EmbedSettings(
        mode=output_format,
        file_format=file_format,
        output_dtype=output_dtype,
        batch_size=batch_size,
        batch_words=batch_words,
        max_sentence_words=max_sentence_words,
        text_column=text_column,
        threads=threads,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
    )
    model_files = embedder.folder.path if embedder.folder is not None else embedder.source
    output, finished = check_paths(input_file, output_file_path, settings, model_files)
    if finished:  # the interrupted run had computed every line: its OUTPUT is now in place
        return Report()
    return embed(embedder, settings, input_file, output)


def embed(embedder, settings, input_file, output):
    """The run of `settings` (an `EmbedSettings`) once they, the paths (`partial_run.check_paths`: `output` is the
    absolute path it returns) and the embedder are checked: OUTPUT.partial/ made or resumed, every line not yet done
    embedded, OUTPUT put in place. Returns a `Report`."""
    report, started_at, done = Report(), time.perf_counter(), False
    run_traits = traits(embedder.model)
    try:
        with cpu_threads(settings.threads, run_traits.runtime) as torch_threads:
            report.threads = torch_threads or getattr(embedder.model, "threads", None)  # (onnxruntime's own)
            report.dtype, report.runtime = run_traits.dtype, run_traits.runtime
            report.device = str(getattr(embedder.model, "device", "cpu"))
            _run(embedder, settings, input_file, output, report, started_at)
            done = True
    except KeyboardInterrupt as stop:
        stop.output_complete = done or getattr(stop, "output_complete", False)  # (what the command's message says)
        raise
    report.total = time.perf_counter() - started_at
    return report


def _run(embedder, settings, input_file, output, report, started_at):
    """`embed` within the model's threads."""
    identity = embedder.identity()  # (a SHA-256 of the weight files: once a run)
    if settings.resume and identity is None:
        raise UserError(
            "resume: this embedder's model was given already loaded, so nothing identifies it to "
            "resume by: save it (save_pretrained) and embed with its folder",
            argument="resume",
        )
    if settings.batch_size is None and settings.batch_words is None:
        settings = replace(settings, batch_words=default_batch_words(embedder))
    run = PartialRun(output, settings.file_format)
    lines = Input(input_file, settings.text_column)
    tokenizer = embedder.tokenizer
    count = partial(count_words, tokenizer=tokenizer)
    hdf5 = settings.file_format == "hdf5"
    scan = lines.first_pass(count, settings.max_sentence_words, keep_counts=hdf5)  # (HDF5: one dataset a line)
    if not scan.lines and settings.file_format == "parquet":
        raise DataError(
            f"{input_name(input_file)} has no lines: nothing to embed (`datasets` cannot read a Parquet "
            "folder of no rows)",
            input_file,
        )
    check_windows(embedder, scan, settings.max_sentence_words, input_file)
    settings = replace(settings, input_sha256=scan.sha256, model=embedder.source, identity=identity)
    resumed = run.exists()
    if resumed:
        run.check(settings)
    state = process_state(embedder.model)
    report.main_process = state.is_main_process
    state.wait_for_everyone()  # every process has checked the folder before the first one writes into it
    started = not os.path.exists(run.folder)
    if state.is_main_process:
        run.claim()
    plan = Plan(scan.histogram, settings.batch_size, settings.max_sentence_words, settings.batch_words)

    def units():  # (the input read again, a batch handed over once its last line is read)
        return plan.units(lines.counted(count, run.folder), partial(lines.changed, run.folder))

    opened = False
    try:
        if state.is_main_process and not run.exists():
            if settings.progress and hdf5 and scan.lines >= MANY_LINES:
                print(
                    f"making the HDF5 file's {scan.lines:,} datasets (AllenNLP's layout, one a line) before the "
                    "first batch; the Parquet format has no such step",
                    file=sys.stderr,
                )
            config = embedder.model.config
            run.start(settings, lines, dataset_shapes(scan.counts, settings.mode, config) if hdf5 else None)
        scan.counts = None  # (the HDF5 layout is made: its file holds the shapes from here on)
        state.wait_for_everyone()
        run.open(state.process_index)
        opened = True
        done = run.progress()
        if resumed:
            run.check_progress(lines, units(), partial(unit_words, tokenizer=tokenizer), done)
        # Every process shares out the work left by what was done before any process adds to it: a process that read
        # the journals after another had written its first batch would share out a shorter list, and lines be lost.
        state.wait_for_everyone()
        report.load = time.perf_counter() - started_at
        _embed_lines(embedder, run, settings, state, plan, scan, units(), done, report)
        run.close()
        state.wait_for_everyone()
        if state.is_main_process:
            run.finish(settings, units(), line_shape(settings.mode, embedder.model.config))
        state.wait_for_everyone()
        add_up(report, state)
    except BaseException as error:
        run.close()
        if run.output_in_place:  # stopped as it removed its folder: OUTPUT is complete, the rest is removal
            error.output_complete = True  # (`embed`: what the command's message says)
            with contextlib.suppress(OSError, KeyboardInterrupt):  # (a second Ctrl+C: the next command removes it)
                run.remove_folder()
            raise
        if opened and isinstance(error, OSError) and not os.path.isdir(run.folder):
            raise OutputError(
                f"{run.folder} was removed while the run worked, and the vectors with it: run again", run.folder
            ) from None
        if (
            opened
            and isinstance(error, OSError)
            and settings.file_format == "parquet"
            and not os.path.isdir(run.writer.data)
        ):
            raise OutputError(
                f"{run.writer.data} was removed while the run worked, and the vectors with it: delete "
                f"{run.folder} and run again",
                run.folder,
            ) from None
        if (
            state.is_main_process
            and started
            and os.path.isdir(run.folder)
            and not os.path.islink(run.folder)
            and not run.finished()
            and not run.finished_lines()
        ):
            shutil.rmtree(run.folder)  # this call made it and computed nothing: leave nothing that looks resumable
        if isinstance(error, OSError) and error.errno in FULL_DISK:
            kept = run.finished_lines()
            limit = "raise the file-size limit (ulimit -f)" if error.errno == errno.EFBIG else "free space there"
            keep = (
                f"the {kept:,} finished lines are kept in {run.folder}: {limit} and rerun with resume=True"
                if kept
                else f"nothing was finished: {limit} and rerun"
            )
            raise UnfinishedRunError(
                f"writing {output} failed: {os.strerror(error.errno)}; {keep}", run.folder
            ) from None
        raise
    finally:
        if state.is_main_process:
            run.release()


def add_up(report, state):
    """Make `report`'s lines and words those of every process of a launched run (`state`: its `process_state`;
    torch.distributed's sum, on the processes' device), so that the process that reports speaks for the run."""
    report.processes = state.num_processes
    if state.num_processes == 1:
        return
    import torch
    import torch.distributed

    if not torch.distributed.is_initialized():  # (processes without a process group: each reports its own)
        report.processes = 1
        return
    done = torch.tensor([report.lines, report.words], dtype=torch.int64, device=state.device)
    torch.distributed.all_reduce(done)
    report.lines, report.words = (int(n) for n in done.tolist())


def unit_words(unit, tokenizer):
    """The words of each line of `unit` (a `batches.Batch` or `LongLine`), as `tokenizer` splits raw text (what the
    Parquet output stores beside its vectors)."""
    texts = unit.texts if isinstance(unit, Batch) else [unit.text]
    return [list(line_words(text, tokenizer)) for text in texts]


def embed_long_line(embedder, run, settings, unit, done):
    """Embed the long line `unit` (a `batches.LongLine`) window by window (`settings.max_sentence_words` words
    each), continuing after the windows already `done`."""
    start = covered(done)
    state = run.lstm_state(done[-1], embedder.model) if start else None
    words = islice(line_words(unit.text, embedder.tokenizer), start, None)
    while chunk := list(islice(words, settings.max_sentence_words)):
        vectors, state = embedder.embed_window(chunk, state, settings.mode, settings.output_dtype)
        run.add_window(unit, start, vectors, state, lambda: unit_words(unit, embedder.tokenizer)[0])
        start += len(chunk)


def _embed_lines(embedder, run, settings, state, plan, scan, units, done, report):
    """The work once the output is open: this process's share (`state`: its `process_state`) of the `units`
    (`batches.Plan.units` of the input, as it is read; `plan` and `scan`: their numbers) not yet `done`
    (`run.progress()` as every process read it before any wrote), prepared (tokenized, padded, pinned) in one
    thread, computed here (`ElmoEmbedder.layers`), written in another; a long line, window by window, here."""
    finished = done.finished_lines()
    if settings.progress and state.is_main_process and state.num_processes > 1:
        left = (
            len(plan)
            + len(scan.long)
            - len(np.unique(done.keys[done.held]))
            - sum(1 for line, words in scan.long.items() if covered(done.windows.get(line, [])) >= words)
        )
        print(f"{left} batches and long lines to embed, shared by {state.num_processes} processes", file=sys.stderr)
    pending = (unit for unit in units if not done.done(unit))
    mine = (unit for k, unit in enumerate(pending) if k % state.num_processes == state.process_index)
    tokenizer = embedder.tokenizer

    def prepare(unit):
        if isinstance(unit, LongLine):
            return unit, None, None
        with timed(report, "tokenizing"):
            words = unit_words(unit, tokenizer)
            return unit, words, embedder.pinned(embedder.encode(words))

    def write(item):
        unit, words, output, wait = item
        with timed(report, "writing"):
            wait()
            output = output if isinstance(output, np.ndarray) else output.numpy()
            run.add_batch({i: output[j, ..., : unit.counts[j], :] for j, i in enumerate(unit.lines.tolist())}, words)
            bar.update(len(unit.lines))

    shown = settings.progress and state.is_main_process
    size = max(scan.lines - finished, 0) // state.num_processes  # (about: the processes' shares differ by a batch)
    with tqdm(total=size, unit="line", desc="embedding", disable=not shown) as bar:
        with in_background(prepare(unit) for unit in mine) as prepared, Writer(write) as writer:
            batches = iter(prepared)
            while True:
                with timed(report, "waiting"):
                    unit, words, batch = next(batches, (None, None, None))
                if unit is None:
                    break
                if isinstance(unit, LongLine):
                    with timed(report, "model"):
                        embed_long_line(embedder, run, settings, unit, done.windows.get(unit.line, []))
                    bar.update(1)
                else:
                    with timed(report, "model"):
                        writer.put((unit, words, *embedder.layers(batch, settings.mode, settings.output_dtype)))
                report.lines += len(unit.lines)
                report.words += int(unit.counts.sum())
