#!/usr/bin/env python
"""The main job in one command: load an ELMo folder with the Auto classes, embed sentences, compare contexts.

    python scripts/demo.py ["A sentence ." "Another sentence ." ...] [--model DIR_OR_REPO]

For each sentence it prints the words' ELMo vectors (their size and first values) and the sentence vector; then,
for every word that occurs in two sentences, the cosine similarity of its two vectors in each biLM layer: layer 0 is
context-free (always 1.0), the LSTM layers see the context, so the same word in different senses drifts apart.
Without --model it uses the model shipped in models/elmo-pd-small (trained by scripts/reproduce_default_model.sh).
"""

import argparse
import itertools
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

from modeling_elmo import masked_mean

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "models" / "elmo-pd-small"
DEFAULT_SENTENCES = [
    "He sat on the bank of the river and watched the water .",
    "She paid the money into her account at the bank .",
    "The river overflowed its bank after the storm .",
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sentences", nargs="*", default=DEFAULT_SENTENCES, help="whitespace-tokenized sentences")
    parser.add_argument("--model", default=str(DEFAULT_MODEL), help="an ELMo folder or a Hub repo id")
    args = parser.parse_args(argv)

    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    model = AutoModel.from_pretrained(args.model, trust_remote_code=True).eval()
    batch = tokenizer(args.sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    weights = [round(w, 3) for w in torch.softmax(model.scalar_mixes[0].scalar_parameters, 0).tolist()]
    print(f"{args.model}: ELMo vectors {tuple(out.last_hidden_state.shape)} = (sentences, words, 2 x "
          f"{model.config.projection_dim}), a mix of {len(out.hidden_states)} biLM layers with weights {weights}")
    sentence_vectors = masked_mean(out.last_hidden_state, out.mask)
    words = [text.split() for text in args.sentences]
    for i, text in enumerate(args.sentences):
        print(f"\n{text!r}: sentence vector norm {sentence_vectors[i].norm():.2f}")
        for j, word in enumerate(words[i]):
            print(f"  {word:>14}  {[round(v, 3) for v in out.last_hidden_state[i, j, :4].tolist()]} ...")

    print("\nThe same word in two sentences: cosine similarity per biLM layer (0 = context-free)")
    for (i, a), (k, b) in itertools.combinations(enumerate(words), 2):
        for word in sorted(set(a) & set(b), key=a.index):
            if not any(ch.isalpha() for ch in word):
                continue
            j, m = a.index(word), b.index(word)
            sims = [torch.cosine_similarity(h[i, j], h[k, m], dim=0).item() for h in out.hidden_states]
            print(f"  {word!r} in sentences {i} and {k}: " + "  ".join(f"layer {n} {s:.3f}" for n, s in enumerate(sims)))


if __name__ == "__main__":
    main()
