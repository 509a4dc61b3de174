#!/usr/bin/env python
"""``python scripts/train_oracle.py …`` is ``conceptforge train-oracle …``: fine-tune a ConceptBed oracle (docs/conceptbed.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["train-oracle", *sys.argv[1:]]))
