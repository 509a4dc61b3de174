"""Issue 24: annotate --apply never replaces or deletes a user's files, and keeps the card's sections."""

from __future__ import annotations

import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.filters.annotation.apply import apply_results
from conceptforge.filters.annotation.results import Rules
from conceptforge.filters.annotation.session import StudySettings, export_results, open_study
from tests.annotate.conftest import CONCEPTBED_FEATURES, conceptbed_rows
from tests.foreign_out import make_foreign_folder, snapshot

SECTIONS = {
    "uses": "Benchmarking concept learners.",
    "out_of_scope_use": "Judging people.",
    "bias_risks_limitations": "Synthetic images only.",
    "annotations": "No human labels upstream.",
}


@pytest.fixture(scope="module")
def documented_dataset(tmp_path_factory):
    from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card

    path = tmp_path_factory.mktemp("cbdoc") / "conceptbed"
    metadata = DatasetMetadata(pretty_name="documented", license="cc-by-nc-4.0", summary="synthetic", **SECTIONS)
    splits = {name: (lambda name=name: iter(conceptbed_rows(name))) for name in ("concept", "composition")}
    assemble_dataset_dir(
        path,
        splits=splits,
        features=CONCEPTBED_FEATURES,
        render_card=lambda stats: render_card(metadata, CONCEPTBED_FEATURES, stats, has_grid=False),
    )
    return path


@pytest.fixture
def results(documented_dataset, tmp_path):
    app, config = open_study(
        StudySettings(
            dataset_dir=documented_dataset, study="conceptbed-alignment", db=tmp_path / "db.sqlite", per_group=2
        )
    )
    for item_id in app.sample:
        app.db.add("a", item_id, {"rating": 4})
    return export_results(app, config, rules=Rules(), metric_specs=[])


def test_apply_into_someone_elses_folder_is_refused_untouched(documented_dataset, results, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    before = make_foreign_folder(mine)
    with pytest.raises(ConceptforgeError, match=r"^--apply .* not a conceptforge run"):
        apply_results(results, dataset_dir=documented_dataset, out_dir=mine)
    assert snapshot(mine) == before


def test_apply_keeps_the_cards_sections_and_replaces_only_its_own_files(documented_dataset, results, tmp_path):
    out = tmp_path / "validated"
    apply_results(results, dataset_dir=documented_dataset, out_dir=out)
    card = (out / "README.md").read_text()
    for text in SECTIONS.values():
        assert text in card, text
    assert "`conceptbed-alignment` study" in card
    (out / "data" / "notes.txt").write_text("mine")  # a user's file inside our folder
    apply_results(results, dataset_dir=documented_dataset, out_dir=out)  # a rerun replaces our files only
    assert (out / "data" / "notes.txt").read_text() == "mine"
    assert (out / "README.md").read_text() == card


def test_export_never_replaces_a_users_file(documented_dataset, results, tmp_path, capsys):
    """Issue 32: --export replaced whatever file had that name; an export of ours is replaced on a rerun."""
    from conceptforge.commands import main

    user = tmp_path / "notes.json"
    user.write_text('{"study": "my own", "todo": []}\n')
    before = user.read_bytes(), user.stat().st_mtime_ns
    base = ["annotate", str(documented_dataset), "--study", "conceptbed-alignment", "--db", str(tmp_path / "db.sqlite")]
    assert main([*base, "--export", str(user)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --export: {user} already exists and was not written by conceptforge; move it away or choose another name"
    ]
    assert (user.read_bytes(), user.stat().st_mtime_ns) == before
    export = tmp_path / "results.json"
    assert main([*base, "--export", str(export)]) == 0
    assert main([*base, "--export", str(export), "--annotated-only"]) == 0, capsys.readouterr().err
    assert '"annotated_only": true' in export.read_text()


def test_apply_after_a_full_disk_or_kill_9_reruns_into_its_own_folder(documented_dataset, results, tmp_path):
    """Issue 32: the rerun called apply's own half-written folder (or staging folder) foreign and refused."""
    import signal
    import subprocess
    import sys

    from conceptforge.errors import StoreError
    from tests.full_disk import full_disk

    with full_disk(tmp_path / "disk", size_kib=8192, free_kib=150) as disk:
        out = disk / "validated"
        with pytest.raises(StoreError, match=r"^cannot write the dataset to .*validated: No space left on device"):
            apply_results(results, dataset_dir=documented_dataset, out_dir=out)
        (disk / "filler").unlink()
        apply_results(results, dataset_dir=documented_dataset, out_dir=out)  # the rerun finishes in place
        assert (out / "README.md").exists() and not any(p.name.startswith(".staging") for p in out.iterdir())

    # kill -9 while staging: the staging folder it leaves is ours, removed by the rerun
    out = tmp_path / "killed"
    out.mkdir()
    script = (
        "import os, sys; from conceptforge.staging import make_staging; "
        "make_staging(sys.argv[1], '.staging-'); os.kill(os.getpid(), 9)"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True)
    assert killed.returncode == -signal.SIGKILL and [p.name[:9] for p in out.iterdir()] == [".staging-"]
    apply_results(results, dataset_dir=documented_dataset, out_dir=out)
    assert sorted(p.name for p in out.iterdir()) == [".conceptforge.json", "README.md", "data", "grid.png"]
