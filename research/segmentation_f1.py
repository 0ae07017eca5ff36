"""Which segmenter matches UD's words: the word-boundary F1 of ElmoTokenizer's segmenters against the FORM column of a
UD treebank (ELMoForManyLangs' models were trained on text segmented the UD way: the CoNLL 2018 shared task's raw
text, run through UDPipe trained on the UD treebanks).

    .venv/bin/python research/segmentation_f1.py ja_gsd-ud-test.conllu [SENTENCES] [SEGMENTER,...]

(default: all sentences (0), the Japanese segmenters fugashi and sudachipy; jieba for Chinese treebanks.)
Measured on the test sets: UD_Japanese-GSD (7bc2011, 543 sentences) fugashi 0.991, sudachipy 0.981;
UD_Chinese-GSDSimp (eb3aed3, 500 sentences) jieba 0.799; UD_Chinese-GSD (traditional, 200dbe8) jieba 0.745.

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
                text = line[len("# text = ") :]
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


def main(path, limit=0, segmenters="fugashi,sudachipy"):
    sentences = read_conllu(path, int(limit))
    gold = [spans for _, spans in sentences]
    print(f"{len(sentences)} sentences, {sum(map(len, gold))} words of {path}")
    for name in segmenters.split(","):
        tokenizer = ElmoTokenizer(segmenter=name)
        found = [tokenizer.segment(text)[1] for text, _ in sentences]
        score, precision, recall = f1(gold, found)
        print(f"{name:10s} F1 {score:.4f} (precision {precision:.4f}, recall {recall:.4f})")


if __name__ == "__main__":
    main(*sys.argv[1:])
