#!/usr/bin/env python
"""`python scripts/push_to_hub.py ARGS` runs `elmo-transformers push ARGS`: the script name of the project's first
instructions, before the command existed."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["push", *sys.argv[1:]]))
