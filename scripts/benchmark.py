#!/usr/bin/env python
"""ELMo inference and training speed on CPU, against an in-process baseline that follows AllenNLP's algorithm.

    PYTHONPATH=.:scripts python scripts/benchmark.py --size Original --batch-sizes 1 8 32 128 --repeats 3
    PYTHONPATH=.:scripts python scripts/benchmark.py --size Small --batch-sizes --train-batch-size 0 \
        --document-words 1000 10000 --window 200

Random weights in the original HDF5 layout are written once for the named published size and converted with the
project's converter into `--cache` (default benchmarks/cache/, gitignored).

Speed: for each batch size one subprocess loads the model in fp32 and bf16, makes a warm-up call of each
implementation (which also compiles), then calls baseline, fast fp32 and fast bf16 in turn `--repeats` times, so the
three see the same load on a noisy shared machine; medians are reported. Memory: each (implementation, dtype, batch
size) in a fresh subprocess, a warm-up call and one measured call; two figures: the peak RSS of the whole process
(`ru_maxrss`: weights, loading, torch.compile and the calls), and the working memory of the measured call: the Linux
peak RSS (`VmHWM`) is reset after the warm-up (`/proc/self/clear_refs`), and the figure is the new peak minus the
RSS at that point, i.e. the extra memory the inference itself needs on top of the loaded model.

With `--allennlp-python PYTHON ...` (interpreters that can import AllenNLP 2.10.1, e.g. separate venvs made by
`benchmarks/allennlp_venv.sh`), AllenNLP's own `Elmo` is also timed on the same weights and sentences, in a subprocess
of that interpreter run just before the one that times ours, and its output is compared with ours (first call: both
start from zero LSTM states).

The in-process baseline (`allennlp_algorithm`) is AllenNLP 2.10's `_ElmoCharacterEncoder` + `ElmoLstm` +
`LstmCellWithProjection` algorithm written against the same weights: the char CNN for every position (padding and
BOS/EOS included), then per layer and direction a Python loop over time steps with two GEMMs (input and state) and
the projection at the current (shrinking) batch size, on the length-sorted batch.
"""

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]

# The published sizes (https://allenai.org/allennlp/software/elmo); all share the 2048-filter char CNN.
SIZES = {
    "Small": dict(lstm_dim=1024, projection_dim=128, n_highway=1),  # 2x1024_128_2048cnn_1xhighway
    "Medium": dict(lstm_dim=2048, projection_dim=256, n_highway=1),  # 2x2048_256_2048cnn_1xhighway
    "Original": dict(lstm_dim=4096, projection_dim=512, n_highway=2),  # 2x4096_512_2048cnn_2xhighway
}
LM_VOCAB = 10_000  # word vocabulary of the benchmark sentences and of the LM head's softmax


def converted_model_dir(size, cache):
    """Random original-format weights for `size`, converted once; returns the converted folder."""
    from configuration_elmo import ElmoConfig
    from convert_allennlp_elmo import convert, save_atomically, write_random_weights

    folder = Path(cache) / size
    output = folder / "converted"
    if (output / "config.json").exists():
        return output
    folder.mkdir(parents=True, exist_ok=True)
    config = ElmoConfig(**SIZES[size])
    (folder / "options.json").write_text(json.dumps(config.to_allennlp_options()))
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


@torch.no_grad()
def allennlp_algorithm(model, input_ids, attention_mask):
    """AllenNLP's `Elmo` forward, step by step as `LstmCellWithProjection` does it; returns the biLM layers
    [n_layers + 1, B, words, 2P] (BOS/EOS removed, zeros at padding)."""
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
            weights = (layer.input_weight[direction], layer.state_weight[direction], layer.bias[direction, 0],
                       layer.projection_weight[direction])
            output = lstm_cell_with_projection(layer_input, batch_lengths, weights, direction == 0, layer.cell_clip,
                                               layer.proj_clip)
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
    """GFLOP/s of one large square GEMM (median): about the best this machine's BLAS does with `dtype`."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e9


def status_mb(field):
    """A `VmRSS`/`VmHWM` figure from /proc/self/status, in MB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def reset_peak_rss():
    """Resets the kernel's peak-RSS mark to the current RSS (Linux >= 4.0); returns that RSS in MB."""
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_mb("VmRSS")


