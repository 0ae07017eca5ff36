"""The demo's pictures tell what the numbers say: the heatmap's colour scale spans the values shown, its tick labels
stay apart at 50 uses, the projection's legend names every sentence or none, and a word outside the vocabulary has
no colour of the log-probability scale."""

import numpy as np
from matplotlib.colors import to_rgba

from elmo_transformers.demo import plots
from elmo_transformers.demo.language_model import WordScores
from elmo_transformers.demo.senses import MAX_USES, WordUses, cosine_matrix, projection


def word_uses(n, sentences):
    """`n` uses of "bank" spread over `sentences` sentences, with random vectors (the numbers do not matter here)."""
    import torch

    vectors = torch.randn(n, 16, generator=torch.Generator().manual_seed(0)) + 3.0  # cosines around 0.9
    places = [(use % sentences, use // sentences) for use in range(n)]
    text = [f"Sentence {i} about the bank ." for i in range(sentences)]
    return WordUses("bank", text, places, {"mix": cosine_matrix(vectors)}, {"mix": projection(vectors)})


def test_the_heatmap_scale_follows_the_values_and_its_ticks_stay_readable():
    uses = word_uses(MAX_USES, 10)
    figure = plots.similarity_heatmap(uses, "mix")
    axes = figure.axes[0]
    low, high = axes.images[0].get_clim()
    assert (low, high) == (uses.similarities["mix"].min(), 1.0) and low > 0.5  # not 0 to 1
    assert "this layer's range" in figure.axes[1].get_ylabel()
    labels = [t.get_text() for t in axes.get_xticklabels()]
    assert 10 <= len(labels) <= plots.TICKS_UP_TO and labels[0] == "[1]"
    figure.canvas.draw()
    boxes = [t.get_window_extent() for t in axes.get_yticklabels()]
    assert all(a.y0 >= b.y1 or b.y0 >= a.y1 for a, b in zip(boxes, boxes[1:]))  # no two labels overlap


def test_the_legend_names_every_sentence_or_none():
    few = plots.projection_scatter(word_uses(12, 6), "mix").axes[0].get_legend()
    assert few is not None and len(few.get_texts()) == 6
    assert plots.projection_scatter(word_uses(MAX_USES, 25), "mix").axes[0].get_legend() is None


def test_an_unknown_word_has_no_colour_of_the_scale():
    scores = WordScores(
        ["I", "zxqvbn", "."], [-3.0, None, -1.0], [-2.0, None, -0.5], [-2.5, None, -0.75], [False, True, False]
    )
    figure = plots.word_score_rows(scores)
    image = figure.axes[0].images[0]
    rgba = image.to_rgba(image.get_array())
    assert np.allclose(rgba[:, 1], to_rgba(plots.UNKNOWN)) and not np.allclose(rgba[:, 0], to_rgba(plots.UNKNOWN))
    assert sum(t.get_text() == "unknown" for t in figure.axes[0].texts) == 3  # forward, backward, mean


def test_the_surprise_picture_is_whole():
    """Every label lies inside the picture (the colour bar's and the grey words' note too, none cut), and a text of n
    words has n columns, none empty."""
    for n in (1, 9, 10, 16):
        words = [f"w{i}" for i in range(n)]
        scores = WordScores(words, [-3.0 - i for i in range(n)], [-2.0] * n, [-2.5] * n, [False] * n)
        figure = plots.word_score_rows(scores)
        figure.canvas.draw()
        inside = figure.bbox.padded(0.5)  # half a pixel: rounding
        texts = [figure.axes[-1].yaxis.label, figure._supxlabel]
        texts += [t for axes in figure.axes for t in (*axes.get_xticklabels(), *axes.get_yticklabels())]
        for text in texts:
            box = text.get_window_extent()
            assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1, (
                n,
                text.get_text(),
            )
        assert figure.axes[-1].get_ylabel() == "log P(word)"
        assert "grey" in figure._supxlabel.get_text()
        panels = figure.axes[:-1]
        assert sum(len(axes.images[0].get_array()[0]) for axes in panels) == n
        for axes in panels:  # every column of a panel is a word: its x range is its image's
            left, right = axes.images[0].get_extent()[:2]
            assert axes.get_xlim() == (left, right)
