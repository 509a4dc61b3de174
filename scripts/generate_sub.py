#!/usr/bin/env python
"""Generate SUB candidates with Tied Diffusion Guidance over FLUX.1-dev (paper 001).

Examples::

    python scripts/generate_sub.py --cub-dir ~/data/CUB_200_2011 --out outputs/sub-candidates --dry-run
    accelerate launch scripts/generate_sub.py --cub-dir ~/data/CUB_200_2011 --out outputs/sub-candidates
    python scripts/generate_sub.py --mode prompt-only --reference-selection --images-per-pair 20 \
        --cub-dir ~/data/CUB_200_2011 --out outputs/sub-reference-selection

See docs/sub.md.
"""

from __future__ import annotations

import sys

from conceptforge.cli import run_cli
from conceptforge.generators.sub.cli import main

if __name__ == "__main__":
    sys.exit(run_cli(main))
