"""``--dtype`` is spelled one way across commands (issue 39.6): every command's flag takes the one
choices list (torch's names), and the spellings each command used before are read as aliases."""

from __future__ import annotations

import pytest

from conceptforge import argtypes as at
from conceptforge.commands import build_parser
from conceptforge.commands.base import walk_parsers


def _dtype_flags():
    found = {}
    for path, parser in walk_parsers(build_parser()):
        for action in parser._actions:
            if "--dtype" in action.option_strings:
                found[" ".join(path)] = action
    return found


def test_every_dtype_flag_shares_one_choices_list():
    flags = _dtype_flags()
    # evaluate, its per-benchmark aliases where they have the flag, generate sub and generate conceptbed
    assert {"evaluate", "generate sub", "generate conceptbed"} <= set(flags)
    for command, action in flags.items():
        assert action.type is at.dtype and tuple(action.choices) == at.DTYPES == (
            "auto", "float32", "float16", "bfloat16"
        ), command  # fmt: skip


@pytest.mark.parametrize(
    ("command", "flag", "value", "expected"),
    [
        ("evaluate", "--dtype", "fp16", "float16"),  # evaluate took only float16
        ("evaluate", "--dtype", "bfloat16", "bfloat16"),
        ("generate sub", "--dtype", "float16", "float16"),  # generate sub took only fp16
        ("generate sub", "--dtype", "bf16", "bfloat16"),
        ("generate conceptbed", "--dtype", "bfloat16", "bfloat16"),
        ("generate conceptbed", "--mixed-precision", "no", "float32"),  # the old flag and value
    ],
)
def test_old_and_new_spellings_read_the_same(command, flag, value, expected):
    parser = dict((" ".join(path), p) for path, p in walk_parsers(build_parser()))[command]
    action = parser._option_string_actions[flag]
    assert parser._get_values(action, [value]) == expected  # argparse's own type and choices check


def test_an_unknown_dtype_names_the_choices_and_the_aliases():
    with pytest.raises(Exception, match=r"expected one of auto, float32, float16, bfloat16 \(aliases: fp32=float32"):
        at.dtype("half")
