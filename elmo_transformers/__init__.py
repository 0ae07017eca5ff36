"""ELMo for transformers, as an installed package.

The model itself lives in the three Hub remote-code modules at the repository root (`configuration_elmo`,
`modeling_elmo`, `tokenization_elmo`, installed as top-level modules); this package holds what installed users get
on top of them.
"""

from .embedder import ElmoEmbedder, batch_to_ids  # noqa: F401  (AllenNLP's names)
