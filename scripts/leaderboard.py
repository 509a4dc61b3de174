#!/usr/bin/env python
"""``python scripts/leaderboard.py …`` is ``conceptforge leaderboard …``: compare models' results files."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main(["leaderboard", *sys.argv[1:]]))
