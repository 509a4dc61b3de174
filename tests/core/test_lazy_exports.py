"""Benchmark packages import each public name on first use (conceptforge/lazy_exports.py).

Checked in fresh interpreters, since what a test process has already imported hides what an
import costs: the spec side must not pull torch in, and an image without ``datasets`` (the GPU
device check's) must still import the model code and say what is missing for the rest.
"""

from __future__ import annotations

import subprocess
import sys


def _python(code: str, *argv: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_a_name_imports_only_its_own_module():
    out = _python(
        "import sys, conceptforge.generators.sub as sub, conceptforge.loaders.compmap as cm\n"
        "print('torch' in sys.modules)\n"
        "print(sub.load_cub.__module__, 'torch' in sys.modules)\n"
        "print(sub.TDGParams.__module__, 'torch' in sys.modules, 'datasets' in sys.modules)\n"
        "print(cm.accuracy.__module__)\n"
        "print(sorted(cm.__all__) == sorted(dir(cm)), 'generate' in dir(sub))"
    )
    assert out.splitlines() == [
        "False",
        "conceptforge.cub.metadata False",
        "conceptforge.generators.sub.schedule False False",
        "conceptforge.loaders.compmap.metrics",
        "True True",
    ]


def test_without_datasets_the_model_code_imports_and_the_dataset_side_says_what_is_missing():
    out = _python(
        "import sys; sys.modules['datasets'] = None  # as on an image that lacks it\n"
        "import conceptforge.generators.sub as sub\n"
        "print(sub.TDGParams(tmax=0.6).tmax)\n"
        "from conceptforge.errors import DependencyMissingError\n"
        "try:\n    sub.FEATURES\nexcept DependencyMissingError as error:\n    print(error)\n"
        "try:\n    sub.nothing\nexcept AttributeError as error:\n    print(error)"
    )
    assert out.splitlines() == [
        "0.6",
        "conceptforge.generators.sub.FEATURES needs 'datasets': pip install conceptforge",
        "module 'conceptforge.generators.sub' has no attribute 'nothing'",
    ]


def test_generate_sub_help_and_dry_run_import_no_model_code(tmp_path):
    """``generate sub --help`` and ``--dry-run`` (what a user runs on a login node before a job)
    need the options and the plan, not torch or ``datasets``: the model code and the stage are
    imported where a run starts (generators/sub/options.py)."""
    for argv in (["generate", "sub", "--help"], ["generate", "sub", "--dry-run", "--out", str(tmp_path / "plan")]):
        out = _python(
            "import sys; from conceptforge.commands import main\n"
            "try:\n    rc = main(sys.argv[1:])\nexcept SystemExit as exit:\n    rc = exit.code\n"
            "heavy = sorted(m for m in ('torch', 'datasets', 'diffusers', 'transformers') if m in sys.modules)\n"
            "print('rc', rc, 'heavy', heavy)",
            *argv,
        )
        assert out.splitlines()[-1] == "rc 0 heavy []", out[-2000:]
    assert not (tmp_path / "plan").exists()  # a dry run writes nothing
