"""One ``--cub-dir`` for the whole pipeline: every CUB entry point accepts the same folder.

A user runs generate_sub.py, select_candidates.py, filter_sub.py, evaluate.py sub and annotate.py
with the same ``--cub-dir``. The docs show ``--cub-dir ~/data/CUB_200_2011`` and say the folder
holding it works too; the tarball ships attributes.txt *beside* ``CUB_200_2011/``. All stages read
CUB through ``generators/cub.py`` (consolidated from four readers that disagreed on this).
"""

from __future__ import annotations

import pytest


def _readers():
    from conceptforge.cub import CubDataset, load_attributes, load_cub
    from conceptforge.filters.annotation.groups import resolve_group_values

    return {
        "generate_sub / filter_sub (load_cub percent)": lambda d: load_cub(d, need="percent"),
        "evaluate sub (load_cub votes)": lambda d: load_cub(d, need="votes"),
        "filter_sub options (load_attributes)": load_attributes,
        "select_candidates attributes (CubDataset.load)": CubDataset.load,
        "annotate sub-attribute (resolve_group_values)": lambda d: resolve_group_values({}, d),
    }


def _failures(folder) -> dict[str, str]:
    failures = {}
    for name, read in _readers().items():
        try:
            read(folder)
        except Exception as error:  # noqa: BLE001 - collect every reader's verdict
            failures[name] = str(error)
    return failures


@pytest.mark.parametrize("form", ["CUB_200_2011", "holding folder"])
def test_every_reader_accepts_either_cub_folder(form, pipeline_cub_folder):
    folder = pipeline_cub_folder if form == "CUB_200_2011" else pipeline_cub_folder.parent
    assert _failures(folder) == {}


def test_a_wrong_folder_is_one_clear_line(tmp_path):
    failures = _failures(tmp_path)
    assert set(failures) == set(_readers())
    for message in failures.values():
        assert "\n" not in message and "CUB_200_2011" in message
