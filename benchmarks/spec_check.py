"""`conceptforge spec check` start-up: names imported on first use vs the packages' eager imports.

Ours: ``conceptforge spec check --preset P`` in a fresh interpreter, as a user runs it on a login
node before submitting a job (the benchmark packages import a public name only when it is asked
for: conceptforge/lazy_exports.py). Baseline, what the command cost before: the same check after
importing what ``conceptforge.generators.sub`` and ``conceptforge.loaders.compmap`` imported
eagerly (the FLUX model code with torch, the SUB card with ``datasets``, CompMap's metrics), i.e.
the start-up a package ``__init__`` of eager imports makes every command pay.
"""

from __future__ import annotations

import subprocess
import sys

from benchmarks._harness import Result, compare

EAGER = (
    "conceptforge.generators.sub.flux_tdg",
    "conceptforge.generators.sub.card",
    "conceptforge.generators.sub.stage",
    "conceptforge.loaders.compmap.metrics",
    "conceptforge.loaders.compmap.sampler",
    "conceptforge.loaders.compmap.logreg",
)


def _check(preset: str, preload: tuple[str, ...]):
    code = f"import sys, importlib; [importlib.import_module(m) for m in {preload!r}]; " + (
        "from conceptforge.commands import main; sys.exit(main(['spec', 'check', '--preset', sys.argv[1]]))"
    )

    def fn(_round: int) -> None:
        subprocess.run([sys.executable, "-c", code, preset], check=True, capture_output=True, timeout=300)

    return fn


def run(quick: bool) -> list[Result]:
    repeats = 5 if quick else 11
    results = []
    for preset in ("sub-cub-paper", "compmap-cub-paper"):
        ours, baseline = _check(preset, ()), _check(preset, EAGER)
        ours(0), baseline(0)  # warm the page cache for both
        results.append(
            compare(
                f"spec check {preset}",
                ("ours: names imported on first use", ours),
                ("eager package imports", baseline),
                repeats,
                work=f"`conceptforge spec check --preset {preset}` in a fresh interpreter",
                cpu=False,
            )
        )
    return results
