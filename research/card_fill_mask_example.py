#!/usr/bin/env python
"""The fill-mask example of the shipped model's card (elmo_transformers/models/elmo-en-small/README.md): the top
words and scores the fill-mask pipeline gives for its sentence, as the card quotes them.

    python research/card_fill_mask_example.py

prints `find 0.120, get 0.091, check 0.040, ...`; tests/test_default_model.py reruns it against the card's figures.
"""

from transformers import pipeline

from elmo_transformers import DEFAULT_MODEL, ElmoFillMaskPipeline

SENTENCE = "I need to <mask> my password ."
SHOWN = 3  # words the card quotes


def top_words(model=DEFAULT_MODEL):
    """[(word, score)] of the SHOWN best fills of SENTENCE."""
    fill = pipeline("fill-mask", model=str(model), pipeline_class=ElmoFillMaskPipeline)
    return [(r["token_str"], r["score"]) for r in fill(SENTENCE, top_k=SHOWN)]


def quoted(words):
    """The words as the card writes them."""
    return ", ".join(f"{word} {score:.3f}" for word, score in words) + ", ..."


if __name__ == "__main__":
    print(quoted(top_words()))
