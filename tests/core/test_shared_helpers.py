"""The helpers that exist once: JSON and folder writers, shard names, sample grids, fingerprints."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from conceptforge.cards.dataset_dir import shard_name, shard_split, split_files, split_names
from conceptforge.cards.grid import grid_png, png_bytes
from conceptforge.cards.provenance import local_fingerprint
from conceptforge.files import write_directory_atomically, write_json


def test_write_json_nan_order_and_parents(tmp_path):
    path = write_json(tmp_path / "a" / "report.json", {"b": float("nan"), "a": [1.5, float("nan")], 3: "x"})
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == {"b": None, "a": [1.5, None], "3": "x"}  # valid JSON: NaN is null
    assert list(json.loads(text)) == ["b", "a", "3"]  # a report keeps its own order
    write_json(path, {"b": 1, "a": 2}, sort_keys=True)
    assert path.read_text(encoding="utf-8") == '{\n  "a": 2,\n  "b": 1\n}\n'
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temp file left


def test_write_directory_atomically_keeps_old_folder_on_failure(tmp_path):
    target = tmp_path / "model"
    write_directory_atomically(target, lambda d: (d / "config.json").write_text("1"), made_by="test")
    assert (target / "config.json").read_text() == "1"

    def broken(folder):
        (folder / "config.json").write_text("2")
        raise RuntimeError("killed half way")

    with pytest.raises(RuntimeError):
        write_directory_atomically(target, broken, made_by="test")
    assert (target / "config.json").read_text() == "1"  # the complete old folder, not a mix
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # the temp folder is gone
    write_directory_atomically(target, lambda d: (d / "other.json").write_text("3"), made_by="test")
    assert sorted(p.name for p in target.iterdir()) == [".conceptforge.json", "other.json"]  # replaced whole


def test_shard_names_round_trip_and_dashed_splits(tmp_path):
    assert shard_name("test", 2, 10) == "test-00002-of-00010.parquet"
    assert shard_split("train-extra-00000-of-00001.parquet") == "train-extra"  # split names may hold dashes
    assert shard_split("train-0-of-1.parquet") is None and shard_split("README.md") is None
    for name in ("test-00000-of-00002.parquet", "test-00001-of-00002.parquet", "test-hard-00000-of-00001.parquet"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in split_files(tmp_path, "test")] == [
        "test-00000-of-00002.parquet",
        "test-00001-of-00002.parquet",
    ]
    assert split_names(tmp_path) == ["test", "test-hard"]
    assert split_names(tmp_path / "missing") == []


def test_grid_png_reads_only_what_it_shows():
    seen = []

    def samples():
        for index in range(100):
            seen.append(index)
            yield Image.new("RGB", (20, 10), (index, 0, 0)), f"tile {index}"

    data = grid_png(samples(), limit=3, columns=3, thumb_width=20)
    assert seen == [0, 1, 2]
    with Image.open(io.BytesIO(data)) as grid:
        assert grid.width == 60
    assert grid_png(iter(())) is None
    image = Image.new("RGB", (4, 4), "red")
    assert png_bytes(image) == png_bytes(image.copy())  # same pixels, same bytes


def test_local_fingerprint_sees_weight_changes_but_not_hidden_files(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\0" * (3 << 20))
    (tmp_path / "config.json").write_text("{}")
    first = local_fingerprint(tmp_path)
    assert first.startswith("local-sha256:") and len(first) == len("local-sha256:") + 16
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / ".lock").write_text("x")
    assert local_fingerprint(tmp_path) == first
    weights.write_bytes(b"\0" * ((3 << 20) - 1) + b"\1")  # last byte of a large file
    assert local_fingerprint(tmp_path) != first


def test_write_directory_atomically_never_empties_someone_elses_folder(tmp_path):
    """Issue 24: train-oracle --out DIR emptied any DIR (a finished dataset included)."""
    from conceptforge.errors import ConceptforgeError
    from tests.foreign_out import make_foreign_folder, snapshot

    target = tmp_path / "mine"
    target.mkdir()
    before = make_foreign_folder(target)
    calls = []
    with pytest.raises(ConceptforgeError, match="not a conceptforge run"):
        write_directory_atomically(target, calls.append, made_by="train-oracle")
    assert snapshot(target) == before and calls == []  # refused before any work
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConceptforgeError, match="is a file"):
        write_directory_atomically(tmp_path / "file", calls.append, made_by="train-oracle")
    ours = tmp_path / "ours"
    write_directory_atomically(ours, lambda d: (d / "a").write_text("1"), made_by="train-oracle")
    with pytest.raises(ConceptforgeError, match="holds output of `conceptforge train-oracle`"):
        write_directory_atomically(ours, calls.append, made_by="generate conceptbed")


def test_write_directory_atomically_gives_normal_modes(tmp_path):
    """Issue 24: oracles and ConceptBed artifacts were left 0700 (mkdtemp)."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        target = write_directory_atomically(
            tmp_path / "model", lambda d: ((d / "sub").mkdir(), (d / "sub" / "w").write_text("1")), made_by="test"
        )
    finally:
        os.umask(old)
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in [target, *target.rglob("*")]}
    assert modes == {"model": 0o755, "model/sub": 0o755, "model/sub/w": 0o644, "model/.conceptforge.json": 0o644}


def test_data_folder_fingerprint_reads_metadata_but_only_sizes_of_images(tmp_path):
    # the one folder fingerprint, in its data-folder mode: a metadata change shows, an image whose
    # bytes change at the same size does not (11,788 CUB JPEGs are never read), a size change does
    (tmp_path / "images.txt").write_text("1 a.jpg\n")
    (tmp_path / "a.jpg").write_bytes(b"\0" * 100)
    data = local_fingerprint(tmp_path, whole_suffixes=(".txt",))
    assert data.startswith("local-sha256:") and data != local_fingerprint(tmp_path)
    (tmp_path / "a.jpg").write_bytes(b"\1" * 100)
    assert local_fingerprint(tmp_path, whole_suffixes=(".txt",)) == data
    (tmp_path / "a.jpg").write_bytes(b"\1" * 101)
    resized = local_fingerprint(tmp_path, whole_suffixes=(".txt",))
    assert resized != data
    (tmp_path / "images.txt").write_text("1 b.jpg\n")
    assert local_fingerprint(tmp_path, whole_suffixes=(".txt",)) != resized


def test_a_grid_caption_wraps_by_words_and_says_where_it_is_cut():
    from conceptforge.cards.grid import wrap_caption

    assert wrap_caption("a photo of a dog", 10, 2) == ["a photo of", "a dog"]
    assert wrap_caption("a photo of a dog in the style of", 10, 2) == ["a photo of", "a dog in…"]
    assert wrap_caption("short", 10, 1) == ["short"]
