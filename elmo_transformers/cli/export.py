"""`elmo-transformers export onnx`: an ELMo model as an ONNX graph that onnxruntime serves without PyTorch.

    elmo-transformers export onnx [--model M] --output DIR [--dtype float32|int8] [--overwrite]

DIR holds model.onnx (inputs input_ids int64 [batch, words, C] and attention_mask int64 [batch, words]; outputs
last_hidden_state float32 [batch, words, 2P] and hidden_states float32 [layers, batch, words, 2P]; the LSTM a loop in
the graph, any batch and length), config.json, the tokenizer's files with tokenization_elmo.py and a README.md card.
A language model's biLM is exported, not its word softmax. --dtype int8 quantizes the LSTM's GEMM weights (within the
int8 rule of docs/speed.md). The folder appears only complete; --overwrite replaces only an earlier export or
conversion. Needs onnx, onnxscript and onnxruntime: pip install "elmo-transformers[onnx]". Serving: docs/serving.md.
"""

import argparse

from ..models import DEFAULT_MODEL
from ..runtime.onnx_config import DTYPES  # imports nothing heavy: --help answers before torch loads
from . import option


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="elmo-transformers export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT", required=True)
    onnx = formats.add_parser(
        "onnx",
        help="an ONNX graph for onnxruntime (no PyTorch needed to serve it)",
        description="Export an ELMo model as an ONNX graph (see `elmo-transformers export --help`).",
    )
    onnx.add_argument(
        "--model", default=str(DEFAULT_MODEL), help="ELMo folder or Hub repo id (default: the shipped model)"
    )
    onnx.add_argument("--output", required=True, help="folder to write (must not exist, or be empty)")
    onnx.add_argument(
        "--dtype", choices=DTYPES, default="float32", help="float32 (default), or int8 weights for the LSTM's GEMMs"
    )
    onnx.add_argument("--overwrite", action="store_true", help="replace an earlier export or conversion in --output")
    args = parser.parse_args(argv)
    from ..model_folder import open_model  # (after parsing: huggingface_hub takes a while to import)
    from ..model_source import load_model
    from ..runtime.onnx_export import export_onnx

    with option("--model", args.model):
        source = open_model(args.model)
        from modeling_elmo import ElmoModel

        model, tokenizer = load_model(source, ElmoModel, dtype="float32")
    with option("--output", args.output):
        output = export_onnx(model, tokenizer, args.output, args.dtype, args.overwrite, source.name)
    print(f"exported {args.model} ({args.dtype}) -> {output}")
    return 0
