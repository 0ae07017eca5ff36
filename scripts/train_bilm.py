#!/usr/bin/env python
"""`python scripts/train_bilm.py ARGS` runs `elmo-transformers pretrain ARGS`: the script name of the project's first
instructions, before the command existed."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["pretrain", *sys.argv[1:]]))
