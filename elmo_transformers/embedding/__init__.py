"""Embedding text: `ElmoEmbedder` (AllenNLP's and TF-Hub's calling conventions) and the HDF5 file writer behind
`elmo-transformers embed`."""
