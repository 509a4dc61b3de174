"""generate_binding.py --dry-run: the renders a preset needs and how long they take (no Blender needed)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generate_binding.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_paper_preset_dry_run_counts_the_renders_and_estimates_time(tmp_path):
    result = _run(
        "--preset",
        "paper",
        "--out",
        str(tmp_path / "out"),
        "--dry-run",
        "--seconds-per-image",
        "2",
        "--num-workers",
        "4",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert "  two-object: 60000 images (train 20000, val 20000, gen 20000)" in lines
    total = 5598 + 799 + 3195 + 3 * 20000 + 40000 + 2 * 20000  # Binding paper, Table 1
    assert f"total: {total} images" in lines
    hours = total * 2 / 3600
    assert any(
        line.startswith(f"estimated render time: {hours:.1f} hours for one Blender worker at 2 s/image")
        for line in lines
    )
    assert any(f"about {hours / 4:.1f} hours" in line for line in lines)
    assert not (tmp_path / "out").exists()


def test_default_estimate_says_where_its_figure_comes_from(tmp_path):
    result = _run(
        "--dataset",
        "single-object",
        "--out",
        str(tmp_path / "out"),
        "--dry-run",
        "--resolution",
        "640x480",
        "--samples",
        "32",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    text = result.stdout
    assert "total: 8 images" in text and "scaled by pixels x samples" in text
    # 0.96 s at 320x240 with 16 samples; 4x the pixels and 2x the samples: 7.68 s per image, 61.44 s for 8.
    assert "at 7.7 s/image" in text and "estimated render time: 61 s" in text
    bad = _run("--out", str(tmp_path / "out"), "--dry-run", "--seconds-per-image", "0")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: conceptforge generate binding: argument --seconds-per-image: must be > 0, got 0 (see conceptforge generate binding --help)"
    ]


def test_default_estimate_matches_the_measured_render_time(tmp_path):
    """At the defaults the estimate is the benchmarked 0.96 s per image (it was 6.7 s: ~7x too high)."""
    result = _run("--preset", "paper", "--out", str(tmp_path / "out"), "--dry-run")
    assert result.returncode == 0, result.stderr[-2000:]
    assert 5598 + 799 + 3195 + 3 * 20000 + 40000 + 2 * 20000 == 149592  # Binding paper, Table 1
    # 149592 x 0.96 s = 143608 s = 39.9 hours (6.7 s/image said 278.4 hours)
    assert "estimated render time: 39.9 hours for one Blender worker at 0.96 s/image" in result.stdout
