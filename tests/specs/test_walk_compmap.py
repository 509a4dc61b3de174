"""Bad CompMap specs through the command line: exit 2, one line naming the field path and the
fix, nothing written (the results folder and the cache are absent afterwards).

Each spec runs through ``conceptforge.commands.main`` in this process (the entry point of the
``conceptforge`` script: parsing, checks, one ``error:`` line); one runs as a real subprocess of
the installed script, and all of them do under ``-m heavy`` (a subprocess imports torch: seconds each).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.commands import main
from tests.specs.compmap_data import write_gadgets, write_shape_pairs

LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING) ")
HEAD = "method: compmap\nspec_version: 1\nname: bad\n"
CZSL = "czsl:\n  source:\n    path: shapes\n  attribute_column: texture\n  object_column: shape\n"
FEW = "few_shot:\n  source:\n    path: gadgets\n  attribute_table: gadgets.csv\n  split_column: split\n"

#: (id, the spec after the envelope, what the one error line must hold: field path and fix)
BAD_SPECS = [
    ("unknown-field", CZSL + "  atribute_column: t\n", "czsl.atribute_column: unknown field; remove it"),
    ("no-protocol", "", "(top level): give exactly one protocol: czsl"),
    ("both-protocols", CZSL + FEW, "few_shot: give exactly one protocol: czsl (attribute-object pairs) or few_shot"),
    (
        "two-sources",
        CZSL + "  mit_states:\n    folder: mit\n",
        "czsl: give exactly one of mit_states (the paper's folder layout) or source (a datasets dataset) (got mit_states and source)",
    ),
    (
        "hub-without-revision",
        "czsl:\n  source:\n    hub: someone/pairs\n",
        "czsl.source.revision: a Hub source needs a pinned revision (a tag or commit); add e.g. 'revision: v1.0.0'",
    ),
    ("one-way", FEW + "  ways: [1, 5]\n", "few_shot.ways[0]: Input should be greater than or equal to 2 (got 1)"),
    (
        "attribute-in-two-groups",
        FEW + "  attribute_groups:\n    colour: [colour::red, colour::blue]\n    finish: [colour::red]\n",
        "few_shot.attribute_groups.finish[0]: attribute 'colour::red' is already in group 'colour'; groups are mutually exclusive",
    ),
    (
        "empty-group",
        FEW + "  attribute_groups:\n    colour: []\n",
        "few_shot.attribute_groups.colour: is empty; list its attributes or remove it",
    ),
    (
        "group-attribute-not-in-table",
        FEW
        + "  attribute_groups:\n    colour: [colour::red, colour::blue, colour::green]\n    finish: [finish::matte, finish::glossy]\n",
        "few_shot.attribute_groups.colour[2]: the table has no attribute 'colour::green'",
    ),
    (
        "no-table",
        "few_shot:\n  source:\n    path: gadgets\n",
        "few_shot.attribute_table: a dataset source needs its class x attribute table",
    ),
    ("bad-templates", CZSL + "  templates: a4\n", "czsl.templates: 'a4': use paper, a3 or a3:<ids>"),
    (
        "template-without-slot",
        CZSL + "  template: a photo\n",
        "czsl.template: 'a photo' must hold exactly one {} for the concept",
    ),
    (
        "phrase-without-value",
        FEW + "  attribute_phrase: 'gadget in {group}'\n",
        "few_shot.attribute_phrase: has no {value}",
    ),
    ("missing-column", CZSL.replace("texture", "colour"), "czsl.attribute_column: the dataset has no column 'colour'"),
    (
        "unseen-pair-not-in-data",
        CZSL + "  split_column: null\n  unseen_pairs: ['plain circle', 'wavy circle']\n",
        "czsl.unseen_pairs[1]: no image is labelled 'wavy circle'; name a pair of the dataset",
    ),
    (
        "split-column-and-rule",
        CZSL + "  unseen_pairs: ['plain circle', 'striped circle']\n",
        "czsl.unseen_pairs: give either split_column or unseen_pairs (with split_column: null), not both",
    ),
    (
        "no-data-folder",
        "czsl:\n  mit_states: {}\n",
        "--data-dir is required: the CUB_200_2011 or MIT-States folder (the spec names no folder)",
    ),
    ("sub-spec", "", "method: this is a sub spec, not a compmap spec"),
]


@pytest.fixture(scope="module")
def walk_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("compmap-walk")
    write_shape_pairs(root / "shapes")
    write_gadgets(root)
    for name, body, _ in BAD_SPECS:
        head = HEAD.replace("compmap", "sub") if name == "sub-spec" else HEAD
        (root / f"{name}.yaml").write_text(head + body)
    return root


def _argv(name: str) -> list[str]:
    return [
        "evaluate",
        "compmap",
        "--spec",
        f"{name}.yaml",
        "--output",
        f"out-{name}/r.json",
        "--cache-dir",
        f"cache-{name}",
    ]


def _nothing_written(root: Path, name: str) -> None:
    assert not (root / f"out-{name}").exists() and not (root / f"cache-{name}").exists()
    assert not list(root.glob("compmap-*.json"))


@pytest.mark.parametrize(("name", "body", "expected"), BAD_SPECS, ids=[case[0] for case in BAD_SPECS])
def test_bad_spec_is_one_line_and_writes_nothing(walk_root, name, body, expected, monkeypatch, capsys, hub_offline):
    monkeypatch.chdir(walk_root)
    assert main(_argv(name)) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in captured.err, captured.err
    assert expected in lines[0], lines[0]
    assert not captured.out
    _nothing_written(walk_root, name)


def _script(root: Path, name: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    script = Path(sys.executable).with_name("conceptforge")
    return subprocess.run([str(script), *_argv(name)], capture_output=True, text=True, cwd=root, env=env, timeout=300)


def _check_script(root: Path, name: str, expected: str) -> None:
    proc = _script(root, name)
    assert proc.returncode == 2, proc.stderr[-2000:]
    # the command's progress log (``HH:MM:SS INFO …``, e.g. the rows read before a column is
    # found missing) is not part of the error: the error is the one other line
    lines = [line for line in proc.stderr.strip().splitlines() if not LOG_LINE.match(line)]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], proc.stderr
    _nothing_written(root, name)


def test_a_bad_spec_through_the_installed_script(walk_root):
    name, _, expected = BAD_SPECS[6]  # an attribute in two groups
    _check_script(walk_root, name, expected)


@pytest.mark.heavy
@pytest.mark.parametrize(("name", "body", "expected"), BAD_SPECS, ids=[case[0] for case in BAD_SPECS])
def test_every_bad_spec_through_the_installed_script(walk_root, name, body, expected):
    _check_script(walk_root, name, expected)
