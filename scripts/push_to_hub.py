#!/usr/bin/env python
"""Kept for earlier instructions: the same as `elmo-transformers push ...` (run it with --help)."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["push", *sys.argv[1:]]))
