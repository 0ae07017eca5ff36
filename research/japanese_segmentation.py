"""Which Japanese segmenter matches UD Japanese's words: the word-boundary F1 of each of ElmoTokenizer's Japanese
segmenters against the FORM column of a UD Japanese treebank (ELMoForManyLangs' Japanese model was trained on text
segmented the UD way: the CoNLL 2018 shared task's raw text, run through UDPipe trained on UD Japanese).

    .venv/bin/python research/japanese_segmentation.py ja_gsd-ud-test.conllu [SENTENCES]

A word counts as found when a segmenter gives exactly its character span of the sentence's `# text`.
"""

import sys

from tokenization_elmo import ElmoTokenizer


def read_conllu(path, limit):
    """[(text, [(start, end) of each word])] of the first `limit` sentences."""
    sentences, text, forms = [], None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# text = "):
                text = line[len("# text = "):]
            elif line and line[0].isdigit():
                columns = line.split("\t")
                if "-" not in columns[0] and "." not in columns[0]:
                    forms.append(columns[1])
            elif not line and text is not None:
                spans, position = [], 0
                for form in forms:
                    start = text.index(form, position)
                    spans.append((start, start + len(form)))
                    position = start + len(form)
                sentences.append((text, spans))
                text, forms = None, []
                if len(sentences) == limit:
                    break
    return sentences


def f1(gold, found):
    hits = sum(len(set(g) & set(f)) for g, f in zip(gold, found))
    precision, recall = hits / sum(map(len, found)), hits / sum(map(len, gold))
    return 2 * precision * recall / (precision + recall), precision, recall


def main(path, limit=500):
    sentences = read_conllu(path, int(limit))
    gold = [spans for _, spans in sentences]
    print(f"{len(sentences)} sentences, {sum(map(len, gold))} words of {path}")
    for name in ("fugashi", "sudachipy"):
        tokenizer = ElmoTokenizer(segmenter=name)
        found = [tokenizer.segment(text)[1] for text, _ in sentences]
        score, precision, recall = f1(gold, found)
        print(f"{name:10s} F1 {score:.4f} (precision {precision:.4f}, recall {recall:.4f})")


if __name__ == "__main__":
    main(*sys.argv[1:])
