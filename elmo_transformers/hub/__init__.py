"""The Hub: `push` (`push.py`: the upload folder and the load check; `elmo_transformers.push`, which
`elmo-transformers push` calls), the model card (`model_card.py`), the demo Space (`space.py`, `push --space`), what
of a folder goes up, the fresh-process check and the upload (`repo.py`, shared by the two), and every command's Hub
timeouts (`deadline.py`)."""
