"""Publishing without the Hub: offline mode and unreachable endpoints (issues 19 and 20.7).

The caller's environment must not decide whether the suite passes; offline mode must be named in
one line; a dry run validates everything local and says what it could not check.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from publish_helpers import REPO_ROOT, make_dataset, run_publish

REPO = "conceptforge-test/shapes"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_publishing_offline_is_refused_in_one_line(tmp_path, hub, client_env):
    directory = make_dataset(tmp_path / "v1")
    result = run_publish({**client_env, "HF_HUB_OFFLINE": "1"}, directory, REPO, "v1.0.0")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: offline mode (HF_HUB_OFFLINE=1) blocks publishing; the release is valid locally — unset "
        "HF_HUB_OFFLINE to publish, or pass --dry-run to check it without the Hub"
    ]
    assert hub.requests == []


def test_offline_dry_run_validates_everything_local(tmp_path, hub, client_env):
    """Before: the dry run failed on reading the remote tags and validated nothing."""
    directory = make_dataset(tmp_path / "v1", shard=2500)
    env = {**client_env, "HF_HUB_OFFLINE": "1"}
    result = run_publish(env, directory, REPO, "v1.0.0", "--dry-run")
    assert result.returncode == 0, result.stderr[-2000:]
    head = result.stdout.splitlines()[0]
    assert head.startswith(f"dry run: {REPO} v1.0.0 is valid locally (6 files, ")
    assert "not checked, offline mode (HF_HUB_OFFLINE=1): whether the version is new and above the latest" in head
    assert hub.requests == []

    # Local problems are still found: a shard gone missing after assembly.
    next((directory / "data").glob("train-00001-*.parquet")).unlink()
    broken = run_publish(env, directory, REPO, "v1.0.0", "--dry-run")
    assert broken.returncode == 2
    assert broken.stderr.strip().splitlines()[-1].startswith("error: the dataset card")
    assert hub.requests == []

    bad_version = run_publish(env, make_dataset(tmp_path / "v2"), REPO, "1.0", "--dry-run")
    assert bad_version.returncode == 2 and "vMAJOR.MINOR.PATCH" in bad_version.stderr


def test_dry_run_with_an_unreachable_hub_says_what_it_could_not_check(tmp_path, client_env):
    directory = make_dataset(tmp_path / "v1")
    env = {**client_env, "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    result = run_publish(env, directory, REPO, "v1.0.0", "--dry-run")
    assert result.returncode == 0, result.stderr[-2000:]
    head = result.stdout.splitlines()[0]
    assert head.startswith(f"dry run: {REPO} v1.0.0 is valid locally (5 files, ")
    assert "not checked, the Hub could not be read (" in head


@pytest.mark.heavy
def test_suite_passes_whatever_hf_variables_the_caller_set():
    """Before: HF_HUB_OFFLINE=1 in the caller's shell made the in-process publish tests fail."""
    caller = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HF_")},
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
        "HF_TOKEN": "hf_notavalidtoken",
        "HF_HUB_DISABLE_XET": "0",
    }
    caller.pop("HF_HUB_DISABLE_XET")  # unset, as on a fresh machine
    tests = [
        "tests/publish/test_publish_hub.py::test_existing_and_lower_versions_are_refused",
        "tests/publish/test_publish_hub.py::test_dry_run_changes_nothing_and_reports_the_plan",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=REPO_ROOT,
        env=caller,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "2 passed" in result.stdout


def test_dry_run_of_a_truncated_parquet_is_one_line(tmp_path):
    """Before: the first shard of a split, cut short, ended the dry run in an ArrowInvalid traceback."""
    directory = make_dataset(tmp_path / "v1")
    shard = sorted((directory / "data").glob("train-*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    result = run_publish({**os.environ, "HF_HUB_OFFLINE": "1"}, directory, REPO, "v1.0.0", "--dry-run")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(f"error: {shard} is not a readable parquet file (Parquet magic bytes not found")


def test_dry_run_checks_each_shards_real_columns(tmp_path, hub, client_env):
    """Before: only the feature metadata embedded in the shard was compared with the card, so a
    shard with an extra column passed and ``load_dataset`` failed on the Hub."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = make_dataset(tmp_path / "v1")
    shard = next((directory / "data").glob("train-*.parquet"))
    table = pq.read_table(shard)
    widened = table.append_column("note", pa.array(["x"] * table.num_rows))
    assert widened.schema.metadata == table.schema.metadata  # the embedded features still say 4 columns
    pq.write_table(widened, shard)
    env = {**client_env, "HF_HUB_OFFLINE": "1"}
    result = run_publish(env, directory, REPO, "v1.0.0", "--dry-run")
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(errors) == 1, result.stderr
    assert errors[0].startswith("error: the dataset card is not valid: ")
    assert f"{shard.relative_to(directory)}: column(s) note not in the card's features" in errors[0]


def test_a_local_path_in_a_model_id_column_is_refused(tmp_path):
    from datasets import Features, Value

    from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card
    from conceptforge.cards.validate import dataset_dir_problems

    features = Features({"item_id": Value("string"), "model_id": Value("string")})
    metadata = DatasetMetadata(
        pretty_name="Model ids", license="cc-by-4.0", summary="x", task_categories=["text-to-image"]
    )

    def build(name: str, model_id: str):
        return assemble_dataset_dir(
            tmp_path / name,
            splits={"test": lambda: iter([{"item_id": "a", "model_id": model_id}])},
            features=features,
            render_card=lambda stats: render_card(metadata, features, stats, has_grid=False),
        )

    build("hub-id", "black-forest-labs/FLUX.1-dev")
    build("elided", ".../tiny-flux")
    build("local", "/home/me/models/tiny-flux")
    assert dataset_dir_problems(tmp_path / "hub-id") == []
    assert dataset_dir_problems(tmp_path / "elided") == []
    assert dataset_dir_problems(tmp_path / "local") == [
        "data/test-00000-of-00001.parquet: column model_id holds a local path (/home/me/models/tiny-flux): published "
        "data must name a model by its Hub id or its folder name (.../NAME); re-assemble with this version of conceptforge"
    ]


def test_a_dataset_that_lost_its_grid_or_has_an_empty_split_is_not_published(tmp_path, hub, client_env):
    """Issue 32: without grid.png the release card was rendered without the grid and published; a
    0-row split (a ConceptBed spec without captions) passed the dry run but load_dataset refuses it."""
    import pyarrow.parquet as pq

    from conceptforge.cards.validate import dataset_dir_problems

    env = {**client_env, "HF_HUB_OFFLINE": "1"}
    lost = make_dataset(tmp_path / "lost")
    (lost / "grid.png").unlink()
    result = run_publish(env, lost, REPO, "v1.0.0", "--dry-run")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: the dataset card is not valid: the card shows grid.png but the directory has none "
        "(reassemble the dataset to make it again)"
    ]

    # assembling an empty split leaves it out: the dataset loads and passes
    kept = make_dataset(tmp_path / "kept", n_test=0)
    assert sorted(p.name.split("-")[0] for p in (kept / "data").glob("*.parquet")) == ["train"]
    assert "split: test" not in (kept / "README.md").read_text() and not dataset_dir_problems(kept)
    import datasets

    assert set(datasets.load_dataset(str(kept))) == {"train"}
    # an empty split in a directory made elsewhere (or by an earlier version) is refused
    empty = make_dataset(tmp_path / "empty", n_test=1)
    test_file = next((empty / "data").glob("test-*.parquet"))
    table = pq.read_table(test_file)
    pq.write_table(table.slice(0, 0), test_file)
    card = (empty / "README.md").read_text()
    (empty / "README.md").write_text(card.replace("num_examples: 1\n", "num_examples: 0\n"))
    assert "split 'test' has no rows (load_dataset refuses it); reassemble without it" in dataset_dir_problems(empty)
