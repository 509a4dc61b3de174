"""The project as a user installs it: a real wheel, imported with no repository or tests on sys.path.

The wheel is built from a copy of the checkout (``pip wheel --no-deps --no-build-isolation``, so
no network) and unpacked into a temporary folder that stands in for site-packages. Every check
runs in a fresh interpreter whose ``sys.path`` starts with that folder and holds neither the
repository root nor ``tests/``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STAGE_FOLDERS = ("generators", "filters", "cards", "loaders")
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "outputs", "*.egg-info", "__pycache__", ".pytest_cache", "*.pyc", ".whl", ".gl"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source") / "conceptforge"
    shutil.copytree(REPO, source, ignore=COPY_IGNORE)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = out.glob("conceptforge-*.whl")
    return path


@pytest.fixture(scope="module")
def site(wheel, tmp_path_factory) -> Path:
    """The wheel unpacked: what ``pip install`` puts in site-packages (scripts aside)."""
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def _isolated(code: str, site: Path, *, cwd: Path, block_bpy: bool = False) -> subprocess.CompletedProcess:
    """Run ``code`` in ``python -I`` (no PYTHONPATH, no script dir) with ``site`` first on sys.path."""
    prelude = f"import sys\nsys.path.insert(0, {str(site)!r})\n"
    if block_bpy:
        prelude += "sys.modules['bpy'] = None  # as if Blender's module were not installed\n"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-I", "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_wheel_installs_one_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {"conceptforge", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, top
    for folder in STAGE_FOLDERS:
        assert f"conceptforge/{folder}/__init__.py" in names
        assert not any(name.startswith(f"{folder}/") for name in names)
    assert not any(name.startswith(("tests/", "scripts/", "benchmarks/")) for name in names)
    assert "conceptforge/commands/__init__.py" in names and "conceptforge/__main__.py" in names
    assert "conceptforge/specs/presets/sub-cub-paper.yaml" in names  # package data travels too (the SUB paper preset)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "conceptforge = conceptforge.commands:main" in text


def test_every_module_imports_from_the_installed_package(wheel, site, tmp_path):
    modules = sorted(
        name[:-3].replace("/", ".").removesuffix(".__init__")
        for name in zipfile.ZipFile(wheel).namelist()
        if name.endswith(".py") and name.startswith("conceptforge/")
    )
    assert len(modules) > 60
    done = _isolated(
        f"""
        import importlib, json, os
        repo = {str(REPO)!r}
        assert not any(p and os.path.realpath(p) in (repo, os.path.join(repo, "tests")) for p in sys.path), sys.path
        files = {{}}
        for name in {modules!r}:
            module = importlib.import_module(name)
            files[name] = module.__file__
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("generators", "filters", "cards", "loaders", "tests"))
        print(json.dumps({{"files": files, "leaked": leaked, "bpy": sys.modules.get("bpy") is not None}}))
        """,
        site,
        cwd=tmp_path,
        block_bpy=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    outside = {name: path for name, path in report["files"].items() if not path.startswith(str(site))}
    assert not outside, f"imported from outside the wheel: {outside}"
    assert report["leaked"] == [] and report["bpy"] is False


def test_help_lists_every_sub_command(site, tmp_path):
    done = _isolated(
        "import runpy\nsys.argv = ['conceptforge', '--help']\nrunpy.run_module('conceptforge', run_name='__main__')",
        site,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    for command in (
        "generate",
        "filter",
        "select-candidates",
        "train-oracle",
        "publish",
        "evaluate",
        "leaderboard",
        "annotate",
        "assemble",
        "status",
    ):
        assert f"    {command} " in done.stdout, command
    for group, names in {
        "generate": ("sub", "conceptbed", "binding"),
        "filter": ("sub",),
        "evaluate": ("sub", "binding", "conceptbed", "compmap"),
    }.items():
        code = f"from conceptforge.commands import main\nsys.exit(main([{group!r}, '--help']))"
        listed = _isolated(code, site, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert all(f"    {name} " in listed.stdout for name in names), listed.stdout


def test_user_modules_named_like_our_folders_do_not_shadow(site, tmp_path):
    """``python -m conceptforge`` puts the working directory first on sys.path; ours are namespaced."""
    for name in (*STAGE_FOLDERS, "scripts"):
        (tmp_path / f"{name}.py").write_text("raise SystemExit('imported the user\\'s own module')\n")
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "conceptforge", "evaluate", "binding", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "--dataset" in done.stdout and "--clip-model" in done.stdout


def test_console_script_of_this_environment():
    """The ``conceptforge`` command pip made for this venv (``[project.scripts]``)."""
    script = Path(sys.executable).parent / "conceptforge"
    if not script.exists():
        pytest.skip("the project is not installed in this interpreter's environment")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "select-candidates" in done.stdout
    bad = subprocess.run(
        [str(script), "annotate", "/nonexistent-dataset", "--study", "sub-faithfulness"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: conceptforge annotate: argument DATASET_DIR: /nonexistent-dataset does not exist (see conceptforge annotate --help)"
    ]
