"""`elmo-transformers perplexity`: forward, backward and average perplexity of a biLM language model on text files.

    elmo-transformers perplexity --model DIR FILE [FILE ...]

DIR is any ELMo language-model folder (`ElmoForLanguageModeling`: converted with its softmax, pre-trained or adapted
with `elmo-transformers pretrain`). Each file (one sentence or paragraph per line; .txt or .txt.gz) is cut into
windows of at most --max-words words, as pre-training cuts its text, and scored with the full softmax.
"""

import argparse
import json

from transformers import AutoModelForPreTraining, AutoTokenizer

from ..models import DEFAULT_MODEL
from ..training.data import DataCollatorForElmoLanguageModeling, load_splits, text_to_windows
from ..training.perplexity import bilm_perplexities


def main(argv=None):
    parser = argparse.ArgumentParser(prog="elmo-transformers perplexity", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="FILE", help="text files, each scored alone")
    parser.add_argument("--model", default=str(DEFAULT_MODEL),
                        help="LM folder or Hub repo id (default: the shipped model)")
    parser.add_argument("--max-words", type=int, default=30, help="window length (default 30, the default model's)")
    parser.add_argument("--batch-size", type=int, default=32, help="windows per forward pass (default 32)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--output", help="also write the figures here as JSON")
    args = parser.parse_args(argv)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForPreTraining.from_pretrained(args.model).to(args.device).eval()
    collator = DataCollatorForElmoLanguageModeling(tokenizer)
    results = {}
    for path in args.files:
        windows = text_to_windows(load_splits(data_files={"eval": [path]})["eval"], "text", args.max_words)["words"]
        figures = bilm_perplexities(model, collator, windows, args.batch_size, args.device)
        results[path] = {"words": sum(len(w) for w in windows), **figures}
        print(f"{path}: {results[path]['words']:,} words: forward {figures['forward_perplexity']:.1f}, "
              f"backward {figures['backward_perplexity']:.1f}, average {figures['perplexity']:.1f}")
    if args.output:
        with open(args.output, "w") as f:
            json.dump(results, f, indent=2)
    return 0
