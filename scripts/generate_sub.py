#!/usr/bin/env python
"""``python scripts/generate_sub.py …`` is ``conceptforge generate sub …``: SUB candidates with Tied Diffusion Guidance (docs/sub.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["generate", "sub", *sys.argv[1:]]))
