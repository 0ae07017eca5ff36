#!/usr/bin/env python
"""Kept for earlier instructions: the same as `elmo-transformers finetune token-classification ...` (run it with
--help)."""

import sys

from elmo_transformers.cli import main

if __name__ == "__main__":
    sys.exit(main(["finetune", "token-classification", *sys.argv[1:]]))
