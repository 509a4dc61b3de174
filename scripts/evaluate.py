#!/usr/bin/env python
"""``python scripts/evaluate.py …`` is ``conceptforge evaluate …``: evaluate models on a benchmark."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["evaluate", *sys.argv[1:]]))
