"""What the SUB generation tests share across folders (tests/sub, tests/cluster, tests/pipeline,
tests/verify): the settings that make ``generate sub`` cheap on the tiny random FLUX, and a small
candidate spec."""

from __future__ import annotations

import json
from pathlib import Path

# The tiny FLUX on the CPU: 32 px, 2 denoising steps, 16 text tokens (its T5 is that short).
TINY_FLUX_ARGS = ["--resolution", "32", "--steps", "2", "--max-sequence-length", "16", "--device", "cpu"]
TINY_FLUX_ARGS += ["--license", "cc-by-nc-4.0"]

#: One TDG pair as the paper writes it (Appendix D): the reference bird with S+, and the guidance.
TDG_PROMPTS = [
    "A photo of a Blue Jay with black colored feathers on the crown of its head",
    "A photo of a bird with black colored feathers on the crown of its head",
]


def write_candidate_spec(path: Path, birds=("Blue_Jay", "Cardinal"), attributes=None) -> Path:
    """A ``--candidate-spec`` file: by default two birds and two substitutions, four pairs."""
    attributes = attributes or ("has_crown_color::black", "has_tail_pattern::solid")
    path.write_text(json.dumps({"birds": list(birds), "attributes": list(attributes)}))
    return path
