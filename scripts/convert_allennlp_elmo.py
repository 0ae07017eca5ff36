#!/usr/bin/env python
"""`python scripts/convert_allennlp_elmo.py ARGS` runs `elmo-transformers convert allennlp ARGS`: the script name of the
project's first instructions, before the command existed."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["convert", "allennlp", *sys.argv[1:]]))
