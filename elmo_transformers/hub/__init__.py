"""The Hub: the upload folder, its model card and the load check behind `elmo-transformers push`."""
