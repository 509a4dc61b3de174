"""The SUB plan without CUB (issue 19) and what the candidates card records (issue 20.9)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.cards.lineage import read_upstream_metadata
from conceptforge.commands import invoke
from conceptforge.commands.generate.sub import add_arguments, plan_request
from conceptforge.errors import ConceptforgeError
from conceptforge.generators.sub.plan import build_plan
from conceptforge.generators.sub.spec import load_spec
from tests.sub.sub_helpers import TINY_FLUX_ARGS


def main(argv):
    return invoke(["generate", "sub", *argv])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


REPO = Path(__file__).resolve().parents[2]


def test_dry_run_prints_the_plan_without_cub_and_names_what_needs_it(tmp_path, mini_cub, capsys):
    spec = load_spec()
    assert main(["--out", str(tmp_path / "x"), "--dry-run", "--seconds-per-image", "9"]) == 0
    text = capsys.readouterr().out
    everything = len(spec.reference_birds) * len(spec.substitutions)
    assert f"pairs: {everything} (at most: pairs whose bird already has S+ are dropped with --cub-dir)" in text
    assert "dropped (bird already has S+): needs --cub-dir" in text
    assert f"images: {everything * 500} (at most) (500 per pair)" in text
    assert f"estimated GPU-hours: {everything * 500 * 9 / 3600:,.0f} (for at most this many images)" in text
    assert "source: --seconds-per-image, as given" in text
    assert "S-=needs --cub-dir" in text and "not checked against CUB" in text
    assert not (tmp_path / "x").exists()

    # With CUB the same command gives the exact numbers (the miniature CUB drops 4 pairs).
    assert main(["--cub-dir", str(mini_cub), "--out", str(tmp_path / "x"), "--dry-run"]) == 0
    exact = capsys.readouterr().out
    assert (
        f"pairs: {everything - 4} (" in exact and "dropped (bird already has S+): 4" in exact and "at most" not in exact
    )


def test_without_cub_only_the_dry_run_works(tmp_path):
    with pytest.raises(ConceptforgeError, match="--cub-dir is required to generate .* --dry-run works without it"):
        main(["--out", str(tmp_path / "x")])
    with pytest.raises(ConceptforgeError, match="pass --cub-dir or --classes"):
        main(["--out", str(tmp_path / "x"), "--dry-run", "--mode", "prompt-only", "--reference-selection"])
    assert not (tmp_path / "x").exists()


def test_dropped_pairs_count_only_the_selected_pairs(mini_cub):
    def plan(*selectors):
        args = build_parser().parse_args(
            ["--cub-dir", str(mini_cub), "--out", "unused", *(["--pairs", *selectors] if selectors else [])]
        )
        return build_plan(plan_request(args))[0]

    assert len(plan().dropped) == 4  # the whole paper spec
    assert plan("Western_Grebe").dropped == []
    assert plan("Western_Grebe", "Cardinal").dropped == [("Cardinal", "has_breast_color::red")]
    assert {bird for bird, _ in plan("Blue_Jay").dropped} == {"Blue_Jay"}
    assert plan("has_crown_color::black").dropped == [("European_Goldfinch", "has_crown_color::black")]


def test_candidates_card_has_versions_and_command_line_but_no_local_paths(tmp_path, mini_cub, tiny_flux_dir):
    out = tmp_path / "run"
    args = ["--cub-dir", str(mini_cub), "--out", str(out), "--model", str(tiny_flux_dir)]
    args += ["--pairs", "Blue_Jay=has_crown_color::black", "European_Goldfinch=has_crown_color::white"]
    args += ["--images-per-pair", "1", *TINY_FLUX_ARGS]
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generate_sub.py"), *args],
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
            "CUDA_VISIBLE_DEVICES": "",
            "HOME": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    card = (out / "README.md").read_text()
    # No absolute local path anywhere in the card: not the CUB folder, the model folder or --out.
    for local in (str(mini_cub), str(tiny_flux_dir), str(tmp_path), str(REPO)):
        assert local not in card
    assert not re.search(r"(?<![\w.])/(tmp|home|root|Users|work)/", card)
    provenance = read_upstream_metadata(out).provenance
    assert {"conceptforge", "torch", "diffusers", "datasets", "numpy"} <= set(provenance["packages"])
    command = provenance["command_line"]
    assert command.startswith("conceptforge generate sub --cub-dir .../CUB_200_2011 --out .../run --model .../")
    assert "--pairs Blue_Jay=has_crown_color::black European_Goldfinch=has_crown_color::white" in command
    assert "--device" not in command  # how the process ran is not part of the data's recipe
    assert "**Command line**" in card and "| diffusers |" in card
    # The whole paper spec drops 4 pairs; these two selected pairs drop none.
    assert provenance["pairs"] == 2 and provenance["dropped_pairs_already_present"] == 0
    assert json.loads(json.dumps(provenance))  # plain JSON
