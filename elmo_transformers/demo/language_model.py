"""What a biLM language model says about a text: the words it would put at a `<mask>` (LAMA's rule, as the fill-mask
pipeline gives them) and how expected each word is, forward (from its left), backward (from its right) and the mean of
the two. The model is `bilm_elmo.ElmoLanguageModelCore` with its `ElmoBasicTokenizer`."""

from dataclasses import dataclass

import torch

from basic_tokenization_elmo import BOS_WORD, EOS_WORD, UNK_WORD

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


def fill_mask(lm, tokenizer, text, top_k=TOP_WORDS):
    """[(word, probability)] for the one mask of `text`, best first: the numbers of the fill-mask pipeline
    (`ElmoLanguageModelMixin.masked_word_scores` and `best_words`; `<S>`, `</S>` and `<UNK>` never given)."""
    mask = tokenizer.mask_token
    words = text_words(text, tokenizer)
    if words.count(mask) != 1:
        raise DataError(
            f"the text has {words.count(mask)} {mask} words: put exactly one {mask}, as a word of its own, "
            "where a word should be guessed"
        )
    encoding = {name: torch.from_numpy(array) for name, array in tokenizer.encode([words]).items()}
    with torch.no_grad():
        scores = lm.masked_word_scores(**encoding, positions=words.index(mask))[0]
    specials = [tokenizer.word_id(word) for word in (BOS_WORD, EOS_WORD, UNK_WORD)]
    return [(tokenizer.words[i], p) for i, p in lm.best_words(scores, top_k, specials)]


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
    unk, rows = tokenizer.word_id(UNK_WORD), lm.config.lm_vocab_size
    found = [tokenizer.word_id(word) for word in words]
    unknown = [i >= rows or (i == unk and w != UNK_WORD) for w, i in zip(words, found)]
    ids = torch.tensor([unk if u else i for i, u in zip(found, unknown)])
    forward, backward = [], []
    with torch.no_grad():
        encoding = {name: torch.from_numpy(array) for name, array in tokenizer.encode([words]).items()}
        forward_states, backward_states, _ = lm.lm_states(encoding["input_ids"], encoding["attention_mask"])
        for positions in torch.arange(len(words)).split(SCORED_ROWS):
            # Forward state j (after <S>, w_0 .. w_{j-1}) and backward state j + 1 (before w_{j+1} .. </S>) predict
            # w_j.
            rows = torch.arange(len(positions))
            forward += lm.lm_log_probs(forward_states[0, positions])[rows, ids[positions]].tolist()
            backward += lm.lm_log_probs(backward_states[0, positions + 1])[rows, ids[positions]].tolist()
    known = [not u for u in unknown]
    return WordScores(
        words,
        [f if k else None for f, k in zip(forward, known)],
        [b if k else None for b, k in zip(backward, known)],
        [(f + b) / 2 if k else None for f, b, k in zip(forward, backward, known)],
        unknown,
    )
