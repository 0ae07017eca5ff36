#!/usr/bin/env python
"""ELMo inference and training speed on CPU, against an in-process baseline that follows AllenNLP's algorithm and,
optionally, AllenNLP itself; and the int8 mode's quality (cosine to fp32, a POS probe).

    python research/benchmark.py --size Original --batch-sizes 1 8 32 128 --repeats 3 \
        --allennlp-python research/allennlp-venv/bin/python --tensorflow-python research/simple-elmo-venv/bin/python
    python research/benchmark.py --size Small --batch-sizes --train-batch-size 0 \
        --document-words 1000 10000 --window 200

Random weights in the original HDF5 layout are written once for the named published size and converted with the
project's converter into `--cache` (default research/cache/, gitignored).

Speed: for each batch size one subprocess loads the model once per `--dtypes` (fp32, bf16, int8 =
`from_pretrained(..., quantization_config=ElmoInt8Config())`; fp32-aten and bf16-aten = fp32 and bf16 with
`float_kernel="aten"`, torch's own matmuls, against the float kernel the model picks for this CPU; ort-fp32 and
ort-int8 = the folder `elmo-transformers export onnx --dtype float32|int8` makes, exported once into the cache and
run by onnxruntime), makes a warm-up call of each implementation, then calls the baseline and each of ours in turn
`--repeats` times, so that all see the same load on a noisy shared machine; medians are reported, and ratios against
the baseline of the same run. Memory: each (implementation, dtype, batch size) in a fresh subprocess, a warm-up call
and one measured call; two figures: the peak RSS of the whole process (`VmHWM`: weights, loading and the calls), and
the working memory of the measured call: the Linux peak RSS (`VmHWM`) is reset after the warm-up
(`/proc/self/clear_refs`), and the figure is the new peak minus the RSS at that point, i.e. the extra memory the
inference itself needs on top of the loaded model.

With `--allennlp-python PYTHON ...` (interpreters that can import AllenNLP 2.10.1, e.g. separate venvs made by
`research/allennlp_venv.sh`), AllenNLP's own `Elmo` is also timed on the same weights and sentences, in a subprocess
of that interpreter run just before the one that times ours, and its output is compared with ours (first call: both
start from zero LSTM states). With `--tensorflow-python PYTHON ...` (environments made by
`research/simple_elmo_venv.sh`: simple_elmo 0.9.2, i.e. bilm-tf's graph, on tensorflow-cpu 2.21 + tf-keras, run with
TF_USE_LEGACY_KERAS=1), the TensorFlow ELMo users would pick instead is timed and compared the same way, on the same
files; both peers' rows share one table.

Ceilings: the fast path's FLOPs per batch over the rate of a 2048^3 GEMM in each dtype, and one step's state GEMMs
timed each way (fp32 bmm, fp32 with MKL-prepacked weights, bf16, int8): what the recurrence waits for at every step.

Corpus (`--corpus-sentences N`, the user's job end to end): N real sentences of 5-120 words (OANC segments of
`--pos-data`'s `--corpus-split`, test by default, in file order) written to a text file, then embedded into HDF5
with all layers, each whole process timed (start, imports, loading, embedding, writing): AllenNLP's own way of
embedding a file (its `ElmoEmbedder.embed_file` rule: file order, batches of 64, `batch_to_ids` + `_ElmoBiLm`, one
dataset per sentence, run by each `--allennlp-python`) against `elmo-transformers embed --all` in each dtype with
its default settings (ort-fp32 / ort-int8: `--model` the exported folder, which onnxruntime runs), alternating,
`--repeats` times; medians, and the peak RSS of each process; the exported folders' files against fp32's (the same
batches); for each of our runs the model alone on the same batches (`model_alone_worker`: the device step only,
right after each run of the job, median of `--repeats`) and the job's share of that rate; and the closing line
`embed` printed (words/s, and where its time went: start-up and load, model, tokenizing, writing). `--embed-flags`
adds flags to every `embed` run (`--device cuda`, `--batch-size 64`, `--format parquet`...); `--embed-default-threads`
lets `embed` pick its own threads; `--background-load N` runs N busy processes beside every timed command (a shared
machine).

Int8 quality (`--quality-model`, the shipped default model): the cosine of int8 to fp32 ELMo vectors of real
sentences, and a linear POS probe trained on fp32 vectors (silver POS data), tested with fp32 and with int8 vectors.

The in-process baseline (`allennlp_algorithm`) is AllenNLP 2.10's `_ElmoCharacterEncoder` + `ElmoLstm` +
`LstmCellWithProjection` algorithm written against the same weights: the char CNN for every position (padding and
BOS/EOS included), then per layer and direction a Python loop over time steps with two GEMMs (input and state) and
the projection at the current (shrinking) batch size, on the length-sorted batch.
"""

import argparse
import collections
import gc
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError:  # simple_elmo's environment (research/simple_elmo_venv.sh): only tensorflow_worker runs
    torch = F = None

REPO = Path(__file__).resolve().parents[1]

# The published sizes (https://allenai.org/allennlp/software/elmo); all share the 2048-filter char CNN.
SIZES = {
    "Small": dict(lstm_dim=1024, projection_dim=128, n_highway=1),  # 2x1024_128_2048cnn_1xhighway
    "Medium": dict(lstm_dim=2048, projection_dim=256, n_highway=1),  # 2x2048_256_2048cnn_1xhighway
    "Original": dict(lstm_dim=4096, projection_dim=512, n_highway=2),  # 2x4096_512_2048cnn_2xhighway
}
# word vocabulary of the benchmark sentences and of the LM head's softmax
LM_VOCAB = 10_000
# how ours runs; see load_model
DTYPES = ("fp32", "bf16", "int8", "ort-fp32", "ort-int8", "fp32-aten", "bf16-aten", "int8-quantized", "int8-onednn")
ONNX_DTYPES = {"ort-fp32": "float32", "ort-int8": "int8"}  # the exported folders' (`export onnx --dtype`)


def converted_model_dir(size, cache):
    """Random original-format weights for `size`, converted once; returns the converted folder."""
    from configuration_elmo import ElmoConfig
    from elmo_transformers.conversion.output import save_atomically
    from elmo_transformers.conversion.allennlp import convert, options_from_config, write_random_weights

    folder = Path(cache) / size
    output = folder / "converted"
    if (output / "config.json").exists():
        return output
    folder.mkdir(parents=True, exist_ok=True)
    config = ElmoConfig(**SIZES[size])
    (folder / "options.json").write_text(json.dumps(options_from_config(config)))
    write_random_weights(config, folder / "weights.hdf5", seed=0)
    model, tokenizer = convert(folder / "options.json", folder / "weights.hdf5")
    save_atomically(model, tokenizer, output, overwrite=True)
    return output


