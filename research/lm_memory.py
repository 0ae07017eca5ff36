#!/usr/bin/env python
"""Peak memory of scoring and fill-mask with a full-size word softmax (V = 793,471, the published lm_1b vocabulary).

    python research/lm_memory.py --work /tmp/lm-memory [--projection-dim 512] [--sentences 1000] [--words 6]

Writes a random language model (a small biLM, projection --projection-dim, a random softmax of --vocab-size rows and
a vocabulary of that many words), then, in a fresh process: loads it (AutoModelForPreTraining), scores --sentences
sentences of --words words at batch 32 (forward and backward NLL, as `elmo-transformers perplexity`), and runs one
fill-mask batch of 32 texts. Peak RSS (VmHWM) is reset before each step, so each figure is that step's own peak.
Prints JSON: the model's bytes, RSS after loading, and each step's peak above the RSS after loading.
"""

import argparse
import json
import os
import subprocess
import sys
import time

BATCH = 32
PUBLISHED_VOCAB_SIZE = 793_471


def make_model(folder, vocab_size, projection_dim):
    """A random LM folder: small char CNN and LSTM, `projection_dim` wide, softmax of `vocab_size` words."""
    import torch

    from configuration_elmo import ElmoConfig
    from modeling_elmo import ElmoForLanguageModeling
    from tokenization_elmo import ElmoTokenizer

    torch.manual_seed(0)
    config = ElmoConfig(
        char_embedding_dim=4,
        filters=[[1, 8], [2, 8]],
        n_highway=1,
        lstm_dim=64,
        projection_dim=projection_dim,
        n_layers=2,
        lm_vocab_size=vocab_size,
        bos_token_id=1,
        eos_token_id=0,
    )
    os.makedirs(folder, exist_ok=True)
    vocab = os.path.join(folder, "words.txt")
    with open(vocab, "w", encoding="utf-8") as f:  # lm_1b's order: </S>, <S>, <UNK>, then the words
        f.writelines(w + "\n" for w in ["</S>", "<S>", "<UNK>", *(f"w{i}" for i in range(vocab_size - 3))])
    ElmoForLanguageModeling(config).save_pretrained(folder)
    ElmoTokenizer(vocab_file=vocab).save_pretrained(folder)
    os.remove(vocab)


def rss_mb(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM (peak RSS) to the current RSS


def measure(folder, sentences, words):
    """In this process: load, score, fill-mask; returns the figures (MB)."""
    import torch
    from transformers import AutoModelForPreTraining, AutoTokenizer, pipeline

    import elmo_transformers
    from elmo_transformers.training.data import DataCollatorForElmoLanguageModeling
    from elmo_transformers.training.perplexity import bilm_perplexities

    elmo_transformers.register()
    torch.set_grad_enabled(False)
    before = rss_mb("VmRSS")
    model = AutoModelForPreTraining.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    loaded = rss_mb("VmRSS")
    figures = {
        "vocab_size": model.config.lm_vocab_size,
        "projection_dim": model.config.projection_dim,
        "model_mb": round(model_mb),
        "rss_before_load_mb": round(before),
        "rss_after_load_mb": round(loaded),
    }

    windows = [[f"w{(i * 7 + j * 13) % 5000}" for j in range(words)] for i in range(sentences)]
    reset_peak()
    start = time.perf_counter()
    ppl = bilm_perplexities(model, DataCollatorForElmoLanguageModeling(tokenizer), windows, BATCH, "cpu")
    figures["scoring_seconds"] = round(time.perf_counter() - start, 1)
    figures["scoring_peak_above_loaded_mb"] = round(rss_mb("VmHWM") - loaded)
    figures["perplexity"] = round(ppl["perplexity"])

    fill = pipeline(
        "fill-mask", model=model, tokenizer=tokenizer, pipeline_class=elmo_transformers.ElmoFillMaskPipeline
    )
    texts = [
        " ".join(w if j != i % words else "<mask>" for j, w in enumerate(window))
        for i, window in enumerate(windows[:BATCH])
    ]
    reset_peak()
    start = time.perf_counter()
    results = fill(texts, batch_size=BATCH, top_k=5)
    figures["fill_mask_seconds"] = round(time.perf_counter() - start, 1)
    figures["fill_mask_peak_above_loaded_mb"] = round(rss_mb("VmHWM") - loaded)
    assert len(results) == BATCH and all(len(r) == 5 for r in results)
    return figures


def run(work, vocab_size=PUBLISHED_VOCAB_SIZE, projection_dim=8, sentences=1000, words=6):
    """Make the model (once) and measure it in a fresh process; returns the figures."""
    folder = os.path.join(work, f"lm-v{vocab_size}-p{projection_dim}")
    if not os.path.isfile(os.path.join(folder, "model.safetensors")):
        make_model(folder, vocab_size, projection_dim)
    here = os.path.dirname(os.path.abspath(__file__))
    code = (
        f"import json, sys; sys.path.insert(0, {here!r}); import lm_memory; "
        f"print(json.dumps(lm_memory.measure({folder!r}, {sentences}, {words})))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if result.returncode:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="folder for the random model")
    parser.add_argument("--vocab-size", type=int, default=PUBLISHED_VOCAB_SIZE)
    parser.add_argument("--projection-dim", type=int, default=8, help="512 for the Original model's softmax size")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--words", type=int, default=6, help="words per sentence")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.work, args.vocab_size, args.projection_dim, args.sentences, args.words), indent=1))


if __name__ == "__main__":
    main()
