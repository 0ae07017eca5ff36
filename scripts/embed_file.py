#!/usr/bin/env python
"""Embed a text file with ELMo into HDF5, in the layout of AllenNLP's `allennlp elmo` command.

The work is `elmo_transformers.embed_file` (also `ElmoEmbedder.embed_file`); `--help` tells the rules.
"""

import sys

from elmo_transformers.embed_file import main

if __name__ == "__main__":
    sys.exit(main())
