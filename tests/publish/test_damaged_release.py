"""A dataset folder with a split's parquet files missing, or a damaged shard, fails in one line
that names the split or the file (EX13, R_ND13): not the datasets library's "Couldn't infer the
same data file format for all splits", nor a parquet error without a file name."""

from __future__ import annotations

import shutil

import pytest
from publish_helpers import binding_release

from conceptforge.commands import main
from conceptforge.errors import DataFormatError, DataNotFoundError
from conceptforge.loaders.harness.data import load_split

EXPORT = ["--repo-id", "org/binding", "--version", "v1.0.0"]
MAGIC = "Parquet magic bytes not found in footer. Either the file is corrupted or this is not a parquet file."


def _error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err  # the library's own "Failed to read file" log line is held back
    return err[0]


@pytest.fixture(autouse=True)
def _own_datasets_cache(tmp_path, monkeypatch):
    """A fresh datasets cache: an identical release read by an earlier test in this process is in the
    shared one (keyed by the files' content), and reading a damaged copy would then not read it."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    folder, _ = binding_release(tmp_path_factory.mktemp("damaged") / "binding")
    return folder


def test_a_split_without_its_parquet_files_is_named(release, tmp_path, capsys):
    folder = tmp_path / "binding"
    shutil.copytree(release, folder)
    for split in ("val", "gen"):
        (folder / "data" / f"{split}-00000-of-00001.parquet").unlink()
    expected = (
        f"{folder} lacks the parquet files of split(s) val, gen: the card lists them but no file under data/ "
        "matches; restore the files or reassemble the dataset (`conceptforge assemble OUT --force`)"
    )
    assert main(["export", str(folder), *EXPORT]) == 2
    assert _error_line(capsys) == f"error: {expected}"
    assert not (folder / "exports").exists()
    with pytest.raises(DataNotFoundError) as raised:  # what evaluate reads a local folder with
        load_split(folder, "train")
    assert str(raised.value) == expected


def test_a_damaged_shard_is_named(release, tmp_path, capsys):
    folder = tmp_path / "binding"
    shutil.copytree(release, folder)
    shard = folder / "data" / "val-00000-of-00001.parquet"
    shard.write_bytes(shard.read_bytes()[:300])  # cut: no footer
    expected = f"{shard} is not a readable parquet file ({MAGIC}): regenerate or reassemble the dataset"
    assert main(["export", str(folder), *EXPORT]) == 2
    assert _error_line(capsys) == f"error: {expected}"
    assert not (folder / "exports").exists()
    with pytest.raises(DataFormatError) as raised:
        load_split(folder, "gen")
    assert str(raised.value) == expected
    assert main(["diff", str(release), str(folder)]) == 2  # the release diff reads every row
    assert _error_line(capsys) == f"error: {expected}"
