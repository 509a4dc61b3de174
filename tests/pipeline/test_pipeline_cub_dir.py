"""One ``--cub-dir`` for the whole pipeline: every CUB reader must accept the same folder.

A user runs generate_sub.py, filter_sub.py, evaluate.py sub and annotate.py with the same
``--cub-dir``. The docs show ``--cub-dir ~/data/CUB_200_2011``; the tarball ships attributes.txt
*beside* that folder. generators/sub/cub.py, loaders/cub.py and filters/annotation/groups.py look
there; filters/cub_attributes.py (filter_sub.py) does not and stops with "not a CUB_200_2011
directory". The CUB readers are being consolidated in another branch, so this is reported, not
patched here: the xfail turns into a failure (strict) once the consolidation fixes it, as a reminder
to drop the marker.
"""

from __future__ import annotations

import pytest


def _readers():
    from filters.annotation.groups import cub_attributes_file
    from filters.cub_attributes import load_attributes
    from generators.sub.cub import load_cub
    from loaders.cub import CubMetadata

    return {"generate_sub (generators.sub.cub)": load_cub, "evaluate sub (loaders.cub)": CubMetadata.from_dir,
            "annotate (filters.annotation.groups)": cub_attributes_file,
            "filter_sub (filters.cub_attributes)": load_attributes}


def test_every_reader_accepts_the_folder_holding_cub_200_2011(pipeline_cub):
    for name, read in _readers().items():
        assert read(pipeline_cub), name


@pytest.mark.xfail(strict=True, reason="filters/cub_attributes.py ignores CUB_200_2011/../attributes.txt "
                                       "(tarball layout); reported to the CUB consolidation")
def test_every_reader_accepts_the_cub_200_2011_folder(pipeline_cub_folder):
    failures = {}
    for name, read in _readers().items():
        try:
            read(pipeline_cub_folder)
        except Exception as error:  # noqa: BLE001 - collect every reader's verdict
            failures[name] = str(error)
    assert not failures, failures
