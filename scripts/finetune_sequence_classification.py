#!/usr/bin/env python
"""Kept for earlier instructions: the same as `elmo-transformers finetune sequence-classification ...` (run it with
--help)."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["finetune", "sequence-classification", *sys.argv[1:]]))
