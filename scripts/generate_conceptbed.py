#!/usr/bin/env python
"""``python scripts/generate_conceptbed.py …`` is ``conceptforge generate conceptbed …``.

Learns ConceptBed concepts and samples them (docs/conceptbed.md).
"""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["generate", "conceptbed", *sys.argv[1:]]))
