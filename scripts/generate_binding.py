#!/usr/bin/env python
"""``python scripts/generate_binding.py …`` is ``conceptforge generate binding …``: render the concept-binding datasets (docs/binding.md)."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["generate", "binding", *sys.argv[1:]]))
