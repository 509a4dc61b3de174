"""The preset proofs' comparison (tests/specs/recordings.py): any one recording, never a mix."""

from __future__ import annotations

import pytest

from tests.specs.recordings import assert_recorded, machine_kind

RECORDINGS = {"first": {"a": "1", "b": "2"}, "second": {"a": "1", "b": "3"}}


def test_each_recording_is_accepted_whole():
    assert_recorded({"a": "1", "b": "2"}, RECORDINGS)
    assert_recorded({"a": "1", "b": "3"}, RECORDINGS)


@pytest.mark.parametrize(
    "found", [{"a": "0", "b": "2"}, {"a": "1"}, {"a": "1", "b": "2", "c": "4"}, {"a": "1", "b": "4"}]
)
def test_a_changed_missing_or_extra_file_fails_naming_this_machine(found):
    with pytest.raises(AssertionError, match="differ from every recording") as failure:
        assert_recorded(found, RECORDINGS)
    assert machine_kind() in str(failure.value)
