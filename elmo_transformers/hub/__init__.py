"""The Hub: `push` (`push.py`: the upload folder, its model card and the load check; `elmo_transformers.push`, which
`elmo-transformers push` calls), the demo Space (`space.py`, `push --space`), and every command's Hub timeouts
(`deadline.py`)."""