def sentences(batch_size, seed=0):
    """`batch_size` sentences of 20-25 words drawn from a Zipfian 10k-word vocabulary (so words repeat as in text)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=rng.integers(1, 12))) for _ in range(LM_VOCAB)]
    probs = 1.0 / np.arange(1, LM_VOCAB + 1)
    probs /= probs.sum()
    return [[vocab[i] for i in rng.choice(LM_VOCAB, size=rng.integers(20, 26), p=probs)] for _ in range(batch_size)]


# ----- The AllenNLP-algorithm baseline ------------------------------------------------------------------------------


def allennlp_algorithm(model, input_ids, attention_mask):
    """AllenNLP's `Elmo` forward, step by step as `LstmCellWithProjection` does it; returns the biLM layers
    [n_layers + 1, B, words, 2P] (BOS/EOS removed, zeros at padding)."""
    with torch.no_grad():
        mask = (input_ids > 0).any(-1) & attention_mask.bool()
        char_ids, lengths = model._add_sentence_boundaries(input_ids, mask)
        batch, steps, chars = char_ids.shape
        # _ElmoCharacterEncoder: every position, padding included.
        embedding = model.bilm.char_cnn(char_ids.view(-1, chars)).view(batch, steps, -1)
        embedding = embedding * (torch.arange(steps) < lengths.unsqueeze(1)).unsqueeze(-1).to(embedding.dtype)
        # _EncoderBase.sort_and_run_forward
        sorted_lengths, order = lengths.sort(descending=True)
        batch_lengths = sorted_lengths.tolist()
        inputs = embedding[order]
        layers = [torch.cat([inputs, inputs], -1)]
        forward_input, backward_input = inputs, inputs
        for index, layer in enumerate(model.bilm.layers):
            outputs = []
            for direction, layer_input in enumerate((forward_input, backward_input)):
                weights = (
                    layer.input_weight[direction],
                    layer.state_weight[direction],
                    layer.bias[direction, 0],
                    layer.projection_weight[direction],
                )
                output = lstm_cell_with_projection(
                    layer_input, batch_lengths, weights, direction == 0, model.config.cell_clip, model.config.proj_clip
                )
                if index > 0 and model.config.use_skip_connections:
                    output = output + layer_input
                outputs.append(output)
            forward_input, backward_input = outputs
            layers.append(torch.cat(outputs, -1))
        unsort = order.argsort()
        words = input_ids.shape[1]
        keep = mask.unsqueeze(-1).to(embedding.dtype)
        return torch.stack([layer[unsort][:, 1 : words + 1] * keep for layer in layers])


def lstm_cell_with_projection(inputs, batch_lengths, weights, go_forward, cell_clip, proj_clip):
    """AllenNLP's `LstmCellWithProjection.forward`: one direction, one step at a time, input and state GEMMs per
    step at the number of sentences still running."""
    input_weight, state_weight, bias, projection_weight = weights
    batch, total_timesteps, _ = inputs.shape
    cell_size = state_weight.shape[1] // 4
    output_accumulator = inputs.new_zeros(batch, total_timesteps, projection_weight.shape[1])
    full_batch_previous_memory = inputs.new_zeros(batch, cell_size)
    full_batch_previous_state = inputs.new_zeros(batch, projection_weight.shape[1])
    current_length_index = batch - 1 if go_forward else 0
    for timestep in range(total_timesteps):
        index = timestep if go_forward else total_timesteps - timestep - 1
        if go_forward:
            while batch_lengths[current_length_index] <= index:
                current_length_index -= 1
        else:
            while current_length_index < len(batch_lengths) - 1 and batch_lengths[current_length_index + 1] > index:
                current_length_index += 1
        previous_memory = full_batch_previous_memory[0 : current_length_index + 1].clone()
        previous_state = full_batch_previous_state[0 : current_length_index + 1]
        timestep_input = inputs[0 : current_length_index + 1, index]
        projected_input = timestep_input @ input_weight
        projected_state = torch.addmm(bias, previous_state, state_weight)
        c = cell_size
        input_gate = torch.sigmoid(projected_input[:, 0:c] + projected_state[:, 0:c])
        forget_gate = torch.sigmoid(projected_input[:, c : 2 * c] + projected_state[:, c : 2 * c])
        memory_init = torch.tanh(projected_input[:, 2 * c : 3 * c] + projected_state[:, 2 * c : 3 * c])
        output_gate = torch.sigmoid(projected_input[:, 3 * c :] + projected_state[:, 3 * c :])
        memory = input_gate * memory_init + forget_gate * previous_memory
        if cell_clip is not None:
            memory = torch.clamp(memory, -cell_clip, cell_clip)
        timestep_output = (output_gate * torch.tanh(memory)) @ projection_weight
        if proj_clip is not None:
            timestep_output = torch.clamp(timestep_output, -proj_clip, proj_clip)
        full_batch_previous_memory = full_batch_previous_memory.clone()
        full_batch_previous_state = full_batch_previous_state.clone()
        full_batch_previous_memory[0 : current_length_index + 1] = memory
        full_batch_previous_state[0 : current_length_index + 1] = timestep_output
        output_accumulator[0 : current_length_index + 1, index] = timestep_output
    return output_accumulator


def bilm_flops(config, words, distinct_words, n_sentences):
    """The fast path's arithmetic for one batch (2 x multiply-adds): the LSTMs over the words plus BOS/EOS of each
    sentence, the char CNN + highway + projection once per distinct word (+ BOS, EOS)."""
    hidden, proj, n_filters = config.lstm_dim, config.projection_dim, config.n_filters
    lstm_step = proj * 4 * hidden + proj * 4 * hidden + hidden * proj  # input, state, projection GEMMs
    lstm = (words + 2 * n_sentences) * config.n_layers * 2 * lstm_step
    chars, char_dim = config.max_characters_per_token, config.char_embedding_dim
    cnn = sum((chars - width + 1) * width * char_dim * n for width, n in config.filters)
    token = cnn + config.n_highway * n_filters * 2 * n_filters + n_filters * proj
    return 2 * (lstm + (distinct_words + 2) * token)


def gemm_gflops(dtype, size=2048, repeats=5):
    """GFLOP/s of one large square GEMM (median): about the best this machine does in `dtype` ("fp32", "bf16": the
    float kernel "auto" picks here; "fp32-aten", "bf16-aten": torch's matmul; "int8": the int8 kernel "auto" picks
    here, "int8-quantized" torch's dynamic int8 linear, "int8-onednn" oneDNN's int8 linear, each with prepacked
    weights and the activations quantized per call, as int8 mode runs them)."""
    from kernels_elmo import (
        float_kernel,
        float_linear,
        int8_kernel,
        int8_linear,
        onednn_int8_linear,
        pack_int8,
        pack_onednn_int8,
    )

    a, b = torch.randn(size, size), torch.randn(size, size)
    if dtype.startswith("int8"):
        if int8_kernel(dtype.removeprefix("int8").removeprefix("-") or "auto") == "onednn":
            packed = pack_onednn_int8(b)
            run = lambda: onednn_int8_linear(a, packed)  # noqa: E731
        else:
            packed = pack_int8(b)
            run = lambda: int8_linear(a, packed)  # noqa: E731
    else:
        a, b = (a.bfloat16(), b.bfloat16()) if dtype.startswith("bf16") else (a, b)
        linear = float_linear("aten" if dtype.endswith("-aten") else float_kernel("auto"))
        run = lambda: linear(a, b)  # noqa: E731
    return 2 * size**3 / median_seconds(run, repeats) / 1e9


def status_mb(field):
    """A `VmRSS`/`VmHWM` figure from /proc/self/status, in MB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def reset_peak_rss():
    """Resets the kernel's peak-RSS mark to the current RSS (Linux >= 4.0); returns that RSS and the peak before the
    reset, in MB. Peaks are read from `VmHWM`, never `ru_maxrss`: Linux carries a parent's peak into its child
    across fork and exec, so a worker of a large benchmark process would report at least the parent's peak."""
    gc.collect()
    peak = status_mb("VmHWM")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_mb("VmRSS"), peak


def allennlp_worker(args):
    """AllenNLP's own `Elmo` (num_output_representations=1, no dropout) on the benchmark's weights and sentences:
    tokens/s (median of `--repeats` calls after a warm-up) and the first call's ELMo vectors, saved to --output."""
    import allennlp
    from allennlp.modules.elmo import Elmo, batch_to_ids

    folder = Path(args.cache) / args.size
    elmo = Elmo(
        str(folder / "options.json"),
        str(folder / "weights.hdf5"),
        num_output_representations=1,
        dropout=0.0,
        requires_grad=False,
    ).eval()
    batch = sentences(args.batch_size, seed=args.batch_size)
    char_ids = batch_to_ids(batch)
    with torch.no_grad():
        first = elmo(char_ids)["elmo_representations"][0]  # a fresh Elmo starts from zero states
        seconds = median_seconds(lambda: elmo(char_ids), args.repeats)
    with open(args.output, "wb") as f:
        np.save(f, first.numpy())
    n_tokens = sum(map(len, batch))
    print(
        json.dumps(
            dict(
                tokens=n_tokens,
                tokens_per_s=n_tokens / seconds,
                peak_rss_mb=status_mb("VmHWM"),
                peer=f"AllenNLP {allennlp.__version__}, torch {torch.__version__}",
            )
        )
    )