def allennlp_worker(args):
    """AllenNLP's own `Elmo` (num_output_representations=1, no dropout) on the benchmark's weights and sentences:
    tokens/s (median of `--repeats` calls after a warm-up) and the first call's ELMo vectors, saved to --output."""
    from allennlp.modules.elmo import Elmo, batch_to_ids

    folder = Path(args.cache) / args.size
    elmo = Elmo(str(folder / "options.json"), str(folder / "weights.hdf5"), num_output_representations=1,
                dropout=0.0, requires_grad=False).eval()
    batch = sentences(args.batch_size, seed=args.batch_size)
    char_ids = batch_to_ids(batch)
    times = []
    with torch.no_grad():
        first = elmo(char_ids)["elmo_representations"][0]  # warm-up; a fresh Elmo starts from zero states
        for _ in range(args.repeats):
            start = time.perf_counter()
            elmo(char_ids)
            times.append(time.perf_counter() - start)
    torch.save(first, args.output)
    n_tokens = sum(map(len, batch))
    print(json.dumps(dict(tokens=n_tokens, tokens_per_s=n_tokens / statistics.median(times), torch=torch.__version__)))


# ----- One configuration, in its own process ------------------------------------------------------------------------


def fast_path(model, input_ids, attention_mask):
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return torch.stack(out.hidden_states)


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
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
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
            rss_before = reset_peak_rss()
            start = time.perf_counter()
            for index, out in enumerate(model.forward_windows(ids, args.window)):
                first = out.last_hidden_state if index == 0 else first
            result["seconds"] = time.perf_counter() - start
            result["work_mb"] = status_mb("VmHWM") - rss_before
        result["tokens_per_s"] = n_tokens / result["seconds"]
        result["first_window_max_abs_diff"] = (first - alone).abs().max().item()
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
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
    elif args.impl == "speed":  # the three implementations called in turn, so that all see the same machine load
        model32 = ElmoModel.from_pretrained(model_dir).eval()
        model16 = ElmoModel.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
        runs = {
            "baseline": lambda: allennlp_algorithm(model32, enc["input_ids"], enc["attention_mask"]),
            "fp32": lambda: fast_path(model32, enc["input_ids"], enc["attention_mask"]),
            "bf16": lambda: fast_path(model16, enc["input_ids"], enc["attention_mask"]),
        }
        outputs = {name: run().float() for name, run in runs.items()}  # warm-up (and compilation)
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
        model = ElmoModel.from_pretrained(model_dir, dtype=dtype).eval()
        impl = allennlp_algorithm if args.impl == "baseline" else fast_path
        run = lambda: impl(model, enc["input_ids"], enc["attention_mask"])  # noqa: E731

    run()  # warm-up
    rss_before = reset_peak_rss()
    times = []
    for _ in range(args.repeats if args.impl == "train" else 1):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    result["work_mb"] = status_mb("VmHWM") - rss_before
    result["tokens_per_s"] = n_tokens / statistics.median(times)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


# ----- Driver ---------------------------------------------------------------------------------------------------------


def run_config(args, impl, dtype, batch_size, out_dir, python=sys.executable):
    output = out_dir / f"{impl}-{dtype}-{batch_size}.pt"
    command = [python, __file__, "--worker", "--impl", impl, "--dtype", dtype, "--batch-sizes", str(batch_size),
               "--size", args.size, "--cache", str(args.cache), "--repeats", str(args.repeats), "--output", str(output),
               "--threads", str(args.threads), "--window", str(args.window)]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'scripts'}"))
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["output"] = output
    return result


