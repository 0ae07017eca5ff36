"""One word in several sentences: how similar ELMo's vectors of its uses are, in each biLM layer and in the mix.

Layer 0 (the char CNN) sees only the word's spelling, so all its uses score 1; layers 1 and 2 and their mix (the
ELMo vectors, `last_hidden_state`) see the sentence, so uses in the same sense tend to come out closer.
"""

import re
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import DataError

EXAMPLES = [
    "He sat on the bank of the river and watched the water .",
    "The bank raised the interest on loans .",
    "They fished from the muddy bank of the river .",
    "The bank charged a fee for the transfer .",
]
MIN_LETTERS = 4  # shorter repeated words are mostly function words ("the", "and"), whose sense never changes
# What one request may give (a web page is open to anyone): every limit is checked before any work starts.
MAX_SENTENCES = 200
MAX_WORDS = 10_000
MAX_SENTENCE_WORDS = 500  # the LSTM runs word by word: one long sentence is one long, unsplittable pass
MAX_CHARACTERS = 100_000  # the whole text, so that even splitting it into words is bounded
MAX_USES = 50  # of the word compared: a table and a heatmap of uses x uses
BATCH_WORDS = 1_000  # padded word positions a forward pass: bounds the activations one request holds at once
TIME_BUDGET = 30.0  # seconds of model time a request may take; past that it is refused, not left to block the queue
MIX = "mix"


def occurrences(sentences):
    """word (lower case) -> [(sentence, position)] for the words that occur more than once."""
    found = defaultdict(list)
    for i, sentence in enumerate(sentences):
        for j, word in enumerate(sentence.split()):
            if word.isalpha() and len(word) >= MIN_LETTERS:
                found[word.lower()].append((i, j))
    return {word: places for word, places in found.items() if len(places) > 1}


def most_repeated(sentences):
    """The word the command-line demo shows: the one with the most uses (the longest of those), or None."""
    found = occurrences(sentences)
    return max(found, key=lambda word: (len(found[word]), len(word))) if found else None


LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def check_characters(lines):
    """Refuse, in one line, text (`lines`, one a line) over MAX_CHARACTERS characters, every one counted (blank
    lines and line ends too), or holding a lone surrogate (not Unicode text: nothing can show or encode it)."""
    characters = sum(len(line) for line in lines) + max(len(lines) - 1, 0)
    if characters > MAX_CHARACTERS:
        raise DataError(
            f"{characters:,} characters: the limit is {MAX_CHARACTERS:,} a request (blank lines "
            "included); give less text"
        )
    for number, line in enumerate(lines, 1):
        found = LONE_SURROGATE.search(line)
        if found:
            raise DataError(
                f"line {number} holds a lone surrogate (U+{ord(found.group()):04X}, character "
                f"{found.start() + 1}), which is not Unicode text: remove it"
            )


def check_text(
    sentences, tokenizer, max_sentences=MAX_SENTENCES, max_words=MAX_WORDS, max_sentence_words=MAX_SENTENCE_WORDS
):
    """The words of each of `sentences` as `tokenizer` splits raw text (white space, or its segmenter), refusing in
    one line more text than one request may embed. Characters and sentences are counted first, so that splitting is
    bounded too."""
    check_characters(sentences)
    if len(sentences) > max_sentences:
        raise DataError(f"{len(sentences):,} sentences: the limit is {max_sentences:,} a request; give fewer")
    words = [tokenizer.split_words(s) for s in sentences]
    lengths = [len(w) for w in words]
    if sum(lengths) > max_words:
        raise DataError(f"{sum(lengths):,} words: the limit is {max_words:,} a request; give less text")
    longest = max(lengths, default=0)
    if longest > max_sentence_words:
        raise DataError(
            f"a sentence of {longest:,} words (line {lengths.index(longest) + 1}): the limit is "
            f"{max_sentence_words:,} words a sentence; split it into sentences, one a line"
        )
    return words


def check_word(word, max_characters):
    """Refuse, in one line, a word the model cannot read as one word; returns it stripped."""
    word = word.strip()
    if not word:
        raise DataError("no word given: type the word to compare (e.g. bank)")
    if len(word.split()) > 1:
        raise DataError(f"{word[:60]!r} is several words: give one word (no spaces)")
    if len(word.encode("utf-8")) > max_characters:
        raise DataError(
            f"the word is {len(word):,} characters long: ELMo reads words of up to {max_characters} "
            "bytes (UTF-8); give one word"
        )
    return word


