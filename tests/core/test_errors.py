"""Errors by kind: callers catch conceptforge's errors by the builtin they subclass."""

import pickle

import pytest

from conceptforge import errors
from conceptforge.commands import main
from conceptforge.cub import load_cub
from conceptforge.errors import (
    ConceptforgeError,
    DataNotFoundError,
    DependencyMissingError,
    InvalidArgumentError,
    SpecError,
    StoreError,
)

KINDS = {
    errors.InvalidArgumentError: ValueError,
    errors.SpecError: ValueError,
    errors.DataFormatError: ValueError,
    errors.DataNotFoundError: FileNotFoundError,
    errors.WeightsUnavailableError: OSError,
    errors.DeviceUnavailableError: RuntimeError,
    errors.DependencyMissingError: ImportError,
    errors.HubError: OSError,
    errors.PublishError: OSError,
    errors.StoreError: RuntimeError,
}


@pytest.mark.parametrize("kind, builtin", KINDS.items(), ids=lambda k: getattr(k, "__name__", str(k)))
def test_each_kind_is_its_builtin_and_keeps_one_line(kind, builtin):
    error = kind("first line\n   second line")
    assert isinstance(error, ConceptforgeError) and isinstance(error, builtin)
    assert str(error) == "first line second line"  # OSError/ImportError formatting does not leak in
    copy = pickle.loads(pickle.dumps(error))  # crosses process pools (sharded workers)
    assert type(copy) is kind and str(copy) == str(error)


def test_missing_cub_dir_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a CUB_200_2011 directory"):
        load_cub(tmp_path / "nowhere")
    with pytest.raises(DataNotFoundError):
        load_cub(tmp_path / "nowhere")


def test_bad_values_are_value_errors(tmp_path):
    from conceptforge.engine.workitems import ShardSpec
    from conceptforge.generators.sub.spec import read_candidate_spec

    with pytest.raises(ValueError, match="--shard-index must be in"):
        ShardSpec(num_shards=2, shard_index=5)
    with pytest.raises(InvalidArgumentError):
        ShardSpec(num_shards=0, shard_index=0)
    spec = tmp_path / "candidates.json"
    spec.write_text("{not json", encoding="utf-8")
    with pytest.raises(SpecError, match="is not valid JSON"):
        read_candidate_spec(spec)
    with pytest.raises(FileNotFoundError):
        read_candidate_spec(tmp_path / "missing.json")


def test_store_problems_are_store_errors(tmp_path):
    from conceptforge import ItemStore

    with pytest.raises(StoreError, match="holds no finished work yet") as caught:
        ItemStore(tmp_path / "work").read_config()
    assert isinstance(caught.value, RuntimeError)


def test_missing_bpy_is_an_import_error(monkeypatch):
    import sys

    from conceptforge.generators.binding import render_blender

    monkeypatch.setitem(sys.modules, "bpy", None)  # `import bpy` now fails as if not installed
    with pytest.raises(ImportError, match="pip install") as caught:
        render_blender.require_bpy()
    assert isinstance(caught.value, DependencyMissingError)


def test_domain_errors_are_in_the_tree():
    from conceptforge.filters.annotation.db import AlreadyAnswered
    from conceptforge.filters.annotation.server import BadRequest
    from conceptforge.filters.classifier_oracle import OracleError
    from conceptforge.generators.binding.scene import PlacementError

    assert issubclass(OracleError, ValueError) and issubclass(OracleError, ConceptforgeError)
    assert issubclass(PlacementError, RuntimeError) and issubclass(PlacementError, ConceptforgeError)
    assert issubclass(BadRequest, ValueError) and issubclass(BadRequest, ConceptforgeError)
    assert issubclass(AlreadyAnswered, StoreError)


def test_command_line_still_prints_one_line_and_exits_2(tmp_path, capsys):
    code = main(["evaluate", "sub", "--dataset", str(tmp_path), "--cub-dir", str(tmp_path / "no-cub"), "--cbm", "x:y"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
