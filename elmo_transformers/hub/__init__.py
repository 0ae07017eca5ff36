"""The Hub: the upload folder, its model card and the load check behind `elmo-transformers push` (`push.py`), the
demo Space (`space.py`, `push --space`), and every command's Hub timeouts (`deadline.py`)."""
