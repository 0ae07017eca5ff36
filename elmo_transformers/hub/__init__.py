"""The Hub: `push` (`push.py`: the upload folder, its model card and the load check; `elmo_transformers.push`, which
`elmo-transformers push` calls), the demo Space (`space.py`, `push --space`), what of a folder goes up and the upload
(`repo.py`, shared by the two), and every command's Hub timeouts (`deadline.py`)."""
