"""Converters: a model in another format (AllenNLP / bilm-tf HDF5, a TensorFlow checkpoint or TF-Hub module,
ELMoForManyLangs) into an ELMo folder.

A new format is one module here with a `convert(...)` that returns the model and tokenizer, and a subparser in
`cli/convert.py`; `output.py` writes the folder (atomic, `--overwrite` rules) for every converter. The published
models by name are in `presets.py`, fetched by `download.py` and unpacked by `archives.py`.
"""
