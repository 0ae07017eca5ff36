"""`elmo-transformers embed`: a text file's ELMo vectors into HDF5 or Parquet (`embedding.embed_file` runs it; its
rules are docs/embedding-files.md's)."""

import argparse
import contextlib
import os
import sys
import time

from ..embedding.defaults import BATCH_WORDS, DTYPE_NAMES, FILE_FORMATS, MAX_SENTENCE_WORDS, OUTPUT_DTYPES, RUNTIMES
from ..models import DEFAULT_MODEL
from . import exit_code, interruption, option


DESCRIPTION = """Write the ELMo vectors of a text file, one sentence a line (or a column of a JSON lines, CSV
or Parquet file: --text-column), as AllenNLP's `allennlp elmo` writes them: an HDF5 file with one dataset a line,
keyed by the line's number from 0, and `sentence_to_index`; or, with --format parquet, a folder of Parquet files
that `datasets.load_dataset("parquet", data_dir=OUTPUT)` reads, one row a line. --all keeps every biLM layer,
--top the top one, --average their mean.

A run that is interrupted (Ctrl+C, a kill, a full disk) keeps its finished lines in OUTPUT.partial: run the same
command again with --resume. A line longer than --max-sentence-words is embedded in windows that carry the LSTM's
state. Under torchrun or accelerate launch (-m elmo_transformers embed ...) the processes share the work.

The rules, limits and figures: docs/embedding-files.md in the project."""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="elmo-transformers embed", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "input",
        help="text file, one sentence per line, split into words as the model's tokenizer "
        "splits raw text (white space, or its segmenter: jieba, fugashi...) (- for stdin)",
    )
    parser.add_argument("output", help="HDF5 file to write (with --format parquet: a folder)")
    parser.add_argument(
        "--format",
        choices=FILE_FORMATS,
        default="hdf5",
        help="hdf5 (default: AllenNLP's layout) or parquet: a folder of Parquet files, one row a line "
        "(line, words, vectors), that datasets.load_dataset('parquet', data_dir=OUTPUT) reads",
    )
    parser.add_argument(
        "--text-column", help="INPUT is a JSON lines (.jsonl), CSV or Parquet file: embed this column, one row a line"
    )
    parser.add_argument(
        "--model",
        default=str(DEFAULT_MODEL),
        help="converted ELMo folder or Hub repo id (default: the shipped model), or a folder `export "
        "onnx` wrote (run by onnxruntime)",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    for name, help_text in [
        ("all", "all biLM layers: (n_layers + 1, words, 2P) per line"),
        ("top", "the top layer: (words, 2P) per line"),
        ("average", "the plain mean of the layers: (words, 2P) per line"),
    ]:
        mode.add_argument(f"--{name}", dest="mode", action="store_const", const=name, help=help_text)
    parser.add_argument("--batch-size", type=int, help="lines per forward pass (default: as many as fit --batch-words)")
    parser.add_argument(
        "--batch-words",
        type=int,
        help="padded words per forward pass (lines x the longest line's words; lines go in length "
        f"order): default {BATCH_WORDS['cpu']} on the CPU, {BATCH_WORDS['accelerator']} on a GPU",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="CPU threads of the model (default: the CPUs free to this process now, as the machine's "
        "load and this process's CPU limits allow; OMP_NUM_THREADS where set); at most this machine's "
        "CPUs",
    )
    parser.add_argument(
        "--max-sentence-words",
        type=int,
        default=MAX_SENTENCE_WORDS,
        help="longer lines are embedded in stateful windows of this many words (default 1000)",
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        help="compute dtype (default: the model's, float32; an exported ONNX folder's is the one it "
        "was exported in); the vectors are written in --output-dtype. int8: int8 LSTM weights on the "
        "CPU, the fastest there, its vectors within the int8 rule (docs/speed.md). bfloat16 pays on "
        "CPUs with native bf16 and on GPUs",
    )
    parser.add_argument(
        "--runtime",
        choices=RUNTIMES,
        help="torch (the default for a PyTorch folder), or onnxruntime: the model's ONNX export, made "
        "on first use in the Hugging Face cache and reused (--dtype float32 or int8); an exported "
        "folder always runs in onnxruntime",
    )
    parser.add_argument("--device", help="torch device (default: the process's accelerator, else cpu)")
    parser.add_argument("--resume", action="store_true", help="continue the interrupted run in OUTPUT.partial/")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    parser.add_argument(
        "--quiet", action="store_true", help="print nothing but errors (no progress bar, no closing line of words/s)"
    )
    parser.add_argument(
        "--output-dtype",
        choices=OUTPUT_DTYPES,
        default="float32",
        help="dtype of the vectors written: float32 (default, AllenNLP's) or float16 (half the disk)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    # (after parsing: --help answers before anything loads)
    from ..embedding.embed_file import Report, embed
    from ..embedding.embedder import ElmoEmbedder
    from ..embedding.partial_run import PartialRun, check_paths
    from ..embedding.settings import EmbedSettings
    from ..model_folder import open_model

    report = None
    try:
        with (
            options_named(),
            option("--model", args.model),
            option("--dtype", args.dtype),
            option("--device", args.device),
            option("--runtime", args.runtime),
            option("--text-column", args.text_column),
        ):
            settings = EmbedSettings(
                mode=args.mode,
                file_format=args.format,
                output_dtype=args.output_dtype,
                batch_size=args.batch_size,
                batch_words=args.batch_words,
                max_sentence_words=args.max_sentence_words,
                text_column=args.text_column,
                threads=args.threads,
                resume=args.resume,
                overwrite=args.overwrite,
                progress=not args.quiet,
            )
            folder = open_model(args.model)
            output, finished = check_paths(args.input, args.output, settings, folder.path)  # before the model loads
            report = (
                Report()
                if finished
                else embed(
                    ElmoEmbedder(
                        folder, dtype=args.dtype, device=args.device, runtime=args.runtime, threads=args.threads
                    ),
                    settings,
                    args.input,
                    output,
                )
            )
        if report.main_process and not args.quiet:
            print(f"wrote {args.mode} vectors of {args.input} -> {os.path.abspath(args.output)}", file=sys.stderr)
            if args.format == "parquet":  # (batches hold lines in length order, not neighbouring lines)
                print(
                    f"its rows come in batch order: datasets.load_dataset('parquet', data_dir={args.output!r}, "
                    "split='train').sort('line') gives them in line order",
                    file=sys.stderr,
                )
            print(speed_line(report, time.perf_counter() - started), file=sys.stderr)
    except KeyboardInterrupt as e:
        partial = PartialRun(os.path.abspath(args.output), args.format)
        complete = report is not None or getattr(e, "output_complete", False)
        print(f"\ninterrupted by {interruption(e)}{what_is_kept(partial, complete)}", file=sys.stderr)
        return exit_code(e)
    return 0


# run.json's settings that an option gives, by its flag ("mode" is the flag itself: --all, --top, --average).
RECORDED_FLAGS = {
    "file_format": "--format",
    "output_dtype": "--output-dtype",
    "model": "--model",
    "batch_size": "--batch-size",
    "batch_words": "--batch-words",
    "max_sentence_words": "--max-sentence-words",
    "dtype": "--dtype",
}


def as_given(setting, value):
    """How this command's line gives `value` of run.json's `setting`; a setting no option gives is the model's (its
    weights, config and tokenizer: `ModelFolder.identity`) or the input's."""
    if setting == "mode":
        return f"--{value!s:.50}"  # (a run.json's values may be anything: each is cut short, as the library's)
    if setting == "input_sha256":
        return f"an INPUT whose text has SHA-256 {value!s:.200}"
    if setting in RECORDED_FLAGS:
        return f"{RECORDED_FLAGS[setting]} {value!s:.200}" if value is not None else f"no {RECORDED_FLAGS[setting]}"
    return f"a model of {setting} {value!r:.200}" if value is not None else f"a model without {setting}"


@contextlib.contextmanager
def options_named():
    """A resumed run refused for a setting that differs (`SettingDiffersError`) names it by this command's options
    (--top, --batch-size 4), not by the library's arguments."""
    from ..errors import DataError, SettingDiffersError

    try:
        yield
    except SettingDiffersError as e:
        raise DataError(
            f"cannot resume {e.value}: it was started with {as_given(e.setting, e.recorded)}, now "
            f"{as_given(e.setting, e.given)} (give the first run's options, or delete the folder to start over)",
            e.value,
        ) from None


def what_is_kept(partial, complete):
    """The end of the message of a run stopped by a signal: where its work is (`partial`: its PartialRun; `complete`:
    OUTPUT was put in place, by `embed` or a finished run it completed) and the command that finishes it."""
    output = partial.output
    if complete:
        return f" after the run finished: {output} is complete"
    if partial.finished():
        where = "in place" if not partial.writer.pending() else f"kept in {partial.folder}"
        return (
            f" after every line was finished: {output} is {where}; rerun with --resume to complete the run "
            f"(it removes {partial.folder})"
        )
    kept = partial.finished_lines()
    if kept:
        return f": the {kept:,} finished lines are kept in {partial.folder}; rerun with --resume"
    return " before any line was finished: nothing is kept"


def speed_line(report, seconds):
    """One line: where the command's `seconds` went, start-up (imports, loading the model, reading the input, making
    the output) apart from the work, whose words/s it gives (tokenizing and writing run in threads beside the model:
    a part near the model's time, or a long wait for batches, is the bound), and how the model ran. Under a launcher
    the words and lines are those of all the processes (the process that finished the output prints it), the parts
    this process's."""
    start_up = seconds - report.total + report.load
    work = max(seconds - start_up, 1e-9)
    threads = f"{report.threads} threads, " if report.threads else ""
    processes, parts = ("", "") if report.processes == 1 else (f" by {report.processes} processes", "this process: ")
    return (
        f"{report.words:,} words ({report.lines:,} lines){processes} in {seconds:.1f} s: start-up and load "
        f"{start_up:.1f} s, then {report.words / work:,.0f} words/s ({parts}model {report.model:.1f} s, tokenizing "
        f"{report.tokenizing:.1f} s and writing {report.writing:.1f} s beside it, waiting for batches "
        f"{report.waiting:.1f} s); {threads}{report.dtype}, {report.runtime} on {report.device}"
    )