def tensorflow_worker(args):
    """simple_elmo (bilm-tf's graph) on TensorFlow, run as its users run it: `ElmoModel().load(folder,
    max_batch_size=B)` on the benchmark's options.json and weights (character inputs, no vocabulary), then what its
    `get_elmo_vectors` runs for each batch, `session.run` of the layers' average (its default) on the batch's char
    ids, timed alone: tokens/s (median of `--repeats` calls after a warm-up), TensorFlow's threading (intra- and
    inter-op) at `--threads`. The first call's ELMo vectors go to --output: bilm-tf keeps its LSTM states in
    variables carried from call to call, so only the first call starts from zero states, as ours do. Needs no torch."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # bilm-tf's tf.compat.v1.nn.rnn_cell is tf-keras's on TensorFlow >= 2.16
    from importlib.metadata import version

    import tensorflow as tf
    from simple_elmo import ElmoModel
    from simple_elmo.elmo import weight_layers

    batch = sentences(args.batch_sizes[0], seed=args.batch_sizes[0])
    model = ElmoModel()  # (switches TensorFlow to graph mode)
    model.load(str(Path(args.cache) / args.size), max_batch_size=len(batch))
    vectors = weight_layers("input", model.sentence_embeddings_op, use_layers="average")["weighted_op"]
    feed = {model.sentence_character_ids: model.batcher.batch_sentences(batch)}
    threads = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=args.threads, inter_op_parallelism_threads=args.threads
    )
    with tf.compat.v1.Session(config=threads) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        first = session.run(vectors, feed)
        seconds = median_seconds(lambda: session.run(vectors, feed), args.repeats)
    with open(args.output, "wb") as f:
        np.save(f, first)
    n_tokens = sum(map(len, batch))
    print(
        json.dumps(
            dict(
                tokens=n_tokens,
                tokens_per_s=n_tokens / seconds,
                peak_rss_mb=status_mb("VmHWM"),
                peer=f"simple_elmo {version('simple_elmo')}, TensorFlow {tf.__version__}",
            )
        )
    )


# ----- One configuration, in its own process ------------------------------------------------------------------------


def exported_model_dir(model_dir, dtype):
    """Where `export_model` puts the converted folder's `export onnx --dtype float32|int8`: beside it."""
    return Path(model_dir).parent / f"onnx-{dtype}"


def export_model(model_dir, dtype):
    """`elmo-transformers export onnx --dtype float32|int8` of the converted folder, once (again where the code that
    makes the graph changed since: an older graph would time an older design). Run by the driver: no measured process
    parses it."""
    import kernels_elmo
    import modeling_elmo
    from elmo_transformers.model_source import load_model as load
    from elmo_transformers.runtime import onnx_export as export

    graph = exported_model_dir(model_dir, dtype) / "model.onnx"
    code = max(os.path.getmtime(module.__file__) for module in (export, modeling_elmo, kernels_elmo))
    if not graph.exists() or graph.stat().st_mtime < code:
        model, tokenizer = load(model_dir, modeling_elmo.ElmoModel, dtype="float32")
        export.export_onnx(model, tokenizer, graph.parent, dtype, overwrite=True)


def load_model(model_dir, dtype):
    """ElmoModel in eval mode as `dtype` ("fp32", "bf16" or "int8") runs it; "fp32-aten" / "bf16-aten": the same
    with `float_kernel="aten"` (torch's own matmuls, what ran before the float kernel was chosen per CPU);
    "int8-quantized" / "int8-onednn": int8 with `ElmoInt8Config(kernel=...)` instead of the kernel "auto" picks;
    "ort-fp32" / "ort-int8": the graph `export onnx` makes, run by onnxruntime as `embed` runs it (as many threads as
    torch)."""
    from elmo_transformers.runtime.onnx import OnnxElmoModel
    from modeling_elmo import ElmoModel
    from quantization_elmo import ElmoInt8Config

    if dtype.startswith("ort-"):
        return OnnxElmoModel(exported_model_dir(model_dir, ONNX_DTYPES[dtype]))
    if dtype.startswith("int8"):
        kernel = dtype.removeprefix("int8").removeprefix("-") or "auto"
        return ElmoModel.from_pretrained(model_dir, quantization_config=ElmoInt8Config(kernel=kernel)).eval()
    kernel = "aten" if dtype.endswith("-aten") else "auto"
    return ElmoModel.from_pretrained(
        model_dir, dtype=torch.bfloat16 if dtype.startswith("bf16") else torch.float32, float_kernel=kernel
    ).eval()


def fast_path(model, input_ids, attention_mask):
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return torch.stack([torch.as_tensor(layer) for layer in out.hidden_states])  # (an export's: NumPy arrays)


def lm_train_step(model, optimizer, batch, autocast):
    """One training step of `ElmoForLanguageModeling` (loss, backward, optimizer step)."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def worker(args):
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    torch.manual_seed(0)
    model_dir = converted_model_dir(args.size, args.cache)
    tokenizer = ElmoTokenizer.from_pretrained(model_dir)
    batch = sentences(args.batch_size, seed=args.batch_size)
    enc = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
    n_tokens = int(enc["attention_mask"].sum())
    result = dict(impl=args.impl, dtype=args.dtype, batch_size=args.batch_size, tokens=n_tokens)

    if args.impl == "windows":  # one long text through forward_windows vs. its first window alone, fp32
        words = [w for s in sentences(args.batch_size // 20 + 1, seed=1) for w in s][: args.batch_size]
        ids = tokenizer([words], is_split_into_words=True, return_tensors="pt")["input_ids"]
        model = ElmoModel.from_pretrained(model_dir).eval()
        result["tokens"] = n_tokens = len(words)
        with torch.no_grad():
            alone = model(ids[:, : args.window]).last_hidden_state  # also the warm-up
            rss_before, peak_before = reset_peak_rss()
            start = time.perf_counter()
            first = None
            for out in model.forward_windows(ids, args.window):
                first = out.last_hidden_state if first is None else first
            result["seconds"] = time.perf_counter() - start
            result["work_mb"] = status_mb("VmHWM") - rss_before
        result["tokens_per_s"] = n_tokens / result["seconds"]
        result["first_window_max_abs_diff"] = (first - alone).abs().max().item()
        result["peak_rss_mb"] = max(peak_before, status_mb("VmHWM"))
        print(json.dumps(result))
        return
    if args.impl == "train":  # the LM head over a LM_VOCAB-word vocabulary, sampled softmax as bilm-tf trains
        from modeling_elmo import ElmoForLanguageModeling

        bilm = ElmoModel.from_pretrained(model_dir)
        bilm.config.update(dict(lm_vocab_size=LM_VOCAB, lm_n_negative_samples=LM_VOCAB // 8))
        model = ElmoForLanguageModeling(bilm.config).train()  # fp32 master weights; bf16 through autocast
        model.elmo.load_state_dict(bilm.state_dict())
        ids = {w: i + 3 for i, w in enumerate(dict.fromkeys(w for s in batch for w in s))}
        labels = torch.full((len(batch), enc["input_ids"].shape[1] + 1), -100)
        for b, words in enumerate(batch):
            labels[b, : len(words) + 1] = torch.tensor([ids[w] for w in words] + [1])  # words, then </S>
        train_batch = dict(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        run = lambda: lm_train_step(model, optimizer, train_batch, autocast=args.dtype == "bf16")  # noqa: E731
    elif args.impl == "speed":  # the implementations called in turn, so that all see the same machine load
        models = {name: load_model(model_dir, name) for name in args.dtypes}
        runs = {"baseline": lambda: allennlp_algorithm(models["fp32"], enc["input_ids"], enc["attention_mask"])}
        runs.update(
            {name: partial(fast_path, model, enc["input_ids"], enc["attention_mask"]) for name, model in models.items()}
        )
        outputs = {name: run().float() for name, run in runs.items()}  # warm-up
        times = {name: [] for name in runs}
        for _ in range(args.repeats):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
        for name in runs:
            result[f"{name}_tokens_per_s"] = n_tokens / statistics.median(times[name])
        torch.save(outputs, args.output)
        print(json.dumps(result))
        return
    else:  # memory of one implementation: a warm-up call, then one measured call
        model = load_model(model_dir, args.dtype)
        impl = allennlp_algorithm if args.impl == "baseline" else fast_path
        run = lambda: impl(model, enc["input_ids"], enc["attention_mask"])  # noqa: E731

    run()  # warm-up
    rss_before, peak_before = reset_peak_rss()
    times = []
    for _ in range(args.repeats if args.impl == "train" else 1):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    result["work_mb"] = status_mb("VmHWM") - rss_before
    result["tokens_per_s"] = n_tokens / statistics.median(times)
    result["peak_rss_mb"] = max(peak_before, status_mb("VmHWM"))
    print(json.dumps(result))


# ----- Driver ---------------------------------------------------------------------------------------------------------


def run_config(args, impl, dtype, batch_size, out_dir, python=sys.executable):
    output = out_dir / f"{impl}-{dtype}-{batch_size}.pt"
    command = [
        python,
        __file__,
        "--worker",
        "--impl",
        impl,
        "--dtype",
        dtype,
        "--batch-sizes",
        str(batch_size),
        "--size",
        args.size,
        "--cache",
        str(args.cache),
        "--repeats",
        str(args.repeats),
        "--output",
        str(output),
        "--threads",
        str(args.threads),
        "--window",
        str(args.window),
        "--dtypes",
        *args.dtypes,
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["output"] = output
    return result


def cosines(a, b, mask):
    """Cosine of each real word's vector, all layers [layers, B, T, D] together: a flat tensor."""
    return F.cosine_similarity(a[:, mask].flatten(0, 1), b[:, mask].flatten(0, 1), dim=-1)


