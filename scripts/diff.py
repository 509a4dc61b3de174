#!/usr/bin/env python
"""``python scripts/diff.py A B`` is ``conceptforge diff A B``: rows, features and card changes between two releases (docs/publishing.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["diff", *sys.argv[1:]]))
