#!/usr/bin/env python
"""Compare models from `evaluate.py --model … --tasks …` results files: ``leaderboard.py results/*.json``."""

import sys

from conceptforge.commands.leaderboard import main

if __name__ == "__main__":
    sys.exit(main())
