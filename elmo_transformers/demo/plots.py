"""The demo's pictures, drawn with matplotlib (a `Figure` each, no pyplot state, so requests may draw at once)."""

import textwrap

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

ANNOTATE_UP_TO = 12  # uses; past that the heatmap's cells are too small for their numbers


def similarity_heatmap(uses, layer):
    """The cosine similarities of the word's uses in `layer` ("layer 0" .., "mix"), a cell a pair."""
    matrix = uses.similarities[layer]
    n = len(matrix)
    figure = Figure(figsize=(5.2, 4.4), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(matrix, vmin=min(0.0, float(matrix.min())), vmax=1.0, cmap="viridis")
    figure.colorbar(image, ax=axes, shrink=0.8, label="cosine similarity")
    labels = [f"[{i + 1}]" for i in range(n)]
    axes.set_xticks(range(n), labels)
    axes.set_yticks(range(n), labels)
    if n <= ANNOTATE_UP_TO:
        for i in range(n):
            for j in range(n):
                axes.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=8,
                          color="black" if matrix[i, j] > 0.6 else "white")
    axes.set_title(f'"{uses.word}" in {layer}')
    return figure


def projection_scatter(uses, layer):
    """The uses on the first two principal components of their vectors in `layer`, coloured by sentence."""
    points = uses.projections[layer]
    figure = Figure(figsize=(5.2, 4.4), layout="constrained")
    axes = figure.add_subplot()
    sentences = sorted({i for i, _ in uses.places})
    for k, i in enumerate(sentences):
        mine = [use for use, (s, _) in enumerate(uses.places) if s == i]
        colour = _colour(k)
        label = textwrap.shorten(uses.sentences[i], 40, placeholder="...") if k < 10 else None
        axes.scatter(points[mine, 0], points[mine, 1], s=60, color=colour, label=label)
        for use in mine:
            axes.annotate(f"[{use + 1}]", points[use], textcoords="offset points", xytext=(5, 5), fontsize=8)
    axes.set_xlabel("principal component 1")
    axes.set_ylabel("principal component 2")
    axes.set_title(f'uses of "{uses.word}" in {layer}, 2-D (principal components)')
    axes.legend(fontsize=7, loc="best")
    return figure


def _colour(k):
    return colormaps["tab10"](k % 10)


def probability_bars(words_and_probabilities):
    """A horizontal bar a word, best at the top."""
    words = [w for w, _ in words_and_probabilities]
    values = [p for _, p in words_and_probabilities]
    figure = Figure(figsize=(5.2, 0.35 * len(words) + 1.0), layout="constrained")
    axes = figure.add_subplot()
    axes.barh(range(len(words)), values, color=_colour(0))
    axes.set_yticks(range(len(words)), words)
    axes.invert_yaxis()
    axes.set_xlabel("probability (fill-mask: mean of the forward and backward LMs)")
    return figure


def word_score_rows(scores, words_a_row=10):
    """Each word coloured by its log-probability, forward, backward and mean (rows), `words_a_row` words a panel."""
    table = np.array([scores.forward, scores.backward, scores.mean])
    low, high = float(table.min()), float(table.max())
    panels = max(1, -(-len(scores.words) // words_a_row))
    figure = Figure(figsize=(11, 1.5 * panels + 0.6), layout="constrained")
    axes_list = np.atleast_1d(figure.subplots(panels, 1))
    image = None
    for p, axes in enumerate(axes_list):
        part = slice(p * words_a_row, (p + 1) * words_a_row)
        values = table[:, part]
        image = axes.imshow(values, vmin=low, vmax=high, cmap="RdYlGn", aspect="auto")
        for (i, j), value in np.ndenumerate(values):
            axes.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=8)
        words = [textwrap.shorten(w, 14, placeholder="...") + ("*" if unknown else "")
                 for w, unknown in zip(scores.words[part], scores.unknown[part])]
        axes.set_xticks(range(len(words)), words, fontsize=9)
        axes.set_yticks(range(3), ["forward", "backward", "mean"], fontsize=8)
        axes.set_xlim(-0.5, words_a_row - 0.5)
    figure.colorbar(image, ax=list(axes_list), shrink=0.9, label="log P(word)")
    return figure
