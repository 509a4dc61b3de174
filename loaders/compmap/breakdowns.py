"""Breakdowns of the CompMap tasks.

* compmap-cub: the mean over episodes of each episode's accuracy (what ``run_episodes`` reports, not
  the pooled query accuracy: episodes of the authors' protocol differ in size), per n-way k-shot
  setting, on the headline's row (``prim``); episodes are resampled. The full-shot setting is one
  pass: its images are.
* compmap-mit-states: top-1 accuracy (``value``) of seen and unseen pairs, on the headline's world
  and row (``closed.prim.auc`` -> closed, prim). The headline (AUC) is not a per-image mean.
"""

from __future__ import annotations

import re

import numpy as np

from conceptforge.loaders.analysis.breakdowns import (
    Dimension,
    Filter,
    TaskSpec,
    combined_keys,
    first_value,
    has_value,
    row_mask,
)
from conceptforge.loaders.harness.sample_columns import Samples


def _select_cub(samples: Samples, main: str | None) -> tuple[tuple[Filter, ...], tuple[Filter, ...]]:
    """Scope: the headline's row (``…prim``). Headline: its setting (``5-way-1-shot``); without a
    main metric the first n-way k-shot setting."""
    setting, _, row = (main or "").rpartition(".")
    row = row if has_value(samples, "row", row) else "prim"
    scope = (("row", row),) if has_value(samples, "row", row) else ()
    if setting and has_value(samples, "setting", setting):
        return scope, (("setting", setting),)
    match = re.match(r"(\d+)-way-(\d+)-shot", setting)
    if match:
        return scope, (("n_way", int(match.group(1))), ("k_shot", int(match.group(2))))
    if setting == "full-shot":
        return scope, (("k_shot", None),)
    if "n_way" not in samples.columns or "k_shot" not in samples.columns:
        return scope, ()
    _, keys = combined_keys(samples, ("n_way", "k_shot"), np.flatnonzero(row_mask(samples, scope)))
    settings = sorted((n, k) for n, k in keys if n is not None and k is not None)
    return scope, ((("n_way", settings[0][0]), ("k_shot", settings[0][1])) if settings else ())


def _select_mit(samples: Samples, main: str | None) -> tuple[tuple[Filter, ...], tuple[Filter, ...]]:
    parts = (main or "").split(".")
    world = parts[0] if len(parts) == 3 and has_value(samples, "world", parts[0]) else first_value(samples, "world")
    row = parts[1] if len(parts) == 3 else "prim"
    scope = tuple((c, v) for c, v in (("world", world), ("row", row)) if v is not None and has_value(samples, c, v))
    return scope, ()


COMPMAP_CUB = TaskSpec(
    "compmap-cub",
    "mean over episodes of the episode's accuracy",
    ("n_way", "k_shot", "episode"),
    (Dimension("setting", "by n-way k-shot setting", ("n_way", "k_shot"), skip_null=False),),
    _select_cub,
    episodes=True,
    axis="accuracy, mean over episodes (%)",
)
COMPMAP_MIT = TaskSpec(
    "compmap-mit-states",
    "top-1 accuracy of the test images (value)",
    ("pair", "attr", "obj", "seen"),
    (Dimension("seen", "seen vs unseen pairs", ("seen",)),),
    _select_mit,
    axis="top-1 accuracy (%)",
)
