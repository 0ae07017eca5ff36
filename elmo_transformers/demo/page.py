"""The demo as a web page (Gradio): word senses for every ELMo model; fill-mask and each word's log-probability for
language-model folders. Served by `elmo-transformers demo --web` and by `app.py` (a Space).

Every request is checked by the library code it calls (`senses`, `language_model`): what cannot be used (nothing
typed, a word with fewer than two uses, a text over the limits) is a message on the page and the server goes on.
Requests wait in Gradio's queue and run one at a time, so several users share one model without racing.
"""

import re
import textwrap

import gradio as gr

from ..errors import UserError
from ..model_folder import open_model
from . import model as demo_model
from . import plots
from .language_model import MAX_TEXT_WORDS, TOP_WORDS, fill_mask, word_scores
from .senses import EXAMPLES, MAX_SENTENCE_WORDS, MAX_SENTENCES, MAX_WORDS, MIX, check_characters, word_uses

FILL_EXAMPLE = "He sat on the <mask> of the river ."
SCORE_EXAMPLE = "He sat on the bank of the river ."
QUEUE_SIZE = 64  # requests waiting at once; past that a user is told to come back later
# Every event of the page waits in one line and runs alone, in the order the requests came: Gradio gives each listener
# (a button, a text's Enter, the page's load) a line of its own, so an older request of one (the first visit's
# example) could finish after a newer one of another (the user's Compare) and replace its answer.
ONE_QUEUE = "model"

INTRO = """# ELMo: one word, many senses
ELMo (Peters et al., 2018) gives every word a vector computed from its whole sentence. Layer 0 (the char CNN) sees
only the spelling, so every use of a word gets the same vector there; layers 1 and 2 and their mix (the ELMo
vectors) see the sentence, so uses in the same sense tend to come out closer. Model: **{model}**."""


