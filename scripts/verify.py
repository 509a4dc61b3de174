#!/usr/bin/env python
"""``python scripts/verify.py …`` is ``conceptforge verify …``: check that a release regenerates from its provenance (docs/publishing.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["verify", *sys.argv[1:]]))
