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
AllenNLP's stateful approximation). The model's memory depends on the window and --batch-size, never on a line's
length. The text itself is held in memory, since `sentence_to_index` (one JSON string of every line) is written at
the end: memory grows by up to about 4 bytes for each byte of input (a 200 MB line: up to about 800 MB more), and
the output holds the text once more. A line longer than 2**28 characters (about 268 million) is refused, and so is
an input read from a stream (stdin from a pipe or a terminal, a FIFO) that passes 2**28 characters in all before its
end: a stream that never ends is refused once that much is in memory (the command then holds 1.3 to 1.5 GB, a tiny
model's own memory included, for lines of 2 to 25 characters), instead of filling it. A file (also one redirected
to stdin with `<`) has no such bound.

A folder that `elmo-transformers export onnx` wrote, as --model, runs in onnxruntime on the CPU, in the dtype it was
exported in (another --dtype is refused), with the same layout and numbers (float rounding apart), without importing
torch; its graph is checked against its config.json first. `--runtime onnxruntime` runs a PyTorch folder that way:
its export is made on first use in the Hugging Face cache (keyed by its weights' hash and the dtype: float32, or
int8 with --dtype int8) and reused. The graph is stateless, so it cannot embed a line in windows: a line longer than
--max-sentence-words is refused before any work; raise --max-sentence-words to embed such lines whole.

Nothing is lost on interruption: each finished batch (and each window of a long line) is written atomically into
OUTPUT.partial/, OUTPUT appears (by a rename) only once every line is done, and `--resume` continues an interrupted
run without recomputing. Resuming with another input, mode, model, dtype, --batch-size or --max-sentence-words is
refused, naming the setting, and so is resuming after the model changed at the same path: run.json records its
config (every field but those only training reads), its tokenizer's rules and a SHA-256 of the loaded weights (of
an exported folder: runtime onnxruntime and a SHA-256 of its graph files), and the refusal names the field that
differs. The batches decide the float rounding, so only the same batches give the
same numbers. OUTPUT may not be `-`: HDF5 cannot be written to stdout. While a
run writes OUTPUT it holds the lock file `OUTPUT.partial.lock`: another run on the same OUTPUT is refused while that
one runs; the operating system frees the lock of a run that ends in any way (also `kill -9`).

Several processes (accelerate launch, torchrun): every process forms the same batches and computes every N-th of
them, all write into OUTPUT.partial/, and the first one assembles OUTPUT: the same file as one process writes (to
float rounding), and `--resume` works with any number of processes.
"""

import hashlib
import json
import os
import re
import shutil
import stat
import sys
from itertools import islice

import numpy as np
from tqdm import tqdm

from ..errors import DataError
from ..runtime import process_state, traits
from ..text_input import MAX_LINE_CHARS, checked_lines
from .defaults import DEFAULT_BATCH_SIZE, MAX_SENTENCE_WORDS, MODES
from .partial_run import PartialRun, check_paths, covered

WORD = re.compile(r"\S+")  # the words of str.split() (\s is str.isspace), found one at a time
LONG_LINE_CHARS = 1 << 20  # from here on words are counted without building a list of them
MAX_STREAM_CHARS = MAX_LINE_CHARS  # the most read from stdin or a pipe: what one line may hold, no more
# Config fields that only training reads: the vectors do not depend on them, so a resumed run may differ there.
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


def read_lines(source):
    """Stripped lines of a path, "-" (stdin) or an open text file, as AllenNLP reads them, without a leading
    byte-order mark (an editor's encoding mark, not part of the first word)."""
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


def work_units(counts, batch_size, max_words):
    """The same list on every process and every run: batches of line numbers of similar length (little padding),
    then each line longer than `max_words` (an int) on its own."""
    order = sorted(range(len(counts)), key=counts.__getitem__)
    short = [i for i in order if counts[i] <= max_words]
    return [short[k : k + batch_size] for k in range(0, len(short), batch_size)] + [
        i for i in order if counts[i] > max_words
    ]


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


def model_settings(embedder):
    """What decides the numbers `embedder` computes, as run.json records it: for an exported ONNX model its runtime
    (onnxruntime), the compute dtype, the config (every field but those only training reads), the tokenizer's rules
    and the weights (an ONNX model's: its graph files). The dtype comes before the weights, whose hash it changes
    too: a resume with another dtype is refused as such."""
    model, tokenizer, config = embedder.model, embedder.tokenizer, embedder.model.config
    runtime = traits(model)
    torch_model = runtime.runtime == "torch"
    fields = type(config).__annotations__ if torch_model else config.fields  # an export's: those of its config.json
    return {
        **({} if torch_model else {"runtime": runtime.runtime}),  # (runs started before exports have no runtime)
        "dtype": runtime.dtype,
        "config": {name: getattr(config, name) for name in fields if name not in TRAINING_ONLY},
        "tokenizer": {"max_characters_per_token": tokenizer.max_characters_per_token,
                      "char_vocab_sha256": mapping_sha256(tokenizer.char_vocab),
                      "word_vocab_sha256": mapping_sha256(tokenizer.word_vocab),
                      # how raw lines become words, where not the white-space split of runs that predate segmenters
                      **({"segmenter": tokenizer.segmenter, "opencc_config": tokenizer.opencc_config}
                         if not tokenizer.splits_on_whitespace else {})},
        "weights_sha256": weights_sha256(model) if torch_model else model.weights_sha256(),
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
    output = check_paths(input_file, output_file_path, overwrite, resume, getattr(embedder, "source", None))
    run = PartialRun(output)
    lines = read_lines(input_file)
    counts = [count_words(line, embedder.tokenizer) for line in lines]
    check_windows(embedder, counts, max_sentence_words, input_file)
    fingerprint = hashlib.sha256()
    for line in lines:
        for start in range(0, len(line), LONG_LINE_CHARS):  # a piece at a time: no copy of a long line
            fingerprint.update(line[start : start + LONG_LINE_CHARS].encode("utf-8", "surrogatepass"))
        fingerprint.update(b"\n")
    settings = {
        "input_sha256": fingerprint.hexdigest(),
        "mode": output_format,
        "model": embedder.source,
        "batch_size": batch_size,
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
        _embed_lines(embedder, run, state, lines, counts, settings, output_format, batch_size, max_sentence_words,
                     progress)
    except Exception:
        if state.is_main_process and started and os.path.isdir(run.folder) and not any(run.progress()):
            shutil.rmtree(run.folder)  # this call made it and computed nothing: leave nothing that looks resumable
        raise
    finally:
        if state.is_main_process:
            run.release()


def _embed_lines(embedder, run, state, lines, counts, settings, output_format, batch_size, max_sentence_words,
                 progress):
    """The work of `embed_file` once the paths are checked and this run owns OUTPUT (`counts`: words a line)."""
    if state.is_main_process and not run.exists():
        run.start(settings)
    state.wait_for_everyone()

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
                arrays = embedder.embed_batch([list(line_words(lines[i], embedder.tokenizer)) for i in unit])
                run.add_batch({i: select(a, output_format) for i, a in zip(unit, arrays)})
                bar.update(len(unit))
    state.wait_for_everyone()
    if state.is_main_process:
        run.finish(run.output, lines, counts, progress)
    state.wait_for_everyone()

