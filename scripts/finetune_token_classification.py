#!/usr/bin/env python
"""`python scripts/finetune_token_classification.py ARGS` runs `elmo-transformers finetune token-classification ARGS`:
the script name of the project's first instructions, before the command existed."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["finetune", "token-classification", *sys.argv[1:]]))
