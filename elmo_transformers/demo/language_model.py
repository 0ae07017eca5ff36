"""What a biLM language model says about a text: the words it would put at a `<mask>` (the fill-mask pipeline) and
how expected each word is, forward (from its left), backward (from its right) and the mean of the two."""

from dataclasses import dataclass

import torch

from ..errors import DataError
from .senses import check_text

TOP_WORDS = 10
MAX_TEXT_WORDS = 1_000  # one text a request; the softmax scores every word of the vocabulary at each position
SCORED_ROWS = 64  # positions whose vocabulary-sized log-probabilities are held at once


def text_words(text, tokenizer, max_words=MAX_TEXT_WORDS):
    """The words of `text` (as `tokenizer` splits raw text), refusing an empty or too long text in one line."""
    [words] = check_text([text], tokenizer, max_words=max_words, max_sentence_words=max_words)
    if not words:
        raise DataError("no text given: type a sentence")
    return words


def fill_mask(fill, text, top_k=TOP_WORDS):
    """[(word, probability)] of the fill-mask pipeline `fill` for `text`, best first: the pipeline's own numbers."""
    mask = fill.tokenizer.mask_token
    count = text_words(text, fill.tokenizer).count(mask)
    if count != 1:
        raise DataError(f"the text has {count} {mask} words: put exactly one {mask}, as a word of its own, where a "
                        "word should be guessed")
    return [(r["token_str"], r["score"]) for r in fill(text, top_k=top_k)]


@dataclass
class WordScores:
    """Per word of the text: log P(word) given the words before it (`forward`), given the words after it
    (`backward`), and their `mean`; natural logarithms. A word outside the vocabulary has None in all three: the
    softmax scores only `<UNK>` for it, which says how likely some unknown word is, not how expected this one is."""

    words: list
    forward: list
    backward: list
    mean: list
    unknown: list  # True where the word is not in the vocabulary


def word_scores(lm, tokenizer, text):
    """The log-probabilities of each word of `text` under the forward and backward LMs of `lm`
    (`ElmoForLanguageModeling`)."""
    words = text_words(text, tokenizer)
    # A word the softmax has no row of its own for is unknown: one outside the vocabulary (its id is <UNK>'s) and
    # the tokenizer's added words (`<mask>`, whose id is past the softmax); it is looked up as <UNK>, never shown.
    unk, rows = tokenizer.unk_token_id, lm.config.lm_vocab_size
    found = tokenizer.convert_tokens_to_ids(words)
    unknown = [i >= rows or (i == unk and w != tokenizer.unk_token) for w, i in zip(words, found)]
    ids = torch.tensor([unk if u else i for i, u in zip(found, unknown)])
    forward, backward = [], []
    with torch.no_grad():
        encoding = tokenizer([words], is_split_into_words=True, return_tensors="pt")
        forward_states, backward_states, _ = lm.lm_states(encoding["input_ids"], encoding["attention_mask"])
        for positions in torch.arange(len(words)).split(SCORED_ROWS):
            # Forward state j (after <S>, w_0 .. w_{j-1}) and backward state j + 1 (before w_{j+1} .. </S>) predict
            # w_j.
            rows = torch.arange(len(positions))
            forward += lm.lm_log_probs(forward_states[0, positions])[rows, ids[positions]].tolist()
            backward += lm.lm_log_probs(backward_states[0, positions + 1])[rows, ids[positions]].tolist()
    known = [not u for u in unknown]
    return WordScores(words, [f if k else None for f, k in zip(forward, known)],
                      [b if k else None for b, k in zip(backward, known)],
                      [(f + b) / 2 if k else None for f, b, k in zip(forward, backward, known)], unknown)
