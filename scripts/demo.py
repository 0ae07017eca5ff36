#!/usr/bin/env python
"""`python scripts/demo.py ARGS` runs `elmo-transformers demo ARGS`: the script name of the project's first
instructions, before the command existed."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
