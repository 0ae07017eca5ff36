#!/usr/bin/env python
"""`python scripts/convert_elmoformanylangs.py ARGS` runs `elmo-transformers convert elmoformanylangs ARGS`: the script
name of the project's first instructions, before the command existed."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["convert", "elmoformanylangs", *sys.argv[1:]]))
