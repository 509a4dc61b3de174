"""Each constant is defined once: a value two modules each spell out drifts (``DEFAULT_CLIP`` was
ViT-B/32 in one module and ViT-L/14 in another; ConceptBed's categories stood in two orders).

A top-level UPPER_CASE name may be defined in one library module only, except the names every
benchmark package declares for itself by convention (its assembler, card sections, features…);
and no two modules may define a constant of the same value under any name of that convention.
Read from the source with ``ast``, nothing is imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.core.test_layering import library_modules

#: Names each benchmark's own module declares (one per benchmark, different values by design).
PER_BENCHMARK = {
    "ASSEMBLER",
    "CARD_SECTIONS",
    "CHUNK_SIZE",
    "CITATION",
    "COLUMNS",
    "COLUMN_DOCS",
    "DESCRIPTION",
    "FEATURES",
    "GENERATOR",
    "PRESETS",
    "SPLITS",
}


def top_level_constants() -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for module, path in library_modules().items():
        if ".testing" in module:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign):
                names, value = [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                names, value = [node.target.id], node.value
            else:
                continue
            for name in names:
                if name.lstrip("_").isupper() and len(name.lstrip("_")) > 1:
                    found[name].append((module, ast.unparse(value)))
    return found


def test_no_constant_is_defined_in_two_modules():
    twice = []
    for name, places in top_level_constants().items():
        modules = sorted({module for module, _ in places})
        if len(modules) < 2:
            continue
        values = [value for _, value in places]
        if name not in PER_BENCHMARK or len(set(values)) < len(values):
            twice.append(f"{name}: {', '.join(modules)}")
    assert twice == [], "define it once and import it:\n" + "\n".join(twice)


def test_the_check_sees_a_duplicate(tmp_path):
    """The rule itself: the same name with the same value in two modules is reported."""
    from tests.core import test_one_definition as rule

    places = {"X_DEFAULT": [("a", "'v'"), ("b", "'v'")]}
    original = rule.top_level_constants
    try:
        rule.top_level_constants = lambda: places
        try:
            rule.test_no_constant_is_defined_in_two_modules()
        except AssertionError as error:
            assert "X_DEFAULT: a, b" in str(error)
        else:
            raise AssertionError("a constant defined twice was not reported")
    finally:
        rule.top_level_constants = original
