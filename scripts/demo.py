#!/usr/bin/env python
"""The main job in one command: load an ELMo folder with the Auto classes and embed sentences.

    python scripts/demo.py "The cat sat on the mat ." ["Another sentence ." ...] [--model DIR_OR_REPO]

Without --model it builds the tiny model of the test fixtures (AllenNLP's tiny test ELMo, converted from its
original files): its weights are RANDOM, so the numbers show the mechanics, not meaning.
"""

import argparse
import os
import tempfile
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

from modeling_elmo import masked_mean

TINY_FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "allennlp-tiny"


def build_fixture_model():
    from convert_allennlp_elmo import convert, save_atomically

    model, tokenizer = convert(TINY_FIXTURE / "options.json", TINY_FIXTURE / "weights.hdf5")
    return save_atomically(model, tokenizer, os.path.join(tempfile.mkdtemp(prefix="elmo-demo-"), "allennlp-tiny"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sentences", nargs="*", default=["The cat sat on the mat .", "A bank of the river ."])
    parser.add_argument("--model", help="a converted or trained ELMo folder, or a Hub repo id")
    args = parser.parse_args(argv)

    model_path = args.model
    if model_path is None:
        model_path = build_fixture_model()
        print(f"No --model given: using the tiny test-fixture ELMo with RANDOM weights ({model_path}).\n")
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=True)
    model = AutoModel.from_pretrained(model_path, trust_remote_code=True).eval()
    batch = tokenizer(args.sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    print(f"ELMo vectors: {tuple(out.last_hidden_state.shape)} = (sentences, words, 2 x {model.config.projection_dim});"
          f" {len(out.hidden_states)} biLM layers mixed by softmax weights "
          f"{torch.softmax(model.scalar_mixes[0].scalar_parameters, 0).tolist()}")
    sentence_vectors = masked_mean(out.last_hidden_state, out.mask)
    for i, text in enumerate(args.sentences):
        print(f"\n{text!r}  (sentence vector norm {sentence_vectors[i].norm():.3f})")
        for j in range(int(out.mask[i].sum())):
            vector = out.last_hidden_state[i, j]
            layers = " ".join(f"{h[i, j].norm():7.3f}" for h in out.hidden_states)
            word = tokenizer.decode(batch["input_ids"][i, j])
            print(f"  {word:>15}  layer norms [{layers}]  vector[:4] {[round(v, 3) for v in vector[:4].tolist()]}")


if __name__ == "__main__":
    main()
