"""A release made before local folders were fingerprinted records a local FLUX as ``local``; one
regenerated now records ``local-sha256:…`` (CRO2). ``verify`` takes the two for the same model in
the columns a generator names (the folder given with ``--weights`` is checked against the recorded
fingerprint before anything runs), and only there."""

from __future__ import annotations

from types import SimpleNamespace

from conceptforge.generators.rebuild import tolerance
from conceptforge.generators.verify import Key, compare_rows


def test_an_earlier_local_revision_matches_a_fingerprint_only_in_revision_columns():
    rebuilt = SimpleNamespace(path_columns=(), revision_columns=("model_revision",), rule=tolerance("tests"))
    key = Key("default", "test", "a")
    released = {"model_revision": "local", "note": "local"}
    regenerated = {"model_revision": "local-sha256:0123456789abcdef", "note": "local-sha256:0123456789abcdef"}
    found = compare_rows(key, released, regenerated, rebuilt)
    assert [(d.column, d.detail) for d in found] == [
        ("note", "note: released 'local', regenerated 'local-sha256:0123456789abcdef'")
    ]
    # a Hub commit is not a local folder: still a difference
    found = compare_rows(key, {"model_revision": "local"}, {"model_revision": "a" * 40}, rebuilt)
    assert [d.column for d in found] == ["model_revision"]
