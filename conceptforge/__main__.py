"""``python -m conceptforge``: the same command as ``conceptforge``."""

import sys

from conceptforge.commands import main

if __name__ == "__main__":
    sys.exit(main())
