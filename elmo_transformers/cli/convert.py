"""`elmo-transformers convert allennlp | tensorflow | elmoformanylangs`: an original model into a Hub-ready ELMo folder.

    elmo-transformers convert allennlp --preset {small,medium,original,original-5.5b} [--with-lm] --output DIR
    elmo-transformers convert allennlp --options OPTIONS.json --weights WEIGHTS.hdf5 --output DIR \
        [--softmax-weights SOFTMAX.hdf5 --vocab VOCAB.txt]
    elmo-transformers convert tensorflow PATH --output DIR [--options OPTIONS.json] [--vocab VOCAB.txt]
    elmo-transformers convert elmoformanylangs {MODEL_DIR | --preset NAME} [--segmenter S] [--opencc CONFIG] \
        --output DIR

The folder holds config.json (with `auto_map`), model.safetensors, the tokenizer files and the model's module files,
so that `AutoModel.from_pretrained(DIR, trust_remote_code=True)` works, and with `import elmo_transformers` without
remote code. Every weight is checked before anything is written; the folder appears only when the conversion
succeeded, and --overwrite replaces only an earlier conversion. With AllenNLP's published softmax and its
vocabulary the folder is the language model (`AutoModelForPreTraining`; `AutoModel` loads the biLM alone).
`tensorflow` reads a TF-Hub ELMo module (folder or .tar.gz), a bilm-tf training folder or a checkpoint prefix, with no
TensorFlow installed; without options.json the architecture comes from the weight shapes.

--preset downloads AllenNLP's published files into a cache a second conversion reuses
($HF_HOME/assets/elmo-transformers/allennlp/PRESET/); ELMO_TRANSFORMERS_ALLENNLP_URL replaces the base URL
(https://s3-us-west-2.amazonaws.com/allennlp/models/elmo) with a mirror. The folder's README.md names the source
URLs and the licence.

`elmoformanylangs --preset NAME` does the same for ELMoForManyLangs' models (ar ... zh-hant, and zh-hans; cached in
$HF_HOME/assets/elmo-transformers/elmoformanylangs/NAME/): ELMO_TRANSFORMERS_NLPL_URL replaces the NLPL
repository's base URL (http://vectors.nlpl.eu/repository; the path 11/NNN.zip is kept), ELMO_TRANSFORMERS_HITSCIR_URL
the simplified-Chinese model's. The tokenizer splits raw text as the model's training text was (jieba for Chinese,
fugashi + unidic-lite for Japanese, white space elsewhere); --segmenter chooses another, --opencc converts the text
(s2t: simplified text for the traditional-Chinese model).
"""

import argparse
import sys

from ..conversion.output import save_atomically
from ..output_paths import check_output
from ..conversion.presets import (
    EFML_PRESETS,
    PRESETS,
    TRADITIONAL_NOTE,
    efml_preset_card,
    fetch_efml_preset,
    fetch_preset,
    preset_card,
)
from . import import_package, option


def add_output_arguments(parser):
    """The command-line options every converter shares: where to write and the scalar-mix settings."""
    parser.add_argument("--output", required=True, help="folder to write (must not exist, or be empty)")
    parser.add_argument("--num-output-representations", type=int, default=1, help="scalar mixes (default 1)")
    parser.add_argument("--do-layer-norm", action="store_true", help="layer-normalise layers before mixing")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier conversion in --output")


