"""The SUB spec walk (issue 46): bad specs through the command line, each refused in one line that
names the field path and the fix, with exit status 2 and nothing written.

Every case runs ``conceptforge.commands:main`` (the console script's function) in a process of
its own, forked from one driver that imported conceptforge once (a fresh ``conceptforge``
process per case costs seconds of torch import each); one case also runs the installed
``conceptforge`` executable itself.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.specs.sub_synthetic import mug_spec_text, save_mug_dataset
from tests.specs.walk_cases import edited, read_cases

REPO = Path(__file__).resolve().parents[2]

#: name -> (spec text, the field path the line names, words of the fix it gives); walk_sub_cases.yaml
CASES = {
    case["name"]: (edited(mug_spec_text(**case.get("blocks", {})), case), case["path"], case["fix"])
    for case in read_cases("sub")
}

DRIVER = r"""
import json, os, sys
from conceptforge.commands import main
import conceptforge.commands.generate.sub
import conceptforge.generators.sub.stage  # the heavy imports once, before the forks

results = {}
for name, argv, log in json.loads(sys.argv[1]):
    pid = os.fork()
    if pid == 0:
        with open(log + ".out", "w") as out, open(log + ".err", "w") as err:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = os.fdopen(1, "w", closefd=False)
            sys.stderr = os.fdopen(2, "w", closefd=False)
            code = main(argv)
            sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    results[name] = os.waitstatus_to_exitcode(status)
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    root = tmp_path_factory.mktemp("walk-sub")
    save_mug_dataset(root / "mugs")
    cases, expected = [], {}
    for index, (name, (text, _, _)) in enumerate(CASES.items()):
        spec = root / f"bad{index}.yaml"
        spec.write_text(text)
        out = root / f"out{index}"
        cases.append([name, ["generate", "sub", "--spec", str(spec), "--out", str(out)], str(root / f"log{index}")])
        expected[name] = (out, root / f"log{index}")
    before = sorted(p.name for p in root.iterdir())
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "", "HOME": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(cases)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    after = sorted(p.name for p in root.iterdir() if not p.name.startswith("log"))
    return {"codes": codes, "logs": expected, "before": before, "after": after, "root": root, "env": env}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_spec_is_one_line_naming_the_field_and_the_fix(walk, name):
    _, path, fix = CASES[name]
    out, log = walk["logs"][name]
    # progress logging (``HH:MM:SS INFO …``, e.g. the source read before its classes are checked)
    # is not part of the error; everything else is the one error line
    lines = Path(f"{log}.err").read_text().strip().splitlines()
    stderr = [line for line in lines if not re.match(r"^\d\d:\d\d:\d\d INFO ", line)]
    assert walk["codes"][name] == 2, stderr
    assert len(stderr) == 1, stderr
    assert stderr[0].startswith("error: ") and f": {path} " in stderr[0] and fix in stderr[0], stderr[0]
    assert not out.exists()  # nothing written


def test_nothing_is_left_beside_the_specs(walk):
    assert walk["after"] == walk["before"]


def test_the_installed_command_refuses_a_bad_spec_the_same_way(walk):
    root = walk["root"]
    spec, out = root / "bad0.yaml", root / "out-installed"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "conceptforge"), "generate", "sub", "--spec", str(spec), "--out", str(out)],
        cwd=root,
        env=walk["env"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {spec}: colours: unknown field; remove it or check its spelling "
        "(conceptforge spec schema METHOD lists the fields)"
    ]
    assert not out.exists()
