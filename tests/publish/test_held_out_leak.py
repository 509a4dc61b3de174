"""A planted held-out leak (a gen-split composition in a train picture) is warned about where a
person looks, not only counted in the card's table (issue 39.5): at assembly (the card is
rendered) and in ``publish --dry-run``'s summary."""

from __future__ import annotations

import logging

import pytest
from publish_helpers import binding_release_with_metadata, run_publish

from conceptforge.cards.validity import held_out_leaks

LEAK = "config single-object: gen compositions in train pictures: 2 of 8 items hold a held-out composition"


def _release(out, *, leak: bool):
    # "red cube" is a gen composition (generators/binding/compositions.py): in train it is a leak
    train = ["blue cube", "gray sphere", "yellow sphere", "red cube" if leak else "purple sphere"]
    out, _, metadata = binding_release_with_metadata(out, train)
    return out, metadata


@pytest.mark.heavy
def test_a_planted_leak_is_warned_at_assembly_and_in_the_dry_run(tmp_path, client_env, caplog):
    with caplog.at_level(logging.WARNING, logger="conceptforge"):
        leaky, metadata = _release(tmp_path / "leaky", leak=True)
    assert held_out_leaks(metadata.validity) == [LEAK]  # the card's own count: 2 "red cube" train rows
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [f"held-out compositions leak: {LEAK} (see the card's Validity section)"]
    done = run_publish(client_env, leaky, "org/leaky", "v1.0.0", "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"warning: held-out compositions leak: {LEAK} (the card's Validity section)" in done.stdout.splitlines()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="conceptforge"):
        clean, metadata = _release(tmp_path / "clean", leak=False)
    assert held_out_leaks(metadata.validity) == [] and not caplog.records
    done = run_publish(client_env, clean, "org/clean", "v1.0.0", "--dry-run")
    assert done.returncode == 0 and "compositions leak" not in done.stdout + done.stderr  # (the tmp path says "leak")
