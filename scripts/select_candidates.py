#!/usr/bin/env python
"""``python scripts/select_candidates.py …`` is ``conceptforge select-candidates …``: SUB reference birds and attribute candidates (docs/sub.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["select-candidates", *sys.argv[1:]]))
