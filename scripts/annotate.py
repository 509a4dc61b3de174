#!/usr/bin/env python
"""``python scripts/annotate.py …`` is ``conceptforge annotate …``: human validation studies (docs/annotation.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["annotate", *sys.argv[1:]]))
