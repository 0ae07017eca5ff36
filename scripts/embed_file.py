#!/usr/bin/env python
"""`python scripts/embed_file.py ARGS` runs `elmo-transformers embed ARGS`: the script name of the project's first
instructions, before the command existed."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["embed", *sys.argv[1:]]))
