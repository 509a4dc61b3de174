"""A planted held-out leak (a gen-split composition in a train picture) is warned about where a
person looks, not only counted in the card's table (issue 39.5): at assembly (the card is
rendered) and in ``publish --dry-run``'s summary."""

from __future__ import annotations

import logging

from publish_helpers import run_publish

from conceptforge.cards import DatasetMetadata, render_card
from conceptforge.cards.dataset_dir import assemble_dataset_dir
from conceptforge.cards.validity import held_out_leaks
from conceptforge.generators.binding import repo as binding_repo
from conceptforge.generators.binding.validity import binding_validity, config_validity
from conceptforge.testing.synthetic import COLOURS, SHAPES, binding_features, single_object_rows

LEAK = "config single-object: gen compositions in train pictures: 2 of 8 items hold a held-out composition"


def _release(out, *, leak: bool):
    labels = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    # "red cube" is a gen composition (generators/binding/compositions.py): in train it is a leak
    train = ["blue cube", "gray sphere", "yellow sphere", "red cube" if leak else "purple sphere"]
    splits = {
        "train": single_object_rows(train, 2, 1, labels),
        "val": single_object_rows(["brown cube"], 2, 2, labels),
        "gen": single_object_rows(["red cube"], 2, 3, labels),
    }
    part = config_validity("single-object", lambda split: iter(splits[split]), list(splits))
    metadata = DatasetMetadata(
        pretty_name="Binding (tiny)",
        license="cc-by-4.0",
        summary="Tiny single-object binding release.",
        task_categories=["zero-shot-image-classification"],
        language=["en"],
        uses=binding_repo.USES,
        out_of_scope_use=binding_repo.OUT_OF_SCOPE,
        bias_risks_limitations=binding_repo.BIAS_RISKS,
        annotations=binding_repo.ANNOTATIONS,
        personal_data=binding_repo.PERSONAL_DATA,
        validity=binding_validity({"single-object": part}),
        provenance={"generator": "tests.publish (tiny binding)"},
    )
    features = binding_features()
    assemble_dataset_dir(
        out,
        splits={name: (lambda rows=rows: iter(rows)) for name, rows in splits.items()},
        features=features,
        render_card=lambda stats: render_card(metadata, features, stats, has_grid=False),
    )
    return out, metadata


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