def run(args, convert, source, inputs, card=None):
    """Check --output against the `inputs` (paths), `convert(**config_kwargs) -> (model, tokenizer)`, write the
    folder (conversion/output.py's rules) and say what was written."""
    with option("--output", args.output):
        check_output(args.output, args.overwrite, inputs)  # before the conversion, which can take a while
    model, tokenizer = convert(
        num_output_representations=args.num_output_representations, do_layer_norm=args.do_layer_norm
    )
    with option("--output", args.output):
        output = save_atomically(model, tokenizer, args.output, overwrite=args.overwrite, card=card)
    print(f"converted {source} ({sum(p.numel() for p in model.parameters()):,} parameters) -> {output}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="elmo-transformers convert", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    formats = parser.add_subparsers(dest="format", metavar="{allennlp,tensorflow,elmoformanylangs}", required=True)
    allennlp = formats.add_parser(
        "allennlp",
        help="AllenNLP / bilm-tf options.json + weights.hdf5",
        description="Convert AllenNLP's or bilm-tf's options.json + weights.hdf5.",
    )
    allennlp.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="download and convert one of AllenNLP's published "
        "models (small, medium, original, original-5.5b; cached; the base URL can be set with "
        "ELMO_TRANSFORMERS_ALLENNLP_URL) instead of giving --options/--weights",
    )
    allennlp.add_argument(
        "--with-lm",
        action="store_true",
        help="with --preset original or original-5.5b: also the "
        "published softmax and vocabulary, giving the language model",
    )
    allennlp.add_argument(
        "--options",
        help="options.json of the original model (default: inferred from the "
        "weight shapes, with the Original's clipping, skip connections and activation)",
    )
    allennlp.add_argument("--weights", help="weights.hdf5 of the original model")
    allennlp.add_argument("--softmax-weights", help="the published softmax (NAME_softmax_weights.hdf5): gives the LM")
    allennlp.add_argument("--vocab", help="the softmax's vocabulary, one word a line (e.g. vocab-2016-09-10.txt)")
    tensorflow = formats.add_parser(
        "tensorflow",
        help="a TF-Hub ELMo module or a bilm-tf checkpoint (no TensorFlow needed)",
        description="Convert a TF-Hub ELMo module (folder or .tar.gz), a bilm-tf training folder (options.json, "
        "checkpoint, model.ckpt-N.*) or a checkpoint prefix.",
    )
    tensorflow.add_argument("path", help="the module folder or .tar.gz, the training folder or the checkpoint prefix")
    tensorflow.add_argument(
        "--options",
        help="options.json (default: the training folder's, else inferred from the "
        "weight shapes with the Original's clipping, skip connections and activation)",
    )
    tensorflow.add_argument("--vocab", help="the checkpoint softmax's vocabulary, one word a line: gives the LM")
    efml = formats.add_parser(
        "elmoformanylangs",
        help="an ELMoForManyLangs (HIT-SCIR) model folder",
        description="Convert an ELMoForManyLangs model folder (config.json, char.dic, word.dic, "
        "token_embedder.pkl, encoder.pkl).",
    )
    efml.add_argument("model_dir", nargs="?", help="the ELMoForManyLangs model folder (or --preset)")
    efml.add_argument(
        "--preset",
        choices=list(EFML_PRESETS),
        metavar="NAME",
        help="download and convert ELMoForManyLangs' model for a language: "
        f"{', '.join(EFML_PRESETS)} (zh-hant: traditional Chinese, zh-hans: simplified; cached; "
        "ELMO_TRANSFORMERS_NLPL_URL sets the repository's base URL)",
    )
    efml.add_argument(
        "--segmenter",
        choices=["whitespace", "jieba", "fugashi", "sudachipy"],
        help="how the tokenizer splits raw text into words (default: the preset's, else whitespace)",
    )
    efml.add_argument(
        "--opencc",
        metavar="CONFIG",
        help="convert raw text with OpenCC first, e.g. s2t for "
        "simplified-Chinese text and the traditional-Chinese model (zh-hant)",
    )
    for subparser in (allennlp, tensorflow, efml):
        add_output_arguments(subparser)
    args = parser.parse_args(argv)
    if args.format == "allennlp":
        files = (args.options, args.weights, args.softmax_weights, args.vocab)
        if args.preset and any(files):
            parser.error("--preset downloads its own files: leave out --options, --weights, --softmax-weights, --vocab")
        if not args.preset and not args.weights:
            parser.error("give --preset NAME, or --weights (and --options, or the architecture comes from the shapes)")
        if args.with_lm and not args.preset:
            parser.error("--with-lm goes with --preset (for your own files: --softmax-weights and --vocab)")
        import_package()
        from ..conversion.allennlp import convert

        card = None
        if args.preset:
            with option("--output", args.output):
                check_output(args.output, args.overwrite, [])  # before the download
            paths, urls = fetch_preset(args.preset, args.with_lm)
            files, card = tuple(paths.get(k) for k in ("options", "weights", "softmax", "vocab")), preset_card(urls)
        return run(
            args,
            lambda **kwargs: convert(*files, **kwargs),
            files[1],
            [p for p in files if p is not None],
            card,
        )
    import_package()
    if args.format == "tensorflow":
        from ..conversion.tensorflow import convert

        inputs = [p for p in (args.path, args.options, args.vocab) if p is not None]
        return run(
            args,
            lambda **kwargs: convert(args.path, args.options, args.vocab, **kwargs),
            args.path,
            inputs,
        )
    from ..conversion.elmoformanylangs import convert

    if (args.preset is None) == (args.model_dir is None):
        efml.error("give an ELMoForManyLangs model folder, or --preset NAME (not both)")
    model_dir, card, segmenter = args.model_dir, None, args.segmenter
    if args.preset:
        with option("--output", args.output):
            check_output(args.output, args.overwrite, [])  # before the download
        model_dir, url = fetch_efml_preset(args.preset)
        segmenter = segmenter or EFML_PRESETS[args.preset].segmenter
        card = efml_preset_card(args.preset, url, segmenter)
    if args.preset == "zh-hant" and not args.opencc:
        print(f"note: {TRADITIONAL_NOTE}", file=sys.stderr)
    tokenizer_options = dict(segmenter=segmenter or "whitespace", opencc_config=args.opencc)
    return run(args, lambda **kwargs: convert(model_dir, **tokenizer_options, **kwargs), model_dir, [model_dir], card)