def plain(text):
    """`text` the user typed, as Markdown that shows it as it is: every ASCII punctuation character escaped, so that
    no HTML (`<img>`, `<svg>`), emphasis or link is made from it, and nothing is fetched."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def build(model_name):
    """The page for the model `model_name` (a folder or Hub repo id), loaded once; a model that cannot be used is
    one ModelError line, before anything is served."""
    source = open_model(model_name)
    loaded = demo_model.load(source)
    layers = [f"layer {n}" for n in range(loaded.embedder.model.config.n_layers + 1)] + [MIX]
    segmenter = loaded.tokenizer.segmenter.segmenter
    splitting = "words split on white space" if segmenter == "whitespace" else f"words found by {segmenter}"
    with gr.Blocks(title="ELMo demo", analytics_enabled=False) as page:
        gr.Markdown(INTRO.format(model=plain(source.title)))
        gr.Markdown("## Word senses")
        with gr.Row():
            with gr.Column():
                sentences = gr.Textbox(
                    "\n".join(EXAMPLES),
                    lines=6,
                    elem_id="sentences",
                    label=f"Sentences, one a line, {splitting} (up to {MAX_SENTENCES} sentences, "
                    f"{MAX_WORDS:,} words, {MAX_SENTENCE_WORDS} words a sentence)",
                )
                word = gr.Textbox("bank", max_lines=1, elem_id="word", label="Word")
                compare = gr.Button("Compare", variant="primary", elem_id="compare")
            with gr.Column():
                senses_message = gr.Markdown(elem_id="senses-message")
                table = gr.Dataframe(
                    elem_id="similarity",
                    interactive=False,
                    wrap=True,
                    label="Cosine similarity of the word's ELMo vectors (1 = same direction)",
                )
        layer = gr.Radio(layers, value=MIX, elem_id="layer", label="Layer of the pictures")
        with gr.Row():
            heatmap = gr.Plot(elem_id="similarity-plot", show_label=False)
            projection = gr.Plot(elem_id="projection-plot", show_label=False)
        uses_state = gr.State()

        gr.Markdown("## Fill the `<mask>`")
        if loaded.lm is None:
            gr.Markdown(f"Off: {loaded.no_lm}.", elem_id="fill-off")
        else:
            with gr.Row():
                with gr.Column():
                    fill_text = gr.Textbox(
                        FILL_EXAMPLE,
                        max_lines=3,
                        elem_id="fill-text",
                        label=f"A text with one <mask> word (up to {MAX_TEXT_WORDS:,} words)",
                    )
                    fill = gr.Button("Fill", variant="primary", elem_id="fill")
                    fill_result = gr.Textbox(
                        lines=TOP_WORDS,
                        elem_id="fill-result",
                        interactive=False,
                        label=f"The top {TOP_WORDS} words and their probabilities "
                        "(the fill-mask pipeline: mean of the forward and backward LMs)",
                    )
                fill_plot = gr.Plot(elem_id="fill-plot", show_label=False)

        gr.Markdown("## Surprise: how expected is each word?")
        if loaded.lm is None:
            gr.Markdown(f"Off: {loaded.no_lm}.", elem_id="surprisal-off")
        else:
            with gr.Row():
                score_text = gr.Textbox(
                    SCORE_EXAMPLE,
                    max_lines=3,
                    elem_id="score-text",
                    scale=4,
                    label=f"A text (up to {MAX_TEXT_WORDS:,} words)",
                )
                score = gr.Button("Score", variant="primary", elem_id="score", scale=1)
            surprisal = gr.Plot(
                elem_id="surprisal",
                label="log P(word) from the words before it (forward), after "
                "it (backward), and their mean; red = unexpected, grey = not in the vocabulary "
                "(no score)",
            )
            score_message = gr.Markdown(elem_id="surprisal-message")
            score_table = gr.Dataframe(elem_id="surprisal-table", interactive=False, label="The same numbers")

        def on_compare(text, the_word, the_layer):
            try:
                check_characters([text, the_word])  # before the text is split into lines
                uses = word_uses(loaded.embedder, text.splitlines(), the_word)
            except UserError as e:  # the table hidden (no header left without its rows), the pictures cleared
                return f"**{plain(str(e))}**", gr.Dataframe(None, visible=False), None, None, None
            listed = "\n".join(f"- {plain(uses.label(i))}" for i in range(len(uses.places)))
            return (
                f'"{plain(uses.word)}", {len(uses.places)} uses:\n{listed}',
                similarity_table(uses),
                *draw(uses, the_layer),
                uses,
            )

        def draw(uses, the_layer):
            if uses is None:
                return None, None
            return plots.similarity_heatmap(uses, the_layer), plots.projection_scatter(uses, the_layer)

        compare_event = dict(
            fn=on_compare,
            inputs=[sentences, word, layer],
            outputs=[senses_message, table, heatmap, projection, uses_state],
            concurrency_id=ONE_QUEUE,
        )
        compare.click(**compare_event)
        word.submit(**compare_event)
        page.load(**compare_event)  # the first visit shows the example
        layer.change(draw, inputs=[uses_state, layer], outputs=[heatmap, projection], concurrency_id=ONE_QUEUE)

        if loaded.lm is not None:

            def on_fill(text):
                try:
                    best = fill_mask(loaded.lm, loaded.tokenizer, text)
                except UserError as e:
                    return str(e), None
                return "\n".join(f"{w}  {p:.4f}" for w, p in best), plots.probability_bars(best)

            fill_event = dict(fn=on_fill, inputs=fill_text, outputs=[fill_result, fill_plot], concurrency_id=ONE_QUEUE)
            fill.click(**fill_event)
            fill_text.submit(**fill_event)
            page.load(**fill_event)

        if loaded.lm is not None:

            def on_score(text):
                try:
                    scores = word_scores(loaded.lm, loaded.tokenizer, text)
                except UserError as e:  # said above the picture; the table hidden
                    return f"**{plain(str(e))}**", None, gr.Dataframe(None, visible=False)
                rows = [
                    [w, *("unknown" if v is None else f"{v:.2f}" for v in (f, b, m))]
                    for w, f, b, m in zip(scores.words, scores.forward, scores.backward, scores.mean)
                ]
                return (
                    "",
                    plots.word_score_rows(scores),
                    gr.Dataframe(rows, headers=["word", "forward", "backward", "mean"], visible=True),
                )

            score_outputs = [score_message, surprisal, score_table]
            score_event = dict(fn=on_score, inputs=score_text, outputs=score_outputs, concurrency_id=ONE_QUEUE)
            score.click(**score_event)
            score_text.submit(**score_event)
            page.load(**score_event)
    return page.queue(max_size=QUEUE_SIZE, default_concurrency_limit=1)


def similarity_table(uses):
    """The similarities of the ELMo vectors (the mix) as rows of text, three decimals: a use a row, named by its
    number and the start of its sentence (the message above the table lists the sentences in full)."""
    matrix = uses.similarities[MIX]
    n = len(matrix)
    rows = [
        [textwrap.shorten(uses.label(i), 24, placeholder="..."), *(f"{matrix[i, j]:.3f}" for j in range(n))]
        for i in range(n)
    ]
    return gr.Dataframe(
        rows, headers=["use", *(f"[{j + 1}]" for j in range(n))], column_widths=["190px", *["70px"] * n], visible=True
    )