def step_gemm_ms(batch_size, config, repeats=5):
    """Median ms of one step's state GEMMs (both directions, [batch x P] x [P x 4H]) per way of running them: what
    the recurrence waits for at every step. `fp32 prepacked` is MKL's packed-weight GEMM (weights packed once),
    `oneDNN` oneDNN's linear on weights prepacked once (float_kernel="onednn"), where this torch has it."""
    proj, gates = config.projection_dim, 4 * config.lstm_dim
    weight, h = torch.randn(2, proj, gates) * 0.05, torch.randn(2, batch_size, proj)
    from kernels_elmo import int8_linear, onednn_error, pack_int8

    packed_int8 = [pack_int8(weight[d].t()) for d in range(2)]
    packed_mkl = [torch.ops.mkl._mkl_reorder_linear_weight(weight[d].t().contiguous(), batch_size) for d in range(2)]
    transposed, transposed16, h16 = weight.transpose(1, 2).contiguous(), weight.transpose(1, 2).bfloat16(), h.bfloat16()
    runs = {
        "fp32 bmm": lambda: torch.bmm(h, weight),
        "fp32 prepacked": lambda: [
            torch.ops.mkl._mkl_linear(h[d], packed_mkl[d], transposed[d], None, batch_size) for d in range(2)
        ],
        "bf16 linear": lambda: [F.linear(h16[d], transposed16[d]) for d in range(2)],
        "int8": lambda: [int8_linear(h[d], packed_int8[d]) for d in range(2)],
    }
    if onednn_error() is None:
        for name, w, x in (("fp32 oneDNN", transposed, h), ("bf16 oneDNN", transposed16, h16)):
            packed = [torch.ops.mkldnn._reorder_linear_weight(w[d]) for d in range(2)]
            runs[name] = partial(
                lambda x, packed: [
                    torch.ops.mkldnn._linear_pointwise(x[d], packed[d], None, "none", [], "") for d in range(2)
                ],
                x,
                packed,
            )
    return {name: median_seconds(run, repeats) * 1e3 for name, run in runs.items()}


STEP_PROFILE_KINDS = ("fp32", "bf16", "int8-quantized", "int8-onednn")  # int8-*: ElmoInt8Config(kernel=...)


def random_lstm_layer(config, kind):
    """One biLM layer of `config` with random weights (seed 0) as `kind` (one of STEP_PROFILE_KINDS) runs it: the
    step profiles' layer."""
    from modeling_elmo import ElmoLstmLayer

    torch.manual_seed(0)
    layer = ElmoLstmLayer(config, config.projection_dim).eval()
    for weight in (layer.input_weight, layer.state_weight, layer.projection_weight):
        torch.nn.init.normal_(weight, std=0.02)
    torch.nn.init.zeros_(layer.bias)
    if kind.startswith("int8-"):
        layer.quantize_lstm_int8(kind.removeprefix("int8-"))
    return layer.to(torch.bfloat16) if kind == "bf16" else layer


def step_profile_work(batch_size, config, kind):
    """What each piece of `step_profile_ms` does, as (GFLOP, None) for a GEMM and (None, MB moved) for element-wise
    work: the figures its limit is measured against (the 2048^3 GEMM rate; for element-wise work, the rate of the
    gates copy, a plain copy of the step's gates, in cache as the step has them)."""
    n, P, H = batch_size, config.projection_dim, config.lstm_dim
    mb = lambda floats: floats * 4 / 1e6  # noqa: E731 (the cell runs in float32 in every dtype)
    return {
        "input GEMM (per step)": (2 * 2 * n * P * 4 * H / 1e9, None),
        "state GEMMs + input gates": (2 * 2 * n * P * 4 * H / 1e9, None),
        # the activations read and write the gates in place, c is read and written, tanh(c) * o written
        "cell": (None, mb(2 * n * (2 * 4 * H + 2 * H + 2 * H))),
        "  (gates copy, not in a step)": (None, mb(2 * 2 * n * 4 * H) / (2 if kind == "bf16" else 1)),
        "projection GEMMs": (2 * 2 * n * H * P / 1e9, None),
    }


def step_profile_ms(batch_size, config, kind, steps=20, repeats=5):
    """Median ms of each piece of one recurrence step of one biLM layer (both directions) at `batch_size` as `kind`
    (one of STEP_PROFILE_KINDS) runs it, the pieces run alone with the step's real shapes, and the whole step as
    `ElmoLstmLayer` runs it (a `steps`-step input, divided by `steps`; the input-to-gates GEMM of the block
    included): where a step's time goes."""
    with torch.no_grad():
        from kernels_elmo import FloatGemms, Int8Gemms, OneDnnInt8Gemms, PackedGemms, inplace_lstm_cell

        layer = random_lstm_layer(config, kind)
        gemms = layer.gemms.for_call(True)  # the GEMMs of an inference call (oneDNN's, prepacked, where they run)
        n, P, H = batch_size, config.projection_dim, config.lstm_dim
        dtype = torch.bfloat16 if kind == "bf16" else torch.float32
        x, h = torch.randn(2, n, steps, P).to(dtype), (torch.randn(2, n, P) * 0.1).to(dtype)
        c = torch.randn(2, n, H) * 0.1
        input_gates = gemms.input_gates(x)
        gates, cell_output = gemms.gates(input_gates, 0, h), (torch.randn(2, n, H) * 0.1).to(dtype)
        pieces = {
            "input GEMM (per step)": lambda: gemms.input_gates(x),
            "state GEMMs + input gates": lambda: gemms.gates(input_gates, 0, h),
            "cell": lambda: inplace_lstm_cell(copy_gates(gates), c, config.cell_clip),
            "  (gates copy, not in a step)": lambda: copy_gates(gates),
            "projection GEMMs": lambda: gemms.project(cell_output),
            "projection clip": lambda: h.clamp(-3, 3),
        }
        times = {name: median_seconds(run, repeats) * 1e3 for name, run in pieces.items()}
        times["input GEMM (per step)"] /= steps
        times["whole step (measured)"] = median_seconds(lambda: layer(x, [n] * steps), repeats) * 1e3 / steps
        kernels = {"int8-quantized": (Int8Gemms,), "int8-onednn": (OneDnnInt8Gemms,)}
        assert type(gemms) in kernels.get(kind, (FloatGemms, PackedGemms)), type(gemms)
        return times


