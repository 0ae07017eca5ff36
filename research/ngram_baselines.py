"""Smoothed unigram and bigram language models: the baselines a biLM's perplexity is read against.

They predict exactly what `ElmoForLanguageModeling` predicts, in both directions: for a sentence w_0 .. w_{n-1},
the forward model scores w_0 .. w_{n-1}, </S> (each from the previous word, <S> first) and the backward model
scores w_{n-1} .. w_0, <S> (each from the next word, </S> first); words outside the vocabulary count as <UNK>.

- unigram: add-one (Laplace) estimate over the vocabulary;
- bigram: interpolated absolute discounting (discount 0.75) backing off to that unigram.
"""

import collections
import math

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"
DISCOUNT = 0.75


def _events(sentences, vocab, backward):
    """(context, target) pairs of one direction, words mapped into the vocabulary."""
    for words in sentences:
        ids = [w if w in vocab else UNK for w in words]
        sequence = [BOS, *ids, EOS]
        if backward:
            sequence = sequence[::-1]
        yield from zip(sequence[:-1], sequence[1:])


class BigramModel:
    """Counts of one direction; `log_prob_unigram` and `log_prob_bigram` score a (context, target) pair."""

    def __init__(self, sentences, vocab, backward=False):
        self.vocab_size = len(vocab)
        self.unigrams = collections.Counter()
        self.bigrams = collections.Counter()
        for context, target in _events(sentences, vocab, backward):
            self.unigrams[target] += 1
            self.bigrams[context, target] += 1
        self.total = sum(self.unigrams.values())
        self.context_counts = collections.Counter()
        self.context_types = collections.Counter()
        for (context, _), count in self.bigrams.items():
            self.context_counts[context] += count
            self.context_types[context] += 1

    def log_prob_unigram(self, target):
        return math.log((self.unigrams[target] + 1) / (self.total + self.vocab_size))

    def log_prob_bigram(self, context, target):
        unigram = math.exp(self.log_prob_unigram(target))
        seen = self.context_counts[context]
        if seen == 0:
            return math.log(unigram)
        discounted = max(self.bigrams[context, target] - DISCOUNT, 0.0) / seen
        return math.log(discounted + DISCOUNT * self.context_types[context] / seen * unigram)


def baseline_perplexities(train_sentences, eval_sentences, vocab):
    """{"unigram": {...}, "bigram": {...}}, each with forward, backward and average perplexity (as the biLM's)."""
    results = {name: {} for name in ("unigram", "bigram")}
    for direction, backward in (("forward", False), ("backward", True)):
        model = BigramModel(train_sentences, vocab, backward)
        nll_uni = nll_bi = 0.0
        count = 0
        for context, target in _events(eval_sentences, vocab, backward):
            nll_uni -= model.log_prob_unigram(target)
            nll_bi -= model.log_prob_bigram(context, target)
            count += 1
        results["unigram"][f"{direction}_perplexity"] = math.exp(nll_uni / count)
        results["bigram"][f"{direction}_perplexity"] = math.exp(nll_bi / count)
    for figures in results.values():
        figures["perplexity"] = (figures["forward_perplexity"] + figures["backward_perplexity"]) / 2
    return results
