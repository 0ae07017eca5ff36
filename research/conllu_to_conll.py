#!/usr/bin/env python
"""Universal Dependencies .conllu -> the CoNLL `token<TAB>tag` files `elmo-transformers finetune token-classification`
reads (a blank line between sentences), with the UPOS tag of each syntactic word.

    python research/conllu_to_conll.py UD_English-EWT/en_ewt-ud-train.conllu ud-ewt/train.conll

Multi-word token lines (`3-4 don't`) are left out and their words (`do`, `n't`) kept, as UD's POS scores count words;
empty nodes (`8.1`) carry no UPOS and are left out too.
"""

import argparse


def sentences(lines):
    """(form, upos) lists of the sentences of a .conllu file."""
    words = []
    for line in lines:
        line = line.rstrip("\n")
        if not line:
            if words:
                yield words
            words = []
        elif not line.startswith("#"):
            columns = line.split("\t")
            if len(columns) != 10:
                raise ValueError(f"not a CoNLL-U word line (10 tab-separated columns): {line!r}")
            if columns[0].isdigit():
                words.append((columns[1], columns[3]))
    if words:
        yield words


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="a .conllu file")
    parser.add_argument("output", help="the CoNLL file to write (token<TAB>UPOS)")
    args = parser.parse_args(argv)
    n_sentences = n_words = 0
    with open(args.input, encoding="utf-8") as source, open(args.output, "x", encoding="utf-8") as target:
        for words in sentences(source):
            target.writelines(f"{form}\t{upos}\n" for form, upos in words)
            target.write("\n")
            n_sentences += 1
            n_words += len(words)
    print(f"{args.input}: {n_sentences:,} sentences, {n_words:,} words -> {args.output}")


if __name__ == "__main__":
    main()
