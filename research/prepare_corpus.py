#!/usr/bin/env python
"""Tokenise a raw text corpus (one paragraph per line) into one sentence per line, words separated by spaces.

    python research/prepare_corpus.py ../shared/data/corpora/public-domain-en/train.txt.gz data/train.txt.gz

ELMo's tokenizer splits on whitespace, so punctuation must be separated first. The word rule is the one the shared
evaluation data (word-sense pairs) was tokenised with: numbers with inner `.,:`, words of letters with inner
apostrophes or hyphens, and every other non-space character as its own token. A sentence ends after `.`, `!` or
`?` (and any closing quotes or brackets that follow), abbreviations included ("Mr ." ends one): a simple, documented
rule. Lines are kept in order; nothing is dropped but whitespace.
"""

import argparse
import gzip
import re

WORD = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+(?:['’\-][^\W\d_]+)*|[^\w\s]|_")
SENTENCE_END = {".", "!", "?"}
CLOSERS = {'"', "'", "”", "’", ")", "]"}


def sentences(paragraph):
    """Tokenised sentences of one paragraph."""
    current = []
    tokens = WORD.findall(paragraph)
    for i, token in enumerate(tokens):
        current.append(token)
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        ended = token in SENTENCE_END or (token in CLOSERS and current[-2:-1] and current[-2] in SENTENCE_END)
        if ended and following not in SENTENCE_END | CLOSERS:
            yield current
            current = []
    if current:
        yield current


def open_text(path, mode):
    return (
        gzip.open(path, mode + "t", encoding="utf-8")
        if str(path).endswith(".gz")
        else open(path, mode, encoding="utf-8")
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="text file, one paragraph per line (.gz allowed)")
    parser.add_argument("output", help="tokenised file, one sentence per line (.gz to compress)")
    args = parser.parse_args(argv)
    n_sentences = n_tokens = 0
    with open_text(args.input, "r") as source, open_text(args.output, "w") as target:
        for line in source:
            for sentence in sentences(line):
                target.write(" ".join(sentence) + "\n")
                n_sentences += 1
                n_tokens += len(sentence)
    print(f"{args.input}: {n_sentences:,} sentences, {n_tokens:,} tokens -> {args.output}")


if __name__ == "__main__":
    main()
