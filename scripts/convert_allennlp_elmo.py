#!/usr/bin/env python
"""Kept for earlier instructions: the same as `elmo-transformers convert allennlp ...` (run it with --help)."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["convert", "allennlp", *sys.argv[1:]]))
