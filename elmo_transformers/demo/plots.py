"""The demo's pictures, drawn with matplotlib (a `Figure` each, no pyplot state, so requests may draw at once)."""

import textwrap

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

ANNOTATE_UP_TO = 12  # uses; past that the heatmap's cells are too small for their numbers
TICKS_UP_TO = 20  # tick labels on a heatmap axis; past that every k-th use is labelled
LEGEND_UP_TO = 10  # sentences; past that the legend is left out (the page lists the uses) rather than cut
UNKNOWN = "lightgrey"  # a word outside the vocabulary: no colour of the scale


def literal(text):
    """`text` the user typed, shown as it is: matplotlib would read `$...$` as math (and fail on a lone `$`)."""
    return text.replace("$", r"\$")


def similarity_heatmap(uses, layer):
    """The cosine similarities of the word's uses in `layer` ("layer 0" .., "mix"), a cell a pair. The colour scale
    runs from the lowest value shown to 1 (the diagonal), so that the differences between uses are visible; its
    label says so, since the scale differs from layer to layer."""
    matrix = uses.similarities[layer]
    n = len(matrix)
    figure = Figure(figsize=(5.2, 4.4), layout="constrained")
    axes = figure.add_subplot()
    low = min(float(matrix.min()), 0.99)  # layer 0: every value is 1
    image = axes.imshow(matrix, vmin=low, vmax=1.0, cmap="viridis")
    figure.colorbar(image, ax=axes, shrink=0.8, label=f"cosine similarity (scale: {low:.2f} to 1, this layer's range)")
    step = -(-n // TICKS_UP_TO)
    ticks = range(0, n, step)
    labels = [f"[{i + 1}]" for i in ticks]
    axes.set_xticks(ticks, labels, fontsize=8 if step == 1 else 7, rotation=90 if n > ANNOTATE_UP_TO else 0)
    axes.set_yticks(ticks, labels, fontsize=8 if step == 1 else 7)
    if n <= ANNOTATE_UP_TO:
        for i in range(n):
            for j in range(n):
                axes.text(
                    j,
                    i,
                    f"{matrix[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if matrix[i, j] > 0.6 else "white",
                )
    axes.set_title(f'"{literal(uses.word)}" in {layer}')
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
        label = literal(textwrap.shorten(uses.sentences[i], 40, placeholder="..."))
        axes.scatter(points[mine, 0], points[mine, 1], s=60, color=colour, label=label)
        for use in mine:
            axes.annotate(f"[{use + 1}]", points[use], textcoords="offset points", xytext=(5, 5), fontsize=8)
    axes.set_xlabel("principal component 1")
    axes.set_ylabel("principal component 2")
    axes.set_title(f'uses of "{literal(uses.word)}" in {layer}, 2-D (principal components)')
    if len(sentences) <= LEGEND_UP_TO:  # a legend names every sentence or is left out: never some of them
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
    axes.set_yticks(range(len(words)), [literal(w) for w in words])
    axes.invert_yaxis()
    axes.set_xlabel("probability (fill-mask: mean of the forward and backward LMs)")
    return figure


def word_score_rows(scores, words_a_row=10):
    """Each word coloured by its log-probability, forward, backward and mean (rows), `words_a_row` words a panel; a
    word outside the vocabulary is grey and marked "unknown" (it has no score). A panel is as wide as its words (the
    last one too: no empty column), and what grey means is said under the panels (a colour-bar label that long
    would be cut)."""
    table = np.array([scores.forward, scores.backward, scores.mean], dtype=float)  # None: NaN
    known = table[~np.isnan(table)]
    low, high = (float(known.min()), float(known.max())) if known.size else (-1.0, 0.0)
    colours = colormaps["RdYlGn"].with_extremes(bad=UNKNOWN)
    n = len(scores.words)
    columns = max(1, min(words_a_row, n))
    panels = max(1, -(-n // words_a_row))
    figure = Figure(figsize=(11, 1.5 * panels + 0.8), layout="constrained")
    grid = figure.add_gridspec(panels, columns)
    axes_list, image = [], None
    for p in range(panels):
        part = slice(p * words_a_row, (p + 1) * words_a_row)
        values = table[:, part]
        axes = figure.add_subplot(grid[p, : max(1, values.shape[1])])
        axes_list.append(axes)
        image = axes.imshow(values, vmin=low, vmax=high, cmap=colours, aspect="auto")
        for (i, j), value in np.ndenumerate(values):
            axes.text(j, i, "unknown" if np.isnan(value) else f"{value:.1f}", ha="center", va="center", fontsize=8)
        words = [
            literal(textwrap.shorten(w, 14, placeholder="...")) + ("*" if unknown else "")
            for w, unknown in zip(scores.words[part], scores.unknown[part])
        ]
        axes.set_xticks(range(len(words)), words, fontsize=9)
        axes.set_yticks(range(3), ["forward", "backward", "mean"], fontsize=8)
    figure.colorbar(image, ax=axes_list, shrink=0.9, label="log P(word)")
    figure.supxlabel("grey, *: not in the vocabulary (no score)", fontsize=9)
    return figure
