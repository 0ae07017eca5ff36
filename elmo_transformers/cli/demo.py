"""`elmo-transformers demo`: what ELMo is for, in one command: the same word gets different vectors in different
contexts.

    elmo-transformers demo ["A sentence ." "Another sentence ." ...] [--model DIR_OR_REPO]

Embeds the sentences (words split on whitespace), picks a word that occurs in several of them and shows how similar
its ELMo vectors are, pair by pair, and which uses ELMo groups together (each use joins the use nearest to it): uses
in the same sense come out closer than uses in different senses. When the sentences share no such word (one
sentence, say), the built-in examples about "bank" (river bank, the bank that lends money) are added. Without
--model it uses the model shipped with the package (`elmo_transformers.DEFAULT_MODEL`).
"""

import argparse
import itertools
from collections import defaultdict

from ..model_source import load_config, loading, resolve_model
from ..models import DEFAULT_MODEL
from . import import_package, option

EXAMPLES = [
    "He sat on the bank of the river and watched the water .",
    "The bank raised the interest on loans .",
    "They fished from the muddy bank of the river .",
    "The bank charged a fee for the transfer .",
]
MIN_LETTERS = 4  # shorter repeated words are mostly function words ("the", "and"), whose sense never changes


def occurrences(sentences):
    """word (lower case) -> [(sentence, position)] for the words that occur more than once."""
    found = defaultdict(list)
    for i, sentence in enumerate(sentences):
        for j, word in enumerate(sentence.split()):
            if word.isalpha() and len(word) >= MIN_LETTERS:
                found[word.lower()].append((i, j))
    return {word: places for word, places in found.items() if len(places) > 1}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="elmo-transformers demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sentences", nargs="*", help="whitespace-tokenized sentences (default: examples about bank)")
    parser.add_argument("--model", default=str(DEFAULT_MODEL),
                        help="an ELMo folder or a Hub repo id (default: the shipped model)")
    args = parser.parse_args(argv)
    with option("--model", args.model):
        folder = resolve_model(args.model)
    import_package()  # registers ELMo with the Auto classes
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging

    sentences = [s for s in args.sentences if s.split()] or EXAMPLES
    if not occurrences(sentences):
        print(f"No word of {MIN_LETTERS}+ letters occurs twice in your sentences; adding the built-in examples.\n")
        sentences = sentences + [s for s in EXAMPLES if s not in sentences]
    logging.disable_progress_bar()
    with option("--model", args.model):
        config = load_config(folder, args.model)  # first: its errors are the clearest
        with loading(args.model):
            tokenizer = AutoTokenizer.from_pretrained(folder)
            model = AutoModel.from_pretrained(folder, config=config).eval()
    with torch.no_grad():
        out = model(**tokenizer(sentences, padding=True, return_tensors="pt"), output_hidden_states=True)

    word, places = max(occurrences(sentences).items(), key=lambda item: (len(item[1]), len(item[0])))
    print(f"ELMo gives every word a {out.last_hidden_state.shape[-1]}-d vector computed from its whole sentence.")
    print(f'The word "{word}" in {len(places)} places:')
    for n, (i, j) in enumerate(places, 1):
        print(f"  [{n}] {sentences[i]}" + (f"  (word {j + 1})" if sum(p[0] == i for p in places) > 1 else ""))

    def similarity(vectors, a, b):
        return torch.cosine_similarity(vectors[a[0], a[1]], vectors[b[0], b[1]], dim=0).item()

    elmo = {pair: similarity(out.last_hidden_state, places[pair[0]], places[pair[1]])
            for pair in itertools.combinations(range(len(places)), 2)}
    print("\nCosine similarity of its ELMo vectors (1 = same direction), most similar pair first:")
    for (a, b), value in sorted(elmo.items(), key=lambda item: -item[1]):
        print(f"  [{a + 1}] and [{b + 1}]: {value:.2f}")
    if len(places) > 2:
        print(f"Grouped by ELMo (each use joined to its most similar use): {' '.join(sense_groups(elmo, len(places)))}")
    context_free = min(similarity(out.hidden_states[0], places[a], places[b]) for a, b in elmo)
    print(f"\nWithout context (biLM layer 0, the char CNN) every pair scores {context_free:.2f}: one vector per "
          "spelling.\nELMo's vectors depend on the sentence, so uses in the same sense tend to be closer: a "
          "tendency, whose\nstrength depends on the model (its card gives a word-sense score).")


def sense_groups(similarities, n):
    """Join each use to its most similar use; the connected groups, as strings like "{[1] [3]}"."""
    group = list(range(n))

    def root(i):
        while group[i] != i:
            i = group[i]
        return i

    for i in range(n):
        nearest = max((j for j in range(n) if j != i), key=lambda j: similarities[min(i, j), max(i, j)])
        group[root(i)] = root(nearest)
    members = defaultdict(list)
    for i in range(n):
        members[root(i)].append(f"[{i + 1}]")
    return ["{" + " ".join(m) + "}" for m in members.values()]

