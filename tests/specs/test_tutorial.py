"""docs/own-benchmark.md is run from the Markdown: the page's code blocks are the test.

Convention (the page says it too): a fenced block preceded by ``<!-- tested: TRACK -->`` is run;
the blocks of one track (``shared``, ``sub``, ``conceptbed``, ``binding``, ``compmap``) run in
page order as one bash script in an empty folder (a ``python`` block through ``python -``), the
shell being a user's (the checkout's ``conceptforge`` and ``python`` on PATH, CPU only) whose Hub
is the local test server. A block marked ``<!-- tested: TRACK models -->`` sets the model
variables; it is the one block the test replaces, with the same variables naming tiny models.

While a method's spec class is not in this checkout (issue 46: each method's branch adds it),
its track runs the blocks before its first ``conceptforge`` command (the data it makes must
be right already) and the rest is an expected failure, strict: the day the method lands, the
whole track runs and must pass. Such a track may show its not-yet-parsable commands in
``shell-session`` fences, which the docs build's command check skips; a track whose method is
there must use ``bash`` again, so the build checks every command it shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conceptforge.commands.spec_methods import spec_class
from conceptforge.errors import DependencyMissingError
from tests.user_shell import REPO

PAGE = REPO / "docs" / "own-benchmark.md"
MARK = re.compile(r"^<!--\s*tested:\s*(?P<track>[\w-]+)(?P<models>\s+models)?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
RUNNABLE = {"bash", "shell-session", "python"}
METHOD_TRACKS = ("sub", "conceptbed", "binding", "compmap")


@dataclass(frozen=True)
class Block:
    track: str
    models: bool
    lang: str
    code: str
    line: int


class PendingWiring(Exception):
    """The method's spec is not in this checkout yet; its commands cannot run."""


def page_blocks(text: str) -> list[Block]:
    """The marked blocks of ``text`` in order; a mark not followed by a fence is an error."""
    lines = text.splitlines()
    blocks = []
    for number, line in enumerate(lines):
        mark = MARK.match(line)
        if not mark:
            continue
        fence = FENCE.match(lines[number + 1]) if number + 1 < len(lines) else None
        assert fence, f"own-benchmark.md:{number + 1}: a 'tested' mark must sit right above a fenced block"
        end = next(i for i in range(number + 2, len(lines)) if lines[i].startswith("```"))
        code = "\n".join(lines[number + 2 : end]) + "\n"
        blocks.append(Block(mark["track"], bool(mark["models"]), fence["lang"], code, number + 2))
    return blocks


BLOCKS = page_blocks(PAGE.read_text(encoding="utf-8"))


def method_pending(method: str) -> str | None:
    try:
        spec_class(method)
    except DependencyMissingError as error:
        return str(error)
    return None


def model_variables(block: Block) -> list[str]:
    names = [m.group(1) for m in re.finditer(r"^([A-Z_]+)=", block.code, flags=re.M)]
    assert names, f"own-benchmark.md:{block.line}: a models block sets variables (NAME=value)"
    return names


def as_script(blocks: list[Block], models: dict[str, str]) -> str:
    """One bash script of ``blocks``; a models block becomes the test's own assignments."""
    parts = ["set -euo pipefail"]
    for block in blocks:
        parts.append(f"echo '>>> own-benchmark.md:{block.line}' >&2")
        if block.models:
            missing = set(model_variables(block)) - set(models)
            assert not missing, f"own-benchmark.md:{block.line}: the test has no tiny model for {sorted(missing)}"
            parts += [f"{name}={value!r}" for name, value in models.items()]
        elif block.lang == "python":
            parts.append(f"python - <<'PYTHON_BLOCK'\n{block.code}PYTHON_BLOCK")
        else:
            parts.append(block.code)
    return "\n".join(parts) + "\n"


def run_script(script: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=900)


def user_env(hub_env: dict[str, str], folder: Path) -> dict[str, str]:
    """The local Hub's user, with this checkout's ``conceptforge`` and ``python`` first on PATH."""
    env = dict(hub_env, HF_HOME=str(folder / ".hf-home"))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def tiny_models(track: str, request: pytest.FixtureRequest, folder: Path) -> dict[str, str]:
    """The tiny random stand-ins for a track's model variables (built only when the track runs)."""
    from conceptforge.testing.tiny_models import build_tiny_clip

    clip = str(build_tiny_clip(folder / ".models" / "clip"))
    if track == "sub":
        from conceptforge.testing.tiny_vlms import build_tiny_llava

        return {
            "FLUX": str(request.getfixturevalue("random_flux_seed0")),
            # a model other than FLUX.1-dev names its data's license (FLUX.1-dev's is the default)
            "FLUX_FLAGS": "--resolution 32 --steps 2 --max-sequence-length 16 --device cpu --images-per-pair 2"
            " --license cc-by-nc-4.0",
            "VLM": str(build_tiny_llava(folder / ".models" / "vlm")),
            "CLIP": clip,
        }
    if track == "conceptbed":
        from conceptforge.testing.tiny_conceptbed import build_tiny_classifier, build_tiny_sd

        return {
            "SD": str(build_tiny_sd(folder / ".models" / "sd")),
            "SD_FLAGS": "--steps 2 --num-images 1 --num-inference-steps 2 --resolution 32",
            "ORACLE": str(build_tiny_classifier(folder / ".models" / "oracle", ["a", "b"], arch="resnet")),
        }
    if track == "binding":
        # 12 images at 32x24, one Cycles sample, no denoiser: a few seconds of Blender
        return {"BINDING_FLAGS": "--resolution 32x24 --samples 1 --no-denoise --device cpu", "CLIP": clip}
    return {"CLIP": clip}


