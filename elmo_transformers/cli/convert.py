"""`elmo-transformers convert allennlp | elmoformanylangs`: an original model into a Hub-ready ELMo folder.

    elmo-transformers convert allennlp --options OPTIONS.json --weights WEIGHTS.hdf5 --output DIR \
        [--softmax-weights SOFTMAX.hdf5 --vocab VOCAB.txt]
    elmo-transformers convert tensorflow PATH --output DIR [--options OPTIONS.json] [--vocab VOCAB.txt]
    elmo-transformers convert elmoformanylangs MODEL_DIR --output DIR

The folder holds config.json (with `auto_map`), model.safetensors, the tokenizer files and the model's module files,
so that `AutoModel.from_pretrained(DIR, trust_remote_code=True)` works, and with `import elmo_transformers` without
remote code. Every weight is checked before anything is written; the folder appears only when the conversion
succeeded, and --overwrite replaces only an earlier conversion. With AllenNLP's published softmax and its
vocabulary the folder is the language model (`AutoModelForPreTraining`; `AutoModel` loads the biLM alone).
`tensorflow` reads a TF-Hub ELMo module (folder or .tar.gz), a bilm-tf training folder or a checkpoint prefix, with no
TensorFlow installed; without options.json the architecture comes from the weight shapes.
"""

import argparse

from ..conversion import output as conversion_output


def main(argv=None):
    parser = argparse.ArgumentParser(prog="elmo-transformers convert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    formats = parser.add_subparsers(dest="format", metavar="FORMAT", required=True)
    allennlp = formats.add_parser("allennlp", help="AllenNLP / bilm-tf options.json + weights.hdf5",
                                  description="Convert AllenNLP's or bilm-tf's options.json + weights.hdf5.")
    allennlp.add_argument("--options", help="options.json of the original model (default: inferred from the "
                          "weight shapes, with the Original's clipping, skip connections and activation)")
    allennlp.add_argument("--weights", required=True, help="weights.hdf5 of the original model")
    allennlp.add_argument("--softmax-weights", help="the published softmax (NAME_softmax_weights.hdf5): gives the LM")
    allennlp.add_argument("--vocab", help="the softmax's vocabulary, one word a line (e.g. vocab-2016-09-10.txt)")
    tensorflow = formats.add_parser(
        "tensorflow", help="a TF-Hub ELMo module or a bilm-tf checkpoint (no TensorFlow needed)",
        description="Convert a TF-Hub ELMo module (folder or .tar.gz), a bilm-tf training folder (options.json, "
        "checkpoint, model.ckpt-N.*) or a checkpoint prefix.")
    tensorflow.add_argument("path", help="the module folder or .tar.gz, the training folder or the checkpoint prefix")
    tensorflow.add_argument("--options", help="options.json (default: the training folder's, else inferred from the "
                            "weight shapes with the Original's clipping, skip connections and activation)")
    tensorflow.add_argument("--vocab", help="the checkpoint softmax's vocabulary, one word a line: gives the LM")
    efml = formats.add_parser("elmoformanylangs", help="an ELMoForManyLangs (HIT-SCIR) model folder",
                              description="Convert an ELMoForManyLangs model folder (config.json, char.dic, word.dic, "
                              "token_embedder.pkl, encoder.pkl).")
    efml.add_argument("model_dir", help="the ELMoForManyLangs model folder")
    for subparser in (allennlp, tensorflow, efml):
        conversion_output.add_arguments(subparser)
    args = parser.parse_args(argv)
    if args.format == "allennlp":
        from ..conversion.allennlp import convert

        inputs = [p for p in (args.options, args.weights, args.softmax_weights, args.vocab) if p is not None]
        return conversion_output.run(
            args, lambda **kwargs: convert(args.options, args.weights, args.softmax_weights, args.vocab, **kwargs),
            args.weights, inputs,
        )
    if args.format == "tensorflow":
        from ..conversion.tensorflow import convert

        inputs = [p for p in (args.path, args.options, args.vocab) if p is not None]
        return conversion_output.run(
            args, lambda **kwargs: convert(args.path, args.options, args.vocab, **kwargs), args.path, inputs,
        )
    from ..conversion.elmoformanylangs import convert

    return conversion_output.run(args, lambda **kwargs: convert(args.model_dir, **kwargs), args.model_dir,
                                 [args.model_dir])