def copy_gates(gates):
    """A copy of a step's gates: [2, n, 4H], or oneDNN int8's list of each direction's [n, 4H]."""
    return [g.clone() for g in gates] if isinstance(gates, list) else gates.clone()


def median_seconds(fn, repeats, warmups=1):
    """Median wall time of `repeats` calls of `fn` after `warmups` warm-up calls."""
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def corpus_sentences(path, n, max_words=60):
    """The first `n` sentences of 5..max_words words of a gzipped text (paragraph per line), split on ., ! and ?
    and tokenised into words and punctuation."""
    import gzip
    import re

    found = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            for sentence in re.split(r"(?<=[.!?])\s+", line.strip()):
                words = re.findall(r"\w+(?:'\w+)?|[^\w\s]", sentence)
                if 5 <= len(words) <= max_words:
                    found.append(words)
                    if len(found) == n:
                        return found
    return found


def conll(path, limit=None):
    """(words, tags) per segment of a `token<TAB>tag` file with blank lines between segments."""
    segments, words, tags = [], [], []
    for line in list(Path(path).read_text(encoding="utf-8").splitlines()) + [""]:
        if line.strip():
            word, tag = line.split("\t")
            words.append(word)
            tags.append(tag)
        elif words:
            segments.append((words, tags))
            words, tags = [], []
            if limit and len(segments) == limit:
                break
    return segments


def elmo_vectors(model, tokenizer, batches):
    """ELMo vectors (`last_hidden_state`) of the real words of each batch of sentences, concatenated [words, D]."""
    with torch.no_grad():
        vectors = []
        for batch in batches:
            enc = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
            out = model(**enc)
            vectors.append(out.last_hidden_state[out.mask])
        return torch.cat(vectors)


def int8_quality(args):
    """The int8 ELMo vectors against fp32 ones on real sentences, and a POS probe trained on fp32 vectors, tested on
    fp32 and on int8 vectors (the same probe; only the features change)."""
    from modeling_elmo import ElmoModel
    from tokenization_elmo import ElmoTokenizer

    torch.manual_seed(0)
    tokenizer = ElmoTokenizer.from_pretrained(args.quality_model)
    fp32 = ElmoModel.from_pretrained(args.quality_model, dtype=torch.float32).eval()
    int8 = load_model(args.quality_model, "int8")
    batches = lambda items: [items[i : i + 32] for i in range(0, len(items), 32)]  # noqa: E731
    text = corpus_sentences(args.quality_corpus, args.quality_sentences)
    cos = F.cosine_similarity(
        elmo_vectors(int8, tokenizer, batches(text)), elmo_vectors(fp32, tokenizer, batches(text))
    )
    print(
        f"\nint8 vs fp32 ELMo vectors of {args.quality_model.name}, {len(cos)} words of {len(text)} sentences of "
        f"{args.quality_corpus.name}: cosine median {cos.median():.5f}, 1st percentile {cos.quantile(0.01):.5f}, "
        f"min {cos.min():.5f}",
        flush=True,
    )

    train = conll(args.pos_data / "train.conll", args.pos_train_segments)
    test = conll(args.pos_data / "test.conll")
    tags = sorted({t for _, ts in train + test for t in ts})
    labels = lambda segments: torch.tensor([tags.index(t) for _, ts in segments for t in ts])  # noqa: E731
    features = elmo_vectors(fp32, tokenizer, batches([w for w, _ in train]))
    probe = torch.nn.Linear(features.shape[1], len(tags))
    optimizer = torch.optim.Adam(probe.parameters(), lr=1e-2)
    targets = labels(train)
    for _ in range(300):  # full-batch logistic regression
        optimizer.zero_grad()
        F.cross_entropy(probe(features), targets).backward()
        optimizer.step()
    test_words, targets = batches([w for w, _ in test]), labels(test)
    with torch.no_grad():
        accuracy = {
            name: (probe(elmo_vectors(model, tokenizer, test_words)).argmax(-1) == targets).float().mean().item()
            for name, model in (("fp32", fp32), ("int8", int8))
        }
    print(
        f"Silver POS ({args.pos_data.name}), linear probe on the ELMo vectors trained on {len(train)} fp32 segments, "
        f"test accuracy ({len(targets)} words): fp32 {100 * accuracy['fp32']:.2f}%, "
        f"int8 {100 * accuracy['int8']:.2f}% "
        f"({100 * (accuracy['int8'] - accuracy['fp32']):+.2f} points)",
        flush=True,
    )


def corpus_file(args, out_dir):
    """The first `--corpus-sentences` OANC segments of 5-120 words of `--corpus-split`, one sentence a line; returns
    its path."""
    segments = [words for words, _ in conll(args.pos_data / f"{args.corpus_split}.conll") if 5 <= len(words) <= 120]
    if len(segments) < args.corpus_sentences:
        sys.exit(
            f"--corpus-sentences {args.corpus_sentences}: {args.pos_data.name}/{args.corpus_split}.conll has "
            f"{len(segments)} segments of 5-120 words (--corpus-split train has more)"
        )
    chosen = segments[: args.corpus_sentences]
    path = out_dir / f"corpus-{len(chosen)}.txt"
    path.write_text("".join(" ".join(words) + "\n" for words in chosen), encoding="utf-8")
    return path, sum(map(len, chosen)), len(chosen)


def allennlp_embed_file_worker(args):
    """AllenNLP's `ElmoEmbedder.embed_file` rule with its 2.x modules (the command itself left AllenNLP in 1.0):
    the file's sentences in order, batches of 64, `batch_to_ids` + `_ElmoBiLm` (the biLM layers without the
    boundary positions), one HDF5 dataset per sentence [layers, words, 2P] and `sentence_to_index`."""
    import h5py
    from allennlp.modules.elmo import _ElmoBiLm, batch_to_ids

    folder = Path(args.cache) / args.size
    bilm = _ElmoBiLm(str(folder / "options.json"), str(folder / "weights.hdf5"), requires_grad=False).eval()
    lines = Path(args.corpus).read_text(encoding="utf-8").splitlines()
    with h5py.File(args.output, "w") as f, torch.no_grad():
        for start in range(0, len(lines), 64):
            batch = [line.split() for line in lines[start : start + 64]]
            out = bilm(batch_to_ids(batch))
            layers = torch.stack([layer[:, 1:-1] for layer in out["activations"]], dim=1)  # without <S>, </S>
            for i, words in enumerate(batch):
                f.create_dataset(str(start + i), data=layers[i, :, : len(words)].numpy())
        f.create_dataset("sentence_to_index", data=[json.dumps({line: str(i) for i, line in enumerate(lines)})])