# --- the page's own rules ----------------------------------------------------------------------


def test_the_page_has_a_tested_track_per_method():
    tracks = {block.track for block in BLOCKS}
    assert tracks == {"shared", *METHOD_TRACKS}
    for track in METHOD_TRACKS:
        blocks = [block for block in BLOCKS if block.track == track]
        assert sum(block.models for block in blocks) == 1, f"{track}: one models block"
        text = "".join(block.code for block in blocks)
        assert f"conceptforge init {track} --from" in text and "conceptforge spec check" in text, track
        assert "conceptforge leaderboard" in text, track
    assert all(block.lang in RUNNABLE for block in BLOCKS), [(b.line, b.lang) for b in BLOCKS]


def test_shell_session_fences_only_where_the_method_is_not_merged():
    """``shell-session`` hides a command from the docs build's check; only a pending track may."""
    for block in BLOCKS:
        if block.lang == "shell-session":
            assert block.track in METHOD_TRACKS and method_pending(block.track), (
                f"own-benchmark.md:{block.line}: the {block.track} spec is merged; make this fence ```bash "
                "so `make docs` checks its commands"
            )


def test_the_page_is_in_the_nav_and_the_readme():
    assert "own-benchmark.md" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docs/own-benchmark.md" in (REPO / "README.md").read_text(encoding="utf-8")


METHOD_PAGES = {"sub": "sub.md", "conceptbed": "conceptbed.md", "binding": "binding.md", "compmap": "compmap.md"}


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(
            method,
            marks=[pytest.mark.xfail(strict=True, reason=f"{method}'s 'Your own' section comes with its branch")]
            if method_pending(method)
            else [],
        )
        for method in METHOD_TRACKS
    ],
)
def test_each_method_page_has_its_own_section_and_the_tutorial_links_it(method):
    page = (REPO / "docs" / METHOD_PAGES[method]).read_text(encoding="utf-8")
    # binding's section is "Your own binding vocabulary" (the home page and the docs site link it so)
    heading = next(
        (line for line in page.splitlines() if re.match(r"^#+ Your own .*(benchmark|vocabulary)$", line)), None
    )
    assert heading, f"docs/{METHOD_PAGES[method]} has no 'Your own … benchmark' section"
    anchor = re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")
    assert f"{METHOD_PAGES[method]}#{anchor}" in PAGE.read_text(encoding="utf-8")


# --- running the tracks ------------------------------------------------------------------------


def test_the_shared_blocks_run(tmp_path, hub_env):
    from conceptforge.specs import preset_names

    blocks = [block for block in BLOCKS if block.track == "shared"]
    done = run_script(as_script(blocks, {}), tmp_path, user_env(hub_env, tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    if preset_names():
        assert [line.split()[0] for line in lines] == preset_names()
    else:
        assert lines == ["no presets shipped"]


#: Tracks the default suite runs whole: none. Every track runs whole under ``-m heavy`` (each
#: repeats its method's own end-to-end test, tests/specs/test_*own*); in the default suite a track
#: with a ``--dry-run`` runs up to and including it (every command before the plan). CompMap's has
#: no plan step (it evaluates directly), so its whole track is heavy only (CompMap's spec, starter and
#: evaluation run by default in tests/specs/test_compmap_*.py and tests/compmap).
WHOLE_BY_DEFAULT: set[str] = set()
#: Tracks without a ``--dry-run`` command, so without a "to the plan" cut.
NO_PLAN_STEP = {"compmap"}


def up_to_the_plan(script: str) -> str:
    """The script cut after its first ``--dry-run`` command (the data, init, spec check, the plan)."""
    lines = script.splitlines()
    cut = next(i for i, line in enumerate(lines) if "--dry-run" in line and not line.lstrip().startswith("#"))
    return "\n".join(lines[: cut + 1]) + "\n"


@pytest.mark.parametrize(
    ("track", "whole"),
    [
        *[(track, True) for track in METHOD_TRACKS if track in WHOLE_BY_DEFAULT],
        *[(track, False) for track in METHOD_TRACKS if track not in WHOLE_BY_DEFAULT | NO_PLAN_STEP],
        *[
            pytest.param(track, True, marks=pytest.mark.heavy)
            for track in METHOD_TRACKS
            if track not in WHOLE_BY_DEFAULT
        ],
    ],
    ids=lambda value: {True: "whole", False: "to-the-plan"}.get(value, value) if isinstance(value, bool) else value,
)
def test_a_method_track_runs_from_the_markdown(track, whole, tmp_path, hub_env, request):
    blocks = [block for block in BLOCKS if block.track == track]
    env = user_env(hub_env, tmp_path)
    script = as_script(blocks, tiny_models(track, request, tmp_path))
    done = run_script(script if whole else up_to_the_plan(script), tmp_path, env)
    assert done.returncode == 0, f"{track} track failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    if not whole:  # the plan was printed from the spec the page made, and nothing was generated
        assert "--dry-run" in up_to_the_plan(script) and done.stdout.strip(), done.stderr[-2000:]
        assert not (tmp_path / "results").exists()
        return
    results = sorted((tmp_path / "results").glob("*.json"))
    assert results, f"{track}: no results file"
    assert any(line.startswith("|") for line in done.stdout.splitlines()), "the leaderboard prints a table"
