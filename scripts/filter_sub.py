#!/usr/bin/env python
"""``python scripts/filter_sub.py …`` is ``conceptforge filter sub …``: VQA filtering of SUB candidates (docs/sub.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["filter", "sub", *sys.argv[1:]]))