def model_alone_worker(args):
    """The model alone on the job's own batches (`embed`'s default word budget or `--corpus-batch-size` /
    `--corpus-batch-words`, its length order), as `embed` loads
    it (`--dtype` fp32 / bf16 / int8, or ort-*: the exported folder): every batch encoded first, then the device step
    (`ElmoEmbedder.layers`, all layers, back on the host) timed batch by batch; prints the words/s."""
    from elmo_transformers import ElmoEmbedder
    from elmo_transformers.embedding.batches import Batch, Plan
    from elmo_transformers.embedding.embed_file import default_batch_words
    from elmo_transformers.embedding.inputs import count_words, line_words

    model = converted_model_dir(args.size, args.cache)
    names = {"fp32": "float32", "bf16": "bfloat16", "int8": "int8", "int8-quantized": "int8"}
    embedder = (
        ElmoEmbedder(exported_model_dir(model, ONNX_DTYPES[args.dtype]))
        if args.dtype in ONNX_DTYPES
        else ElmoEmbedder(model, dtype=names[args.dtype], device=args.device)
    )
    lines = Path(args.corpus).read_text(encoding="utf-8").splitlines()
    counts = [count_words(line, embedder.tokenizer) for line in lines]
    batch_words = args.corpus_batch_words or default_batch_words(embedder)
    plan = Plan(collections.Counter(c for c in counts if c <= 1000), args.corpus_batch_size, 1000, batch_words)
    batches = [
        (unit, embedder.pinned(embedder.encode([list(line_words(text, embedder.tokenizer)) for text in unit.texts])))
        for unit in plan.units(zip(range(len(lines)), lines, counts), AssertionError)
        if isinstance(unit, Batch)
    ]
    start = time.perf_counter()
    for _, batch in batches:
        embedder.layers(batch, "all")[1]()
    seconds = time.perf_counter() - start
    print(json.dumps({"words": sum(counts), "seconds": seconds, "words_per_s": sum(counts) / seconds}))


# Starts a command and prints its wall seconds and peak RSS (ru_maxrss, KB, with its own child processes) to stdout.
# Run as a small process of its own: Linux carries a parent's peak RSS into its child across fork and exec, so a child
# of the (large) benchmark process would report at least the benchmark's peak.
TIMER = """import os, subprocess, sys, time
start = time.perf_counter()
process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(process.pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))"""


def timed_process(command, env=None):
    """(wall seconds, peak RSS MB, the closing line of `embed` that says where its time went, or "") of a whole
    process; it must succeed."""
    done = subprocess.run([sys.executable, "-c", TIMER, *map(str, command)], capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"{' '.join(map(str, command))} failed:\n{done.stderr}")
    seconds, peak_kb = done.stdout.split()
    said = next((line for line in reversed(done.stderr.splitlines()) if "words/s" in line), "")
    return float(seconds), int(peak_kb) / 1024, said


