"""Command lines the filter tests share: the SUB filter and the attribute selection on the tiny
VLM, on the CPU (each test adds what it varies)."""

from __future__ import annotations

from pathlib import Path


def filter_sub_args(candidates: Path, out: Path, cub: Path, vlm: Path, *extra: str) -> list[str]:
    """The options of ``conceptforge filter sub`` (and scripts/filter_sub.py)."""
    where = ["--candidates", str(candidates), "--out", str(out), "--cub-dir", str(cub)]
    return [*where, "--vqa-model", str(vlm), "--device", "cpu", *extra]


def select_attributes_args(cub: Path, vlm: Path, *extra: str) -> list[str]:
    """``conceptforge select-candidates attributes`` over one attribute group, one image enough."""
    command = ["select-candidates", "attributes", "--cub-dir", str(cub), "--vqa-model", str(vlm)]
    return [*command, "--groups", "has_bill_shape", "--min-support", "1", "--device", "cpu", *extra]
