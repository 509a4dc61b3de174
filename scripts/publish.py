#!/usr/bin/env python
"""``python scripts/publish.py …`` is ``conceptforge publish …``: publish a dataset directory to the Hub (docs/publishing.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["publish", *sys.argv[1:]]))