def cosine(a, b, mask):
    a, b = a[:, mask], b[:, mask]
    return F.cosine_similarity(a.flatten(0, 1), b.flatten(0, 1), dim=-1).min().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="Original")
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[1, 8, 32, 128])
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per configuration (median reported)")
    parser.add_argument("--cache", type=Path, default=REPO / "benchmarks" / "cache")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--train-batch-size", type=int, default=32, help="0 skips the training figure")
    parser.add_argument("--document-words", type=int, nargs="*", default=[],
                        help="also run forward_windows over texts of these many words (e.g. 1000 10000)")
    parser.add_argument("--window", type=int, default=200, help="window size (words) for --document-words")
    parser.add_argument("--allennlp-python", nargs="*", default=[],
                        help="also time AllenNLP's own Elmo with these Python interpreters (one environment each)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--impl", help=argparse.SUPPRESS)  # speed, baseline, fast, train, windows, allennlp<i>
    parser.add_argument("--dtype", choices=["fp32", "bf16"], help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        args.batch_size = args.batch_sizes[0]  # the number of words for --impl windows
        return allennlp_worker(args) if args.impl.startswith("allennlp") else worker(args)

    converted_model_dir(args.size, args.cache)
    out_dir = Path(args.cache) / args.size / "outputs"
    out_dir.mkdir(exist_ok=True)
    print(f"ELMo {args.size}, {args.threads} threads, torch {torch.__version__}, median of {args.repeats} calls")
    if args.batch_sizes:
        print("| batch | tokens | baseline fp32 tok/s | fast fp32 tok/s | ratio | max abs diff | fast bf16 tok/s | ratio "
              "| bf16 cosine (min) | working MB baseline / fp32 / bf16 | peak RSS MB baseline / fp32 / bf16 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    allennlp_rows = []
    for batch_size in args.batch_sizes:
        allennlp = [run_config(args, f"allennlp{i}", "fp32", batch_size, out_dir, python=python)
                    for i, python in enumerate(args.allennlp_python)]
        speed = run_config(args, "speed", "fp32", batch_size, out_dir)
        memory = [run_config(args, impl, dtype, batch_size, out_dir)
                  for impl, dtype in (("baseline", "fp32"), ("fast", "fp32"), ("fast", "bf16"))]
        outputs = torch.load(speed["output"])
        ref, out32, out16 = outputs["baseline"], outputs["fp32"], outputs["bf16"]
        mask = ref.abs().sum(dim=(0, -1)) > 0
        diff = (out32 - ref).abs().max().item()
        base = speed["baseline_tokens_per_s"]
        work = " / ".join(f"{m['work_mb']:.0f}" for m in memory)
        peak = " / ".join(f"{m['peak_rss_mb']:.0f}" for m in memory)
        print(f"| {batch_size} | {speed['tokens']} | {base:.0f} | {speed['fp32_tokens_per_s']:.0f} "
              f"| {speed['fp32_tokens_per_s'] / base:.2f}x | {diff:.1e} | {speed['bf16_tokens_per_s']:.0f} "
              f"| {speed['bf16_tokens_per_s'] / base:.2f}x | {cosine(out16, out32, mask):.5f} "
              f"| {work} | {peak} |", flush=True)
        for theirs in allennlp:
            ours = out32.mean(dim=0)  # the default mix: softmax(0) weights, gamma 1
            vectors_diff = (ours - torch.load(theirs["output"])).abs().max().item()
            rate = theirs["tokens_per_s"]
            allennlp_rows.append(f"| {batch_size} | {theirs['torch']} | {rate:.0f} | {base / rate:.2f}x "
                                 f"| {speed['fp32_tokens_per_s'] / rate:.2f}x | {speed['bf16_tokens_per_s'] / rate:.2f}x "
                                 f"| {vectors_diff:.1e} |")
    if args.batch_sizes:
        from configuration_elmo import ElmoConfig

        config = ElmoConfig.from_pretrained(converted_model_dir(args.size, args.cache))
        peak = {name: gemm_gflops(dtype) for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}
        print(f"\nCeiling: a {2048}^3 GEMM runs at {peak['fp32']:.0f} GFLOP/s in fp32 and {peak['bf16']:.0f} in bf16 "
              "here; the fast path's arithmetic at that rate would give at most:")
        print("| batch | GFLOP per batch | fp32 ceiling tok/s | bf16 ceiling tok/s |\n|---|---|---|---|")
        for batch_size in args.batch_sizes:
            batch = sentences(batch_size, seed=batch_size)
            words = sum(map(len, batch))
            gflop = bilm_flops(config, words, len({w for s in batch for w in s}), batch_size) / 1e9
            print(f"| {batch_size} | {gflop:.1f} | {words * peak['fp32'] / gflop:.0f} | {words * peak['bf16'] / gflop:.0f} |")
    if allennlp_rows:
        print("\nAllenNLP 2.10.1's own Elmo (each timed in its own process just before our row of its batch size):")
        print("| batch | AllenNLP's torch | AllenNLP fp32 tok/s | baseline / AllenNLP | fast fp32 / AllenNLP "
              "| fast bf16 / AllenNLP | max abs diff of ELMo vectors, fast fp32 vs AllenNLP |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(allennlp_rows), flush=True)
    if args.train_batch_size:
        print(f"\nElmoForLanguageModeling training ({LM_VOCAB}-word vocabulary, sampled softmax with {LM_VOCAB // 8} negatives, AdamW), batch {args.train_batch_size}:")
        for dtype in ("fp32", "bf16"):
            r = run_config(args, "train", dtype, args.train_batch_size, out_dir)
            print(f"  {dtype}{' autocast' if dtype == 'bf16' else ''}: {r['tokens_per_s']:.0f} tokens/s, "
                  f"working memory {r['work_mb']:.0f} MB, peak RSS {r['peak_rss_mb']:.0f} MB", flush=True)
    for words in args.document_words:
        r = run_config(args, "windows", "fp32", words, out_dir)
        print(f"\nforward_windows, {words}-word text, window {args.window}, fp32: {r['tokens_per_s']:.0f} tokens/s, "
              f"working memory {r['work_mb']:.0f} MB, peak RSS {r['peak_rss_mb']:.0f} MB, first window vs stateless max abs diff "
              f"{r['first_window_max_abs_diff']:.1e}", flush=True)


if __name__ == "__main__":
    main()
