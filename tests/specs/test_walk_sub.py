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

REPO = Path(__file__).resolve().parents[2]

#: name -> (spec text, the field path the line names, words of the fix it gives)
CASES = {
    "unknown field": (mug_spec_text() + "colours: [red, blue]\n", "colours:", "unknown field; remove it"),
    "empty groups": (
        mug_spec_text(groups="groups: {}\n"),
        "groups:",
        "at least 1 item",
    ),
    "group of one value": (
        mug_spec_text(
            groups="groups:\n"
            "  body_colour: {category: colour, phrase: 'a {value} body', values: [red]}\n"
            "  surface_pattern: {category: pattern, phrase: 'a {value} surface', values: [solid, striped, dotted]}\n"
            "  handle_shape: {category: shape, phrase: 'a handle', values: [round, square, ring]}\n"
        ),
        "groups.body_colour.values:",
        "at least two mutually exclusive values",
    ),
    "unknown group": (
        mug_spec_text(substitutions="substitutions: ['colour::red']\n"),
        "substitutions[0]:",
        "unknown group 'colour'; known groups: body_colour, handle_shape, surface_pattern",
    ),
    "value outside its group": (
        mug_spec_text(substitutions="substitutions: ['body_colour::green']\n"),
        "substitutions[0]:",
        "'green' is not a value of group 'body_colour' (red, blue, white, black)",
    ),
    "unknown category": (
        mug_spec_text().replace("category: pattern", "category: patern"),
        "groups.surface_pattern.category:",
        "'colour', 'shape' or 'pattern'",
    ),
    "hub source without revision": (
        mug_spec_text(source="source:\n  kind: dataset\n  dataset: {hub: my-lab/mugs}\n"),
        "source.dataset.revision:",
        "needs a pinned revision",
    ),
    "template names an unknown field": (
        mug_spec_text().replace(
            "colour: {reference: 'A photo of a {class}", "colour: {reference: 'A photo of a {bird}"
        ),
        "templates.colour.reference:",
        "unknown field {bird}; a template may use {class}, {guide}, {phrase}",
    ),
    "class without images": (
        mug_spec_text(classes="classes: [Diner_Mug, Teapot]\n"),
        "classes[1]:",
        "class 'Teapot' has no images in mugs",
    ),
    "tmin above tmax": (
        mug_spec_text().replace("pattern: {k: 10, tmin: 0.2, tmax: 0.6}", "pattern: {k: 10, tmin: 0.7, tmax: 0.6}"),
        "tdg.pattern:",
        "tmin 0.7 is above tmax 0.6; swap them",
    ),
    "value without its column": (
        mug_spec_text().replace("values: [red, blue, white, black]", "values: [red, blue, white, black, green]"),
        "groups.body_colour.values:",
        "no column 'body_colour::green'",
    ),
    "class listed twice": (
        mug_spec_text(classes="classes: [Diner_Mug, Travel_Mug, Diner_Mug]\n"),
        "classes[2]:",
        "'Diner_Mug' is listed twice; remove one",
    ),
    "category without templates": (
        mug_spec_text(
            templates="templates:\n"
            "  colour: {reference: 'A photo of a {class} with {phrase}', guidance: 'A photo of a {guide} with {phrase}'}\n"
            "  shape: {reference: 'A photo of a {class} with {phrase} like a {guide}', guidance: 'A photo of a {guide}'}\n"
        ),
        "templates.pattern:",
        "is required: a group of category pattern exists",
    ),
}

DRIVER = r"""
import json, os, sys
from conceptforge.commands import main
import conceptforge.commands.generate.sub  # the heavy imports once, before the forks

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
