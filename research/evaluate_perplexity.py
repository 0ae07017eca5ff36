"""Held-out perplexity of a trained biLM next to smoothed unigram and bigram baselines on the same predictions.

    python research/evaluate_perplexity.py --model elmo_transformers/models/elmo-en-small \
        --train_file data/train.txt.gz --eval_file data/valid.txt.gz data/test.txt.gz

Each evaluation file is cut into windows exactly as `elmo-transformers pretrain` cuts training text (`--max_words`,
which must be the training run's), and scored with the full softmax, forward, backward and average perplexity. The
baselines (`ngram_baselines.py`) are counted on `--train_file`, use the model's vocabulary and predict the same
tokens.
"""

import argparse
import json

import torch
from ngram_baselines import baseline_perplexities
from transformers import AutoModelForPreTraining, AutoTokenizer

from elmo_transformers.training.data import DataCollatorForElmoLanguageModeling, load_splits, text_to_windows
from elmo_transformers.training.perplexity import bilm_perplexities


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a biLM language model folder (ElmoForLanguageModeling)")
    parser.add_argument(
        "--train-file", "--train_file", nargs="+", required=True, help="the training text, for the baselines"
    )
    parser.add_argument(
        "--eval-file", "--eval_file", nargs="+", required=True, help="held-out text files, each scored alone"
    )
    parser.add_argument("--max-words", "--max_words", type=int, default=30, help="window length used in training")
    parser.add_argument("--batch-size", "--batch_size", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--output", help="write the figures here as JSON")
    args = parser.parse_args(argv)

    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    model = AutoModelForPreTraining.from_pretrained(args.model, trust_remote_code=True).to(args.device).eval()
    collator = DataCollatorForElmoLanguageModeling(tokenizer)
    vocab = tokenizer.vocab  # the softmax's words (get_vocab() adds <pad> and <mask>)
    train = text_to_windows(load_splits(data_files={"train": args.train_file})["train"], "text", args.max_words)
    results = {}
    for path in args.eval_file:
        windows = text_to_windows(load_splits(data_files={"eval": [path]})["eval"], "text", args.max_words)["words"]
        words = [word for window in windows for word in window]
        figures = {
            "words": len(words),
            "unknown_words": sum(word not in vocab for word in words) / len(words),
            "bilm": bilm_perplexities(model, collator, windows, args.batch_size, args.device),
        }
        figures.update(baseline_perplexities(train["words"], windows, vocab))
        results[path] = figures
        print(f"{path}: {figures['words']:,} words, {100 * figures['unknown_words']:.1f} % not in the vocabulary")
        for name in ("bilm", "bigram", "unigram"):
            f = figures[name]
            print(
                f"  {name:>8}: forward {f['forward_perplexity']:9.1f}  backward {f['backward_perplexity']:9.1f}  "
                f"average {f['perplexity']:9.1f}"
            )
    if args.output:
        with open(args.output, "w") as f:
            json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()
