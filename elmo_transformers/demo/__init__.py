"""What ELMo does, shown: the numbers behind `elmo-transformers demo` and its web page (`demo --web`, `app.py`).

`model.py` loads a model once for the whole page and says what the page calls it; `senses.py` computes how similar
one word's uses are, layer by layer; `language_model.py` fills a `<mask>` and scores each word of a text
(language-model folders only); `plots.py` draws them with matplotlib; `page.py` is the Gradio page, `server.py` how
it is served (no uploads, its own temporary folder, bounded request bodies). The command line, the page and the
tests all take their numbers from `senses.py` and `language_model.py`.
"""
