"""Embedding text: `ElmoEmbedder` (AllenNLP's and TF-Hub's calling conventions) and the file job behind
`elmo-transformers embed` (`embed_file`, with its HDF5 and Parquet writers)."""