def corpus_benchmark(args, out_dir):
    """The whole-process corpus comparison (see the module docstring); prints a table."""
    if "int8-onednn" in args.dtypes:
        sys.exit("--corpus-sentences: embed runs int8-onednn where the int8 rule picks it (AMX int8): pass int8")
    corpus, words, n = corpus_file(args, out_dir)
    model = converted_model_dir(args.size, args.cache)
    names = {"fp32": "float32", "bf16": "bfloat16", "int8": "int8", "int8-quantized": "int8"}
    pythons = {f"allennlp{i}": python for i, python in enumerate(args.allennlp_python)}
    outputs = {name: out_dir / f"corpus-{name}.hdf5" for name in [*pythons, *args.dtypes]}
    runs = {
        name: [
            python,
            __file__,
            "--worker",
            "--impl",
            f"allennlp-file-{name}",
            "--size",
            args.size,
            "--cache",
            str(args.cache),
            "--corpus",
            str(corpus),
            "--output",
            str(outputs[name]),
            "--threads",
            str(args.threads),
        ]
        for name, python in pythons.items()
    }
    batching = []  # the job's batches, which the model-alone runs take too
    if args.corpus_batch_size:
        batching += ["--corpus-batch-size", str(args.corpus_batch_size)]
    if args.corpus_batch_words:
        batching += ["--corpus-batch-words", str(args.corpus_batch_words)]
    embed_batching = [flag.replace("--corpus-", "--") for flag in batching]
    for dtype in args.dtypes:  # ort-*: the exported folder as --model, in its own dtype
        how = (
            ["--model", exported_model_dir(model, ONNX_DTYPES[dtype])]
            if dtype in ONNX_DTYPES
            else ["--model", model, "--dtype", names[dtype]]
        )
        runs[dtype] = [
            sys.executable,
            "-m",
            "elmo_transformers",
            "embed",
            corpus,
            outputs[dtype],
            "--all",
            "--overwrite",
            *how,
            *embed_batching,
            *shlex.split(args.embed_flags),
        ]
        if args.parquet:  # the same run writing Parquet, beside the HDF5 one: what the folder of files costs
            runs[f"{dtype}-parquet"] = [
                *runs[dtype][:5],
                str(out_dir / f"corpus-{dtype}-parquet"),
                *runs[dtype][6:],
                "--format",
                "parquet",
            ]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=str(args.threads), HF_HUB_OFFLINE="1")
    ours_env = dict(env)
    if args.embed_default_threads:  # the command picks its threads itself (runtime.threads.free_cpus)
        del ours_env["OMP_NUM_THREADS"]
    envs = {name: env if name in pythons else ours_env for name in runs}
    for name in runs:  # `embed` runs int8 through the kernel of the rule: capping oneDNN below AMX makes it fbgemm's
        if name.startswith("int8-quantized"):
            envs[name] = dict(ours_env, ONEDNN_MAX_CPU_ISA="AVX512_CORE_VNNI")
    timings = {name: [] for name in runs}
    alone_runs = {
        dtype: [
            sys.executable,
            __file__,
            "--worker",
            "--impl",
            "model-alone",
            "--dtype",
            dtype,
            "--size",
            args.size,
            "--cache",
            str(args.cache),
            "--corpus",
            str(corpus),
            "--device",
            args.device,
            *batching,
        ]
        for dtype in args.dtypes
    }  # the model alone on the same batches, in the same environment
    rates = {dtype: [] for dtype in alone_runs}
    # --background-load N: N busy processes beside every run (a shared machine: load N on top of the run's own)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.background_load)]
    try:
        for _ in range(args.repeats):  # alternating, so that every command sees the same load
            for name, command in runs.items():
                timings[name].append(timed_process(command, envs[name]))
                if name in alone_runs:  # right after its job, so that both see the machine as it was
                    done = subprocess.run(alone_runs[name], capture_output=True, text=True, env=envs[name], check=True)
                    rates[name].append(json.loads(done.stdout.strip().splitlines()[-1])["words_per_s"])
    finally:
        for process in busy:
            process.kill()
    seconds = {name: statistics.median(s for s, _, _ in runs_) for name, runs_ in timings.items()}
    rss = {name: max(m for _, m, _ in runs_) for name, runs_ in timings.items()}
    alone = {dtype: statistics.median(values) for dtype, values in rates.items() if values}
    print(
        f"\nCorpus: {n} OANC {args.corpus_split} sentences ({words} words, 5-120 a sentence) to HDF5 with all "
        f"layers, whole process, median of {args.repeats}, {cpu_name()}, {os.cpu_count()} CPUs, "
        f"{args.background_load} busy processes beside each run, batches: "
        f"{' '.join(embed_batching) or 'embed default'}:"
    )
    base = [name for name in runs if name.startswith("allennlp")]
    print(
        "| run | seconds | words/s | model alone words/s | job / model | peak RSS MB | "
        + " | ".join(f"x {b}" for b in base)
        + " |"
    )
    print("|---" * (6 + len(base)) + "|")
    for name in runs:
        ratios = " | ".join(f"{seconds[b] / seconds[name]:.2f}x" for b in base)
        model_rate = f"{alone[name]:.0f} | {words / seconds[name] / alone[name]:.0%}" if name in alone else "- | -"
        print(
            f"| {name} | {seconds[name]:.1f} | {words / seconds[name]:.0f} | {model_rate} | {rss[name]:.0f} | "
            f"{ratios} |",
            flush=True,
        )
    for name in [name for name in runs if f"{name}-parquet" in runs]:
        print(f"{name}: the Parquet job took {seconds[f'{name}-parquet'] / seconds[name]:.2f}x the HDF5 job's time")
    for name in runs:  # where the time of our runs went, as each said (the run of the median time)
        said = sorted(timings[name])[len(timings[name]) // 2][2]
        if said:
            print(f"{name}: {said}")
    import h5py

    if base and "fp32" in runs:
        # AllenNLP's biLM carries each batch's final LSTM state into the next batch: only its first batch of 64
        # starts from zeros, as every one of ours does, so only that batch can be compared.
        with h5py.File(outputs["fp32"]) as ours, h5py.File(outputs[base[0]]) as theirs:
            diff = max(float(np.abs(ours[str(i)][()] - theirs[str(i)][()]).max()) for i in range(min(n, 64)))
        print(
            f"fp32 vs {base[0]}, first batch (AllenNLP's only one from a zero state): max abs diff over every "
            f"layer {diff:.1e}"
        )
    for dtype in [d for d in runs if d in ONNX_DTYPES and "fp32" in runs]:  # fp32's batches: every line compares
        with h5py.File(outputs["fp32"]) as ours, h5py.File(outputs[dtype]) as exported:
            diff = max(float(np.abs(ours[str(i)][()] - exported[str(i)][()]).max()) for i in range(n))
        print(f"{dtype} vs fp32, every line: max abs diff over every layer {diff:.1e}")


def cpu_name():
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown CPU")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="Original")
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[1, 8, 32, 128])
    parser.add_argument(
        "--dtypes",
        nargs="+",
        choices=DTYPES,
        default=list(DTYPES[:7]),
        help="how our model runs (fp32 is always included: the baseline and the references use it)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per configuration (median reported)")
    parser.add_argument("--cache", type=Path, default=REPO / "research" / "cache")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads() if torch else os.cpu_count())
    parser.add_argument("--train-batch-size", type=int, default=32, help="0 skips the training figure")
    parser.add_argument(
        "--document-words",
        type=int,
        nargs="*",
        default=[],
        help="also run forward_windows over texts of these many words (e.g. 1000 10000)",
    )
    parser.add_argument("--window", type=int, default=200, help="window size (words) for --document-words")
    parser.add_argument(
        "--allennlp-python",
        nargs="*",
        default=[],
        help="also time AllenNLP's own Elmo with these Python interpreters (one environment each)",
    )
    parser.add_argument(
        "--tensorflow-python",
        nargs="*",
        default=[],
        help="also time simple_elmo (bilm-tf's graph on TensorFlow) with these Python interpreters "
        "(environments made by research/simple_elmo_venv.sh)",
    )
    parser.add_argument(
        "--quality-model",
        type=Path,
        default=REPO / "elmo_transformers" / "models" / "elmo-en-small",
        help="trained model for the int8 quality figures ('' skips them)",
    )
    parser.add_argument(
        "--quality-corpus", type=Path, default=Path("/work/shared/data/corpora/public-domain-en/valid.txt.gz")
    )
    parser.add_argument("--quality-sentences", type=int, default=500)
    parser.add_argument("--pos-data", type=Path, default=Path("/work/shared/data/labeled/pos-oanc"))
    parser.add_argument("--pos-train-segments", type=int, default=3000)
    parser.add_argument(
        "--step-profile",
        action="store_true",
        help="also time each piece of one recurrence step (--step-profile-dtypes) at each batch size, and its limit",
    )
    parser.add_argument("--step-profile-batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument(
        "--step-profile-dtypes",
        nargs="+",
        choices=STEP_PROFILE_KINDS,
        default=list(STEP_PROFILE_KINDS),
        help="the dtypes of --step-profile (int8-quantized: torch's dynamic quantized linear, fbgemm on x86; "
        "int8-onednn: oneDNN's int8 linear, AMX where the CPU has it; each where it runs)",
    )
    parser.add_argument(
        "--corpus-sentences",
        type=int,
        default=0,
        help="also time the corpus job end to end with this many OANC sentences (e.g. 800)",
    )
    parser.add_argument(
        "--embed-flags",
        default="",
        help="more flags for every `embed` run of the corpus job, e.g. '--batch-size 64', "
        "'--device cuda', '--format parquet'",
    )
    parser.add_argument(
        "--corpus-batch-size",
        type=int,
        help="corpus mode: lines a batch (embed --batch-size), in the job and in the model alone",
    )
    parser.add_argument(
        "--corpus-batch-words",
        type=int,
        help="corpus mode: the word budget of a batch (embed --batch-words), in the job and in the model alone",
    )
    parser.add_argument(
        "--parquet",
        action="store_true",
        help="corpus mode: also run each dtype's job writing Parquet (--format parquet), beside HDF5",
    )
    parser.add_argument(
        "--embed-default-threads",
        action="store_true",
        help="run `embed` without OMP_NUM_THREADS: its own choice of threads (the CPUs free now)",
    )
    parser.add_argument(
        "--background-load",
        type=int,
        default=0,
        help="corpus mode: this many busy processes run beside every timed command (a shared machine)",
    )
    parser.add_argument(
        "--device", default="cpu", help="corpus mode: the device of the model alone (as --embed-flags gives embed's)"
    )
    parser.add_argument(
        "--corpus-split",
        choices=("test", "train"),
        default="test",
        help="the OANC split the corpus job's sentences come from (test: 1,621 of 5-120 words)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    # speed, baseline, fast, train, windows, allennlp<i>, allennlp-file-<name>, tensorflow<i>, model-alone
    parser.add_argument("--impl", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", choices=DTYPES, help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker and args.impl.startswith("tensorflow"):
        return tensorflow_worker(args)  # before anything of torch: its environment has none
    args.dtypes = ["fp32"] + [d for d in args.dtypes if d != "fp32"]
    torch.set_num_threads(args.threads)
    if args.worker:
        args.batch_size = args.batch_sizes[0]  # the number of words for --impl windows
        if args.impl.startswith("allennlp-file"):
            return allennlp_embed_file_worker(args)
        if args.impl == "model-alone":
            return model_alone_worker(args)
        return allennlp_worker(args) if args.impl.startswith("allennlp") else worker(args)

    model_dir = converted_model_dir(args.size, args.cache)
    for dtype in args.dtypes:
        if dtype in ONNX_DTYPES:
            export_model(model_dir, ONNX_DTYPES[dtype])
    out_dir = Path(args.cache) / args.size / "outputs"
    out_dir.mkdir(exist_ok=True)
    print(
        f"ELMo {args.size}, {cpu_name()}, {args.threads} threads, torch {torch.__version__}, "
        f"median of {args.repeats} calls"
    )
    ours = args.dtypes
    if args.batch_sizes:
        print(
            "| batch | tokens | baseline tok/s | "
            + " | ".join(f"{d} tok/s (x baseline)" for d in ours)
            + " | fp32 max abs diff vs baseline | "
            + " | ".join(f"{d} cosine to fp32 median / min" for d in ours[1:])
            + " | working MB baseline / "
            + " / ".join(ours)
            + " | peak RSS MB baseline / "
            + " / ".join(ours)
            + " |"
        )
        print("|---" * (5 + 2 * len(ours)) + "|")
    peer_rows = []
    peer_pythons = [(f"allennlp{i}", python) for i, python in enumerate(args.allennlp_python)]
    peer_pythons += [(f"tensorflow{i}", python) for i, python in enumerate(args.tensorflow_python)]
    for batch_size in args.batch_sizes:
        peers = [run_config(args, impl, "fp32", batch_size, out_dir, python=python) for impl, python in peer_pythons]
        speed = run_config(args, "speed", "fp32", batch_size, out_dir)
        memory = [run_config(args, "baseline", "fp32", batch_size, out_dir)]
        memory += [run_config(args, "fast", dtype, batch_size, out_dir) for dtype in ours]
        outputs = torch.load(speed["output"], weights_only=True)
        ref, out32 = outputs["baseline"], outputs["fp32"]
        mask = ref.abs().sum(dim=(0, -1)) > 0
        diff = (out32 - ref).abs().max().item()
        base = speed["baseline_tokens_per_s"]
        rates = " | ".join(f"{speed[d + '_tokens_per_s']:.0f} ({speed[d + '_tokens_per_s'] / base:.2f}x)" for d in ours)
        cos = [cosines(outputs[d], out32, mask) for d in ours[1:]]
        cos = " | ".join(f"{c.median():.5f} / {c.min():.5f}" for c in cos)
        work = " / ".join(f"{m['work_mb']:.0f}" for m in memory)
        peak = " / ".join(f"{m['peak_rss_mb']:.0f}" for m in memory)
        print(
            f"| {batch_size} | {speed['tokens']} | {base:.0f} | {rates} | {diff:.1e} | {cos} | {work} | {peak} |",
            flush=True,
        )
        if peers:
            print(
                f"(peers, batch {batch_size}: "
                + "; ".join(
                    f"{r['peer']} {r['tokens_per_s']:.0f} tok/s, peak RSS {r['peak_rss_mb']:.0f} MB" for r in peers
                )
                + ")",
                flush=True,
            )
        for theirs in peers:
            # their first call's ELMo vectors against our default mix (softmax(0) weights, gamma 1: the layers'
            # average, as both peers' defaults), at the real words
            vectors_diff = (out32.mean(dim=0) - torch.from_numpy(np.load(theirs["output"])))[mask].abs().max().item()
            rate = theirs["tokens_per_s"]
            peer_rows.append(
                f"| {batch_size} | {theirs['peer']} | {rate:.0f} | {base / rate:.2f}x | "
                + " | ".join(f"{speed[d + '_tokens_per_s'] / rate:.2f}x" for d in ours)
                + f" | {vectors_diff:.1e} | {theirs['peak_rss_mb']:.0f} |"
            )
    if peer_rows:
        print(
            "\nPeers: AllenNLP's own Elmo, simple_elmo's (bilm-tf's graph on TensorFlow), each timed in its own "
            "process just before our row of its batch size:"
        )
        print(
            "| batch | peer | peer tok/s | baseline / peer | "
            + " | ".join(f"{d} / peer" for d in ours)
            + " | max abs diff of ELMo vectors at the words, fp32 vs peer | peer peak RSS MB |"
        )
        print("|---" * (6 + len(ours)) + "|")
        print("\n".join(peer_rows), flush=True)
    if args.batch_sizes:
        from configuration_elmo import ElmoConfig

        config = ElmoConfig.from_pretrained(converted_model_dir(args.size, args.cache))
        ours = [d for d in ours if not d.startswith("ort-")]  # the ceilings are torch's GEMMs
        peak = {name: gemm_gflops(name) for name in ours}
        print(
            "\nCeiling: a 2048^3 GEMM runs at "
            + ", ".join(f"{peak[d]:.0f} GFLOP/s in {d}" for d in ours)
            + " here (int8: the int8 kernel the rule picks here); the fast path's arithmetic at that rate would give "
            "at most:"
        )
        print("| batch | GFLOP per batch | " + " | ".join(f"{d} ceiling tok/s" for d in ours) + " |")
        print("|---" * (2 + len(ours)) + "|")
        for batch_size in args.batch_sizes:
            batch = sentences(batch_size, seed=batch_size)
            words = sum(map(len, batch))
            gflop = bilm_flops(config, words, len({w for s in batch for w in s}), batch_size) / 1e9
            print(
                f"| {batch_size} | {gflop:.1f} | " + " | ".join(f"{words * peak[d] / gflop:.0f}" for d in ours) + " |"
            )
        print(
            f"\nOne step's state GEMMs, both directions ([batch x {config.projection_dim}] x "
            f"[{config.projection_dim} x {4 * config.lstm_dim}]), median ms:"
        )
        rows = {batch_size: step_gemm_ms(batch_size, config) for batch_size in args.batch_sizes}
        names = list(next(iter(rows.values())))
        print("| batch | " + " | ".join(names) + " |\n" + "|---" * (1 + len(names)) + "|")
        for batch_size, row in rows.items():
            print(f"| {batch_size} | " + " | ".join(f"{row[n]:.2f}" for n in names) + " |", flush=True)
    if args.step_profile:
        from configuration_elmo import ElmoConfig
        from kernels_elmo import onednn_bf16, onednn_int8_error

        config = ElmoConfig.from_pretrained(converted_model_dir(args.size, args.cache))
        kinds = [k for k in args.step_profile_dtypes if k != "int8-onednn" or onednn_int8_error() is None]
        kinds = [k for k in kinds if k != "bf16" or onednn_bf16()]  # emulated bf16 is no fast path to profile
        print(f"\nOne recurrence step of one biLM layer, both directions, {args.threads} threads, median ms:")
        rows = {(b, kind): step_profile_ms(b, config, kind) for b in args.step_profile_batches for kind in kinds}
        names = list(next(iter(rows.values())))
        print("| batch | dtype | " + " | ".join(names) + " |\n" + "|---" * (2 + len(names)) + "|")
        for (b, kind), row in rows.items():
            print(f"| {b} | {kind} | " + " | ".join(f"{row[name]:.3f}" for name in names) + " |", flush=True)
        peak = {kind: gemm_gflops(kind) for kind in kinds}
        print(
            "\nThe limit of each piece: GEMMs in GFLOP/s (% of this dtype's 2048^3 GEMM rate: "
            + ", ".join(f"{kind} {peak[kind]:.0f}" for kind in kinds)
            + "), element-wise work in GB/s moved (% of the gates copy's GB/s, the same batch and dtype):"
        )
        work_names = list(step_profile_work(1, config, "fp32"))
        print("| batch | dtype | " + " | ".join(work_names) + " |\n" + "|---" * (2 + len(work_names)) + "|")
        for (b, kind), row in rows.items():
            work = step_profile_work(b, config, kind)
            rates = {name: (gflop or mb / 1e3) / (row[name] / 1e3) for name, (gflop, mb) in work.items()}
            copy = rates["  (gates copy, not in a step)"]
            cells = [
                f"{rates[name]:.0f} ({rates[name] / (peak[kind] if gflop is not None else copy):.0%})"
                for name, (gflop, _) in work.items()
            ]
            print(f"| {b} | {kind} | " + " | ".join(cells) + " |", flush=True)
    if args.corpus_sentences:
        corpus_benchmark(args, out_dir)
    if args.quality_model and str(args.quality_model) not in ("", "."):
        int8_quality(args)
    if args.train_batch_size:
        print(
            f"\nElmoForLanguageModeling training ({LM_VOCAB}-word vocabulary, sampled softmax with "
            f"{LM_VOCAB // 8} negatives, AdamW), batch {args.train_batch_size}:"
        )
        for dtype in ("fp32", "bf16"):
            r = run_config(args, "train", dtype, args.train_batch_size, out_dir)
            print(
                f"  {dtype}{' autocast' if dtype == 'bf16' else ''}: {r['tokens_per_s']:.0f} tokens/s, "
                f"working memory {r['work_mb']:.0f} MB, peak RSS {r['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    for words in args.document_words:
        r = run_config(args, "windows", "fp32", words, out_dir)
        print(
            f"\nforward_windows, {words}-word text, window {args.window}, fp32: {r['tokens_per_s']:.0f} tokens/s, "
            f"working memory {r['work_mb']:.0f} MB, peak RSS {r['peak_rss_mb']:.0f} MB, "
            "first window vs stateless max abs diff "
            f"{r['first_window_max_abs_diff']:.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
