"""The evaluation helpers against hand-computed values."""

import math

import pytest
from evaluate_word_sense import best_threshold, roc_auc, threshold_accuracy
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


def test_conllu_to_conll_keeps_syntactic_words_with_upos():
    from conllu_to_conll import sentences

    conllu = """# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tit\tit\tPRON\tPRP\t_\t_\t_\t_\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_
""".splitlines(keepends=True)
    assert list(sentences(conllu)) == [
        [("I", "PRON"), ("do", "AUX"), ("n't", "PART"), ("know", "VERB"), (".", "PUNCT")],
        [("Yes", "INTJ")],
    ]
    with pytest.raises(ValueError, match="10 tab-separated"):
        list(sentences(["1 I I PRON\n"]))


def test_prepare_modern_corpus_keeps_prose_and_drops_markup_and_code():
    from prepare_modern_corpus import b64_number, pod_text, prose, rst

    assert prose("Call the  function\twhen ready") == "Call the function when ready"
    assert prose("x = f(a[1], b[2]); y += 3;") is None  # mostly not words
    assert prose("Hi there") is None  # too short
    page = """Title
=====

See :ref:`the guide <guide>` and ``make`` first.
An example::

    $ make -j4

.. note::
   Hidden directive body.

- A bullet item.
"""
    assert list(rst(page)) == ["See the guide and make first. An example:", "A bullet item."]
    assert (
        pod_text("Use C<print> and L<the open function|perlfunc/open> E<lt>here E<gt>")
        == "Use print and the open function <here >"
    )
    assert b64_number("B") == 1 and b64_number("BA") == 64  # dictd index numbers


def test_threshold_accuracy_chooses_each_threshold_on_the_other_lemmas():
    # Two folds, one lemma each: a's pairs are right with "above 0.3", b's with "above 0.1".
    scores, labels, lemmas = [0.1, 0.3, 0.6, 0.9, 0.1, 0.3, 0.6, 0.9], [0, 0, 1, 1, 0, 1, 1, 1], ["a"] * 4 + ["b"] * 4
    # b's threshold 0.1 gets 3 of a's 4 pairs (0.3 is called same sense); a's 0.3 gets 3 of b's (0.3 is missed).
    assert threshold_accuracy(scores, labels, lemmas, folds=2) == 6 / 8
    assert threshold_accuracy(scores[:4] * 2, labels[:4] * 2, ["a"] * 4 + ["c"] * 4, folds=2) == 1.0
    assert best_threshold(scores, labels) == (0.1, 7 / 8)  # the oracle: chosen on the pairs it scores


def test_compare_models_tables_come_from_the_evaluation_files(tmp_path, capsys):
    import json

    from compare_models import main as compare

    for name, auc, hits in (("old", 0.59, 1), ("new", 0.61, 2)):
        folder = tmp_path / name
        (folder / "pos-ewt-mix").mkdir(parents=True)
        (folder / "word_sense.json").write_text(
            json.dumps({"roc_auc": {"ELMo mix": auc}, "accuracy": {"ELMo mix": auc - 0.02}})
        )
        (folder / "pos-ewt-mix" / "all_results.json").write_text(json.dumps({"test_accuracy": auc + 0.3}))
        results = [{"sentence": "a <mask> .", "top": ["b", "c"], "hit": True}] * hits
        (folder / "fill_mask.json").write_text(json.dumps({"top_k": 10, "hits": hits, "results": results}))
    compare([str(tmp_path / "old"), str(tmp_path / "new"), "--names", "old", "new"])
    out = capsys.readouterr().out
    assert "| new | ELMo mix | 0.610 | 59.0 % | - |" in out and "| old | EWT UPOS, test accuracy | 89.0 % | - |" in out
    assert "| new | 2 / 2 |" in out and "| a <mask> . | b, c | b, c |" in out
