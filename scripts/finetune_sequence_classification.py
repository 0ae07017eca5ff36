#!/usr/bin/env python
"""`python scripts/finetune_sequence_classification.py ARGS` runs `elmo-transformers finetune sequence-classification
ARGS`: the script name of the project's first instructions, before the command existed."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["finetune", "sequence-classification", *sys.argv[1:]]))
