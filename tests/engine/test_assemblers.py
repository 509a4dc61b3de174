"""Assemblers are objects under stable stored names: the store keeps the name, and a process that
has only the store (``conceptforge assemble OUT``, another machine) gets the object back."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conceptforge.engine.assembly import Assembler, RepoAssembler, find_assembler, register_assembler
from conceptforge.errors import InvalidArgumentError

# the names every stored run of these stages carries (run.json "assembler", .work/assembly.json)
STORED = {
    "conceptforge.generators.sub.generate:assemble_from_store": Assembler,
    "conceptforge.generators.conceptbed.generate:assemble_from_store": Assembler,
    "conceptforge.generators.binding.generate:assemble_from_store": Assembler,
    "conceptforge.filters.sub_pipeline:assemble_from_store": Assembler,
    "conceptforge.generators.binding.generate:assemble_repo": RepoAssembler,
}


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_name_finds_its_assembler_in_a_fresh_process(name):
    # a fresh interpreter knows no registration: the name alone must lead to the object
    code = (
        "import sys; from conceptforge.engine.assembly import find_assembler; "
        f"a = find_assembler({name!r}); print(type(a).__name__, a.name, callable(a.assemble))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [STORED[name].__name__, name, "True"]


def test_stages_hand_the_engine_the_registered_objects():
    from conceptforge.generators.binding.repo import REPO_ASSEMBLER
    from conceptforge.generators.binding.stage import ASSEMBLER as binding
    from conceptforge.generators.sub.stage import ASSEMBLER as sub

    assert find_assembler(sub.name) is sub and find_assembler(binding.name) is binding
    assert find_assembler(REPO_ASSEMBLER.name) is REPO_ASSEMBLER and isinstance(REPO_ASSEMBLER, RepoAssembler)


def _one(store, staging, args):
    pass


def _other(store, staging, args):
    pass


def test_a_name_is_registered_once():
    first = register_assembler("tests.core.test_assemblers:_one", _one)
    assert register_assembler("tests.core.test_assemblers:_one", _one) is first
    with pytest.raises(ValueError, match="already registered"):
        register_assembler("tests.core.test_assemblers:_one", _other)


def test_an_unknown_name_is_one_clear_error():
    with pytest.raises(InvalidArgumentError, match="cannot load the assembler 'no.such.module:f'"):
        find_assembler("no.such.module:f")
    with pytest.raises(InvalidArgumentError, match="cannot load the assembler 'conceptforge.store:no_such_function'"):
        find_assembler("conceptforge.store:no_such_function")


@pytest.mark.parametrize(
    "stored",
    [
        "conceptforge.generators.binding.generate:assemble_from_store",
        "conceptforge.generators.binding.generate:assemble_repo",
        "conceptforge.generators.sub.generate:assemble_from_store",
        "conceptforge.generators.conceptbed.generate:assemble_from_store",
        "conceptforge.filters.sub_pipeline:assemble_from_store",
    ],
)
def test_names_stored_before_the_move_still_find_their_assembler(stored):
    """Runs stored by 12e3ff3 name modules that moved (issue #31); the alias table finds them."""
    from conceptforge.engine.assembly import MOVED_MODULES, Assembler, RepoAssembler, find_assembler

    found = find_assembler(stored)
    assert isinstance(found, (Assembler, RepoAssembler)) and found.name == stored
    assert stored.partition(":")[0] in MOVED_MODULES
