"""`elmo-transformers embed`: a text file's ELMo vectors into HDF5 (the rules:
`elmo_transformers.embedding.embed_file`)."""

import argparse
import os
import sys

from ..embedding.defaults import DEFAULT_BATCH_SIZE, DTYPE_NAMES, MAX_SENTENCE_WORDS
from ..model_source import loading, resolve_model
from ..models import DEFAULT_MODEL
from . import import_package, module_doc, option, torch_device


def main(argv=None):
    parser = argparse.ArgumentParser(prog="elmo-transformers embed",
                                     description=module_doc("elmo_transformers.embedding.embed_file"),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="text file, one sentence per line, split into words as the model's tokenizer "
                        "splits raw text (white space, or its segmenter: jieba, fugashi...) (- for stdin)")
    parser.add_argument("output", help="HDF5 file to write")
    parser.add_argument("--model", default=str(DEFAULT_MODEL),
                        help="converted ELMo folder or Hub repo id (default: the shipped model), or a folder `export "
                        "onnx` wrote (run by onnxruntime)")
    mode = parser.add_mutually_exclusive_group(required=True)
    for name, help_text in [
        ("all", "all biLM layers: (n_layers + 1, words, 2P) per line"),
        ("top", "the top layer: (words, 2P) per line"),
        ("average", "the plain mean of the layers: (words, 2P) per line"),
    ]:
        mode.add_argument(f"--{name}", dest="mode", action="store_const", const=name, help=help_text)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                        help="sentences per forward pass (default 64)")
    parser.add_argument("--max-sentence-words", type=int, default=MAX_SENTENCE_WORDS,
                        help="longer lines are embedded in stateful windows of this many words (default 1000)")
    parser.add_argument("--dtype", choices=DTYPE_NAMES,
                        help="compute dtype (default float32; an exported ONNX folder's is the one it was exported "
                        "in); outputs are float32. int8: int8 LSTM weights on the CPU, the fastest there; its vectors "
                        "stay within the int8 rule (cosine to float32 on the default model: median >= 0.999, 1st "
                        "percentile >= 0.99; docs/speed.md). bfloat16 pays on CPUs with native bf16 and on GPUs")
    parser.add_argument("--device",
                        help="torch device (default: the process's accelerator as accelerate picks it, else cpu)")
    parser.add_argument("--resume", action="store_true", help="continue the interrupted run in OUTPUT.partial/")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    args = parser.parse_args(argv)
    for name in ("batch_size", "max_sentence_words"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    with option("--model", args.model):
        folder = resolve_model(args.model)
    from ..embedding.partial_run import PartialRun, check_paths  # imports no torch: the paths fail fast

    try:
        output = check_paths(args.input, args.output, args.overwrite, args.resume, folder)
        import_package()
        import torch

        from ..embedding.embed_file import embed_file
        from ..embedding.embedder import ElmoEmbedder, process_state
        from ..model_files import is_onnx_export

        device = torch_device(args.device) if args.device else None
        with option("--model", args.model), option("--dtype", args.dtype), option("--device", args.device), \
                loading(args.model):
            if args.dtype == "int8":
                from quantization_elmo import ElmoInt8Config

                embedder = ElmoEmbedder(folder, device=device, quantization_config=ElmoInt8Config())
            elif args.dtype is None and is_onnx_export(folder):  # the dtype it was exported in
                embedder = ElmoEmbedder(folder, device=device)
            else:
                embedder = ElmoEmbedder(folder, device=device, dtype=getattr(torch, args.dtype or "float32"))
        with option("--max-sentence-words", args.max_sentence_words):
            embed_file(embedder, args.input, output, args.mode, args.batch_size,
                       max_sentence_words=args.max_sentence_words, resume=args.resume, overwrite=args.overwrite)
    except KeyboardInterrupt:
        folder = PartialRun(os.path.abspath(args.output)).folder
        print(f"\ninterrupted: finished lines are kept in {folder}; rerun with --resume", file=sys.stderr)
        return 130
    if process_state().is_main_process:
        print(f"wrote {args.mode} vectors of {args.input} -> {output}", file=sys.stderr)
    return 0