@dataclass
class WordUses:
    """The uses of `word` in `sentences` and, per layer name ("layer 0".., "mix"), their cosine similarities
    [uses, uses] and a 2-D projection [uses, 2] (principal components of the uses' vectors)."""

    word: str
    sentences: list
    places: list  # (sentence index, word index), one a use
    similarities: dict
    projections: dict

    def label(self, use):
        """ "[n] sentence" for use n (0-based), marking the word's position when it occurs twice in a sentence."""
        i, j = self.places[use]
        again = sum(p[0] == i for p in self.places) > 1
        return f"[{use + 1}] {self.sentences[i]}" + (f"  (word {j + 1})" if again else "")


def cosine_matrix(vectors):
    """Cosine similarities [n, n] of the rows of `vectors` [n, d], float64."""
    v = vectors.double()
    v = v / v.norm(dim=1, keepdim=True).clamp(min=1e-12)
    return (v @ v.T).clamp(-1, 1).numpy()


def projection(vectors):
    """The rows of `vectors` [n, d] on their first two principal components, [n, 2] (zeros past the rank)."""
    centred = vectors.double() - vectors.double().mean(dim=0)
    u, s, _ = torch.linalg.svd(centred, full_matrices=False)
    coordinates = (u * s)[:, :2].numpy()
    return np.pad(coordinates, ((0, 0), (0, 2 - coordinates.shape[1])))


def word_uses(embedder, sentences, word):
    """Embed `sentences` with `embedder` (an ElmoEmbedder; split into words by its tokenizer) and compare the uses of
    `word` (case ignored) in every layer. Raises DataError when the text is empty or too long, or the word is unusable
    or has fewer than two uses."""
    check_characters(sentences)  # before blank lines are dropped: they count too
    sentences = [s.strip() for s in sentences if s.strip()]
    if not sentences:
        raise DataError("no sentences given: type sentences that use the word, one a line")
    words = check_text(sentences, embedder.tokenizer)
    word = check_word(word, embedder.model.config.max_characters_per_token - 2)
    places = [(i, j) for i, s in enumerate(words) for j, w in enumerate(s) if w.lower() == word.lower()]
    if len(places) < 2:
        where = "in no sentence" if not places else "only once"
        raise DataError(
            f"{word!r} occurs {where}: give at least two sentences that use it (as a word of its own, "
            "white space around it)"
        )
    if len(places) > MAX_USES:
        raise DataError(
            f"{word!r} occurs {len(places):,} times: the limit is {MAX_USES} uses a request; give fewer sentences"
        )
    uses = use_vectors(embedder, words, places)
    return WordUses(
        word,
        sentences,
        places,
        {name: cosine_matrix(v) for name, v in uses.items()},
        {name: projection(v) for name, v in uses.items()},
    )


def use_vectors(embedder, words, places, batch_words=BATCH_WORDS, time_budget=TIME_BUDGET):
    """{layer name: [uses, dim] float32} at `places` of the sentences `words` (each a list of words). ELMo reads
    each sentence alone, so only the sentences holding a use are run, shortest first, in batches of at most
    `batch_words` padded positions (a sentence longer than that alone), and only the uses' vectors are kept: one
    request holds a bounded amount of memory. A request still running after `time_budget` seconds is refused
    (DataError) between batches."""
    start = time.monotonic()
    needed = sorted({i for i, _ in places}, key=lambda i: len(words[i]))
    batches, batch = [], []
    for i in needed:
        if batch and len(words[i]) * (len(batch) + 1) > batch_words:
            batches.append(batch)
            batch = []
        batch.append(i)
    batches.append(batch)
    found = {}  # (sentence, word) -> {layer name: vector}
    for batch in batches:
        if time.monotonic() - start >= time_budget:
            raise DataError(
                f"the request ran past its time budget ({time_budget:.0f} s on this machine): give "
                "fewer or shorter sentences that use the word"
            )
        out = embedder.forward(embedder.encode([words[i] for i in batch]))
        layers = {f"layer {n}": states for n, states in enumerate(out.hidden_states)}
        layers[MIX] = out.last_hidden_state
        for row, i in enumerate(batch):
            for sentence, j in places:
                if sentence == i:
                    found[i, j] = {name: states[row, j].float() for name, states in layers.items()}
        del out, layers  # before the next batch runs
    return {name: torch.stack([found[place][name] for place in places]) for name in found[places[0]]}


def sense_groups(similarities):
    """Join each use to its most similar use; the connected groups, as strings like "{[1] [3]}"."""
    n = len(similarities)
    group = list(range(n))

    def root(i):
        while group[i] != i:
            i = group[i]
        return i

    for i in range(n):
        nearest = max((j for j in range(n) if j != i), key=lambda j: similarities[i][j])
        group[root(i)] = root(nearest)
    members = defaultdict(list)
    for i in range(n):
        members[root(i)].append(f"[{i + 1}]")
    return ["{" + " ".join(m) + "}" for m in members.values()]
