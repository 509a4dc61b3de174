"""The tiny SUB preset run whose files tests/specs/test_preset_sub.py fingerprints.

One miniature CUB, the tiny random FLUX (seed 0) and the tiny LLaVA, under fixed folder names
(the card records ``.../<folder>`` names, never absolute paths); generate two pairs of the paper
plan and filter them. The files of the item store that name absolute paths are read with the root
replaced by ``<ROOT>``; those that record times or process ids (assembly logs, chunk markers) are
left out, so what is compared is everything the run writes that does not depend on when or where.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from conceptforge.commands import invoke
from tests.pipeline.pipeline_helpers import write_full_mini_cub
from tests.sub.sub_helpers import TINY_FLUX_ARGS

#: Two pairs of the paper's plan (reference bird x substitution): a pattern and a colour.
PAPER_PAIRS = ["Blue_Jay=has_tail_pattern::solid", "Blue_Jay=has_crown_color::grey"]
#: Files of the item store that hold times, process ids or chunk timings: not deterministic.
UNSTABLE = ("assembled.json", "assembly.json", "chunks/")


def build_inputs(root: Path, flux_dir: Path, vlm_dir: Path) -> dict[str, Path]:
    """The CUB folder and the two models under ``root`` with the names the hashes were recorded with."""
    import shutil

    cub = write_full_mini_cub(root / "data", images_per_class=1)
    flux = shutil.copytree(flux_dir, root / "models" / "flux")
    vlm = shutil.copytree(vlm_dir, root / "models" / "vlm")
    return {"cub": cub, "flux": flux, "vlm": vlm}


def run_generate_and_filter(root: Path, inputs: dict[str, Path], *, name: str, spec_args: list[str]) -> list[Path]:
    """``generate sub`` (two paper pairs, two images each) then ``filter sub``; the two folders."""
    candidates, filtered = root / name / "sub-candidates", root / name / "sub-filtered"
    invoke(
        [
            "generate",
            "sub",
            *spec_args,
            "--cub-dir",
            str(inputs["cub"]),
            "--out",
            str(candidates),
            "--model",
            str(inputs["flux"]),
            "--pairs",
            *PAPER_PAIRS,
            "--images-per-pair",
            "2",
            *TINY_FLUX_ARGS,
        ]
    )
    invoke(
        [
            "filter",
            "sub",
            *spec_args,
            "--candidates",
            str(candidates),
            "--out",
            str(filtered),
            "--cub-dir",
            str(inputs["cub"]),
            "--vqa-model",
            str(inputs["vlm"]),
            "--keep-fraction",
            "0.5",
            "--min-survivor-fraction",
            "0",
            "--device",
            "cpu",
        ]
    )
    return [candidates, filtered]


#: How a shard report (``.work/shards/*.json``, what ``conceptforge status`` prints after a kill)
#: lists ``--preset sub-cub-paper`` in the process's own command line: the one thing a named
#: preset's run records differently, by design (it is what the user typed).
PRESET_IN_SHARD_REPORT = b'  "--preset",\n  "sub-cub-paper",\n'


def fingerprints(root: Path, folders: list[Path], *, named_preset: bool = False) -> dict[str, str]:
    """sha256 of every deterministic file of ``folders`` (two folders of one run directory under
    ``root``), keyed ``<folder>/<path>``; in the item store the run directory reads ``<RUN>`` and
    ``root`` reads ``<ROOT>``, so runs side by side compare equal."""
    hashes = {}
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            relative = path.relative_to(folder).as_posix()
            if relative.startswith(".work/") and any(part in relative for part in UNSTABLE):
                continue
            data = path.read_bytes()
            if relative.startswith(".work/"):
                data = data.replace(str(folder.parent).encode(), b"<RUN>").replace(str(root).encode(), b"<ROOT>")
                # the shard report's working directory is the checkout's: one hash in every worktree
                data = re.sub(rb'"cwd": "[^"]*"', b'"cwd": "<CWD>"', data)
                if named_preset and relative.startswith(".work/shards/"):
                    assert PRESET_IN_SHARD_REPORT in data, relative
                    data = data.replace(PRESET_IN_SHARD_REPORT, b"")
            hashes[f"{folder.name}/{relative}"] = hashlib.sha256(data).hexdigest()
    return hashes
