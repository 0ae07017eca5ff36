"""`elmo-transformers perplexity`: forward, backward and average perplexity of a biLM language model on text files.

    elmo-transformers perplexity --model DIR FILE [FILE ...] [--output FIGURES.json]

DIR is any ELMo language-model folder (`ElmoForLanguageModeling`: converted with its softmax, pre-trained or adapted
with `elmo-transformers pretrain`). Each file (one sentence or paragraph per line; UTF-8 .txt or .txt.gz) is split
into words by the model's tokenizer (its segmenter, for a Chinese or Japanese model), cut into windows of at most
--max-words words, as pre-training cuts its text, and scored with the full softmax. --output gets
the figures as JSON, written whole or not at all; it may not be, contain or sit inside an input.
"""

import argparse
import json

from ..errors import ModelError
from ..models import DEFAULT_MODEL
from . import option

NOT_AN_LM = (
    "it has no language-model softmax (no lm_vocab_size in its config.json): perplexity needs a language "
    "model, e.g. the shipped model (omit --model), a conversion given --softmax-weights and --vocab, or the "
    "output of `elmo-transformers pretrain`"
)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="elmo-transformers perplexity", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="text files, each scored alone")
    parser.add_argument(
        "--model", default=str(DEFAULT_MODEL), help="LM folder or Hub repo id (default: the shipped model)"
    )
    parser.add_argument("--max-words", type=int, default=30, help="window length (default 30, the default model's)")
    parser.add_argument("--batch-size", type=int, default=32, help="windows per forward pass (default 32)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--output", help="also write the figures here as JSON")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    args = parser.parse_args(argv)
    for name in ("max_words", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    from ..model_folder import open_model  # (after parsing: huggingface_hub is slow)
    from ..model_source import load_model
    from ..output_paths import check_file_output, check_output_apart, write_file_atomically

    with option("--model", args.model):
        source = open_model(args.model)
    if args.output:
        with option("--output", args.output):
            check_output_apart(args.output, [*args.files, source.path])
            check_file_output(args.output, args.overwrite)
    from modeling_elmo import ElmoForLanguageModeling

    from ..training.perplexity import file_perplexities

    with option("--model", args.model), option("--device", args.device):  # the model before the data: reading and
        if not source.is_language_model:  # windowing a corpus takes a while
            raise ModelError(f"{args.model}: {NOT_AN_LM}", args.model)
        model, tokenizer = load_model(source, ElmoForLanguageModeling, device=args.device)
    device = model.device
    results = {}
    for path, figures in file_perplexities(model, tokenizer, args.files, args.max_words, args.batch_size, device):
        results[path] = figures
        print(
            f"{path}: {figures['words']:,} words: forward {figures['forward_perplexity']:.1f}, "
            f"backward {figures['backward_perplexity']:.1f}, average {figures['perplexity']:.1f}"
        )
    if args.output:
        with option("--output", args.output):
            write_file_atomically(args.output, json.dumps(results, indent=2) + "\n")
    return 0
