"""The evaluation helpers against hand-computed values."""

import math

import pytest
from evaluate_word_sense import roc_auc
from ngram_baselines import baseline_perplexities


def test_roc_auc_hand_computed():
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75  # the classic example
    assert roc_auc([1, 2, 3], [0, 1, 1]) == 1.0 and roc_auc([3, 2, 1], [0, 1, 1]) == 0.0
    assert roc_auc([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1]) == 0.5  # ties count half
    with pytest.raises(ValueError, match="both labels"):
        roc_auc([0.1, 0.2], [1, 1])


def test_ngram_baselines_hand_computed():
    vocab = {"<S>": 0, "</S>": 1, "<UNK>": 2, "a": 3, "b": 4}
    train = [["a", "b"], ["a"]]
    figures = baseline_perplexities(train, [["a", "zzz"]], vocab)
    # Forward targets in training: a b </S> a </S> (5 tokens). Unigram add-one over 5 words:
    # P(a) = 3/10, P(</S>) = 3/10, P(<UNK>) = 1/10. Evaluation targets: a, <UNK>, </S>.
    uni = (3 / 10) * (1 / 10) * (3 / 10)
    assert figures["unigram"]["forward_perplexity"] == pytest.approx(uni ** (-1 / 3))
    # Bigram, forward: contexts <S>(2: ->a x2), a(2: ->b, ->a... no: a->b, a-></S>), b(1: b-></S>).
    # P(a|<S>) = (2 - .75)/2 + .75 * 1/2 * 3/10; P(<UNK>|a) = 0 + .75 * 2/2 * 1/10; P(</S>|<UNK>) = unigram 3/10.
    p = ((2 - 0.75) / 2 + 0.75 * 0.5 * 0.3) * (0.75 * 1.0 * 0.1) * 0.3
    assert figures["bigram"]["forward_perplexity"] == pytest.approx(p ** (-1 / 3))
    f, b = figures["bigram"]["forward_perplexity"], figures["bigram"]["backward_perplexity"]
    assert figures["bigram"]["perplexity"] == pytest.approx((f + b) / 2) and math.isfinite(b)


def test_prepare_corpus_splits_words_and_sentences():
    from prepare_corpus import sentences

    paragraph = 'He said: "It\'s 4,096 lines!" Then, at 3.14, he left. Well-known co-op? Yes.'
    assert list(sentences(paragraph)) == [
        ["He", "said", ":", '"', "It's", "4,096", "lines", "!", '"'],
        ["Then", ",", "at", "3.14", ",", "he", "left", "."],
        ["Well-known", "co-op", "?"],
        ["Yes", "."],
    ]
    assert list(sentences("no final stop")) == [["no", "final", "stop"]]
    assert list(sentences("Mr. Smith")) == [["Mr", "."], ["Smith"]]  # the documented simple rule: no abbreviations
    assert list(sentences("   ")) == []
