"""The bad-spec walk, the part every method shares: the file, the envelope, ``spec`` and ``init``.

Each case runs the real command line in a fresh process (``python -m conceptforge …``) in a
folder of its own and expects what a user should get: exit 2, exactly one ``error:`` line on
stderr naming the field (or flag) and the fix, nothing on stdout, and the folder byte for byte as
it was (no spec written, no temp file left). The methods' own fields are walked in
``tests/specs/test_walk_<method>.py``.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.user_shell import script_env

GOOD_ENVELOPE = "method: sub\nspec_version: 1\nname: my-cars\n"


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` with the sha256 of a file's bytes ('dir' for a folder)."""
    return {
        str(path.relative_to(folder)): "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
    }


# (id, files to lay out in the folder, argv after `conceptforge`, fragments the one line must hold)
CASES = [
    (
        "not-yaml",
        {"spec.yaml": "method: sub\nname: [cars\nspec_version: 1\n"},
        ["spec", "check", "spec.yaml"],
        ["spec.yaml: line", "not valid YAML"],
    ),
    (
        "not-json",
        {"spec.json": '{"method": "sub",\n "name": "x",,\n}'},
        ["spec", "check", "spec.json"],
        ["spec.json: line 2: not valid JSON"],
    ),
    ("a-list", {"spec.yaml": "- method: sub\n- name: x\n"}, ["spec", "check", "spec.yaml"], ["holds a list"]),
    ("empty", {"spec.yaml": ""}, ["spec", "check", "spec.yaml"], ["spec.yaml: is empty", "method: "]),
    (
        "unknown-method",
        {"spec.yaml": "method: cars\nspec_version: 1\nname: x\n"},
        ["spec", "check", "spec.yaml"],
        ["spec.yaml: method: unknown method 'cars'", "sub, conceptbed, binding, compmap"],
    ),
    (
        "no-method",
        {"spec.yaml": "spec_version: 1\nname: x\n"},
        ["spec", "check", "spec.yaml"],
        ["spec.yaml: method: is required"],
    ),
    (
        "no-spec-version",
        {"spec.yaml": "method: binding\nname: x\n"},
        ["spec", "check", "spec.yaml"],
        ["spec.yaml: spec_version: is required; add 'spec_version: 1'"],
    ),
    (
        "newer-spec-version",
        {"spec.yaml": "method: compmap\nspec_version: 3\nname: x\n"},
        ["spec", "check", "spec.yaml"],
        ["spec_version: 3 is newer than this conceptforge reads (1); upgrade conceptforge"],
    ),
    (
        "spec-version-text",
        {"spec.yaml": "method: sub\nspec_version: one\nname: x\n"},
        ["spec", "check", "spec.yaml"],
        ["spec_version: must be a positive integer (got 'one')"],
    ),
    (
        "no-name",
        {"spec.yaml": "method: conceptbed\nspec_version: 1\n"},
        ["spec", "check", "spec.yaml"],
        ["spec.yaml: name: is required", "name: my-cars"],
    ),
    (
        "description-not-text",
        {"spec.yaml": GOOD_ENVELOPE + "description: [a, b]\n"},
        ["spec", "check", "spec.yaml"],
        ["spec.yaml: description: must be text"],
    ),
    (
        "folder-as-file",
        {"spec.yaml/inside.txt": "x"},
        ["spec", "check", "spec.yaml"],
        ["spec check", "spec.yaml is a folder, not a file"],
    ),
    ("missing-file", {}, ["spec", "check", "nope.yaml"], ["nope.yaml does not exist"]),
    (
        "not-utf8",
        {"spec.yaml": "method: sub\nspec_version: 1\nname: caf\xe9\n".encode("latin-1")},
        ["spec", "check", "spec.yaml"],
        ["spec.yaml: is not UTF-8 text; save the spec as UTF-8"],
    ),
    (
        "wrong-suffix",
        {"spec.txt": GOOD_ENVELOPE},
        ["spec", "check", "spec.txt"],
        ["spec.txt: a spec file ends in .yaml, .yml or .json"],
    ),
    ("check-neither", {}, ["spec", "check"], ["give a spec FILE or --preset NAME"]),
    (
        "check-both",
        {"spec.yaml": GOOD_ENVELOPE},
        ["spec", "check", "spec.yaml", "--preset", "sub-cub-paper"],
        ["give a spec FILE or --preset NAME"],
    ),
    ("unknown-preset", {}, ["spec", "check", "--preset", "sub-cars"], ["--preset: unknown preset 'sub-cars'"]),
    ("schema-unknown-method", {}, ["spec", "schema", "cars"], ["invalid choice: 'cars'"]),
    ("init-unknown-method", {"data/a.txt": "x"}, ["init", "cars", "--from", "data"], ["invalid choice: 'cars'"]),
    (
        "init-missing-folder",
        {},
        ["init", "sub", "--from", "my-data", "--out", "cars.yaml"],
        ["--from: no such file or folder 'my-data'"],
    ),
    (
        "init-hub-without-revision",
        {},
        ["init", "sub", "--from", "someone/cars"],
        ["--from: someone/cars is neither a local path nor pinned", "--from someone/cars@v1.0.0"],
    ),
    (
        "init-over-existing-file",
        {"data/a.txt": "x", "cars.yaml": "# my edits\n"},
        ["init", "sub", "--from", "data", "--out", "cars.yaml"],
        ["--out: cars.yaml exists", "--force"],
    ),
    (
        "init-default-out-exists",
        {"my-cars/a.txt": "x", "my-cars.yaml": "# my edits\n"},
        ["init", "binding", "--from", "my-cars"],
        ["--out: my-cars.yaml exists"],
    ),
    (
        "init-out-not-yaml",
        {"data/a.txt": "x"},
        ["init", "sub", "--from", "data", "--out", "cars.json"],
        ["--out: cars.json must end in .yaml or .yml"],
    ),
    (
        "init-out-in-missing-folder",
        {"data/a.txt": "x"},
        ["init", "compmap", "--from", "data", "--out", "specs/cars.yaml"],
        ["--out: folder specs does not exist"],
    ),
    ("init-no-from", {}, ["init", "sub"], ["the following arguments are required: --from"]),
    ("init-empty-name", {"data/a.txt": "x"}, ["init", "sub", "--from", "data", "--name", " "], ["--name: is empty"]),
]


def run_cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "conceptforge", *argv],
        cwd=cwd,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("files", "argv", "fragments"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_bad_spec_or_flag_is_one_line_exit_2_and_nothing_written(tmp_path, files, argv, fragments):
    folder = tmp_path / "work"
    folder.mkdir()
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    before = snapshot(folder)
    done = run_cli(argv, folder)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert snapshot(folder) == before


def test_the_walk_has_the_cases_the_issue_asks_for():
    """At least 12 cases, spread over both commands (the issue's list of envelope mistakes)."""
    assert len(CASES) >= 12
    assert len({case[0] for case in CASES}) == len(CASES)
    assert {"spec", "init"} <= {case[2][0] for case in CASES}
