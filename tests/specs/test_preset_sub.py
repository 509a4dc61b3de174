"""The SUB paper preset stays byte-identical (issue 46): the tiny generate + filter run of the
paper plan writes, file for file, what it wrote before SUB became a general method.

The hashes below were recorded from main before the SUB spec was introduced (commit 9682a9a), with
the tiny random FLUX (seed 0), the tiny LLaVA and the miniature CUB of tests/pipeline. A change to
the plan, the prompts, the TDG schedules, the VQA questions, the card or the provenance of a paper
run changes one of them.
"""

from __future__ import annotations

import pytest

from tests.specs.recordings import EARLIER_MACHINES, EPYC_AVX512, assert_recorded
from tests.specs.sub_preset_run import build_inputs, fingerprints, run_generate_and_filter

RECORDED = {
    "sub-candidates/.work/made_by.json": "5ff06cc0e3b325c3c404965805e44f5cd3be6576470577d4e89f2d1ad2ee985d",
    "sub-candidates/.work/owner.json": "d351070d6748e41ec56babf3b816f1ff206e575e3b61c9bd9ded6cd454f2c127",
    "sub-candidates/.work/published.json": "97fa5b699ad451c5d15eee35f8dd58936a758f137f6abefe248dd2f8ddda4528",
    "sub-candidates/.work/run.json": "3ae52cdd9a21fb5cfd90fb4426414bc29a4c4c5cb5e94c7c70d0a7a06c97926d",
    "sub-candidates/.work/shards/1-0.json": "6cbc70e90761f71486b722aa22989d0203d9048861e1012c45247db087ea382f",
    "sub-candidates/README.md": "1ffbaced9d9315835b10b15a184a79c1d1d20d420d765d5fa3755fb9850a7c86",
    "sub-candidates/data/candidates-00000-of-00001.parquet": "67d7c9381058883aa50a335695c2c413cb76f8dcdb98b01771bd02d9e56994b5",
    "sub-candidates/grid.png": "2dbb175c76fbe405d7dafd59ac95e3c63907746235fbabb9233823b4bc5ba054",
    "sub-candidates/provenance.json": "0722416c5d3785976d5f608ab3218c5842e46419d77e3b75dd0bed1ad1fb3ca2",
    "sub-filtered/.work/made_by.json": "514d88538b70296a945639bd199f9b99742216e95597634586056c20b9ae76c6",
    "sub-filtered/.work/owner.json": "d351070d6748e41ec56babf3b816f1ff206e575e3b61c9bd9ded6cd454f2c127",
    "sub-filtered/.work/published.json": "a1d64585f15dd71ea68928dcdaf22d15333d2b1150223bd5d90bbbcd4df97a0c",
    "sub-filtered/.work/run.json": "dbcb78763e412318874af3529514faacb0d28fc01db525e03fcf8c43edb82b5e",
    "sub-filtered/.work/shards/1-0.json": "7ea7efe433d661b4b2638c6603a7fc126529c187e86ff9d9bfb330d4006b6be3",
    "sub-filtered/README.md": "8550f0690b1e585cec7ca052cc0f5803d5436de25ed48406b6a209d5d5a7e035",
    "sub-filtered/data/test-00000-of-00001.parquet": "c365574e247301cb7e14e516d49892bdfd9e9493630a07de9fc4f3e9b9e2146c",
    "sub-filtered/grid.png": "339b09562c49dbc1a15a578d0d7c1cbd5780d876384a20f4300e50c475aa5cfe",
}


#: The same files on an AVX-512 EPYC (tests/specs/recordings.py): the tiny FLUX's candidates end in
#: other bits there (the grid with them); the filtered release, the cards and records are the same.
RECORDINGS = {
    EARLIER_MACHINES: RECORDED,
    EPYC_AVX512: {
        **RECORDED,
        "sub-candidates/data/candidates-00000-of-00001.parquet": "478d62f2d0309e292474c5eafb21389a6ed55a41acaa75dcd3e6ba95800ca544",
        "sub-candidates/grid.png": "0df09cfb8e2a93bfdc87d94450cbbf32b8cd914195306b7897124dc2e20eeefa",
    },
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, random_flux_seed0):
    from conceptforge.testing.tiny_vlms import build_tiny_llava

    root = tmp_path_factory.mktemp("sub-preset")
    vlm = build_tiny_llava(tmp_path_factory.mktemp("sub-preset-vlm"))
    return root, build_inputs(root, random_flux_seed0, vlm)


def test_default_run_is_byte_identical_to_main(inputs, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, models = inputs
    folders = run_generate_and_filter(root, models, name="default", spec_args=[])
    hashes = fingerprints(root, folders)
    assert_recorded(hashes, RECORDINGS)


def test_named_paper_preset_is_byte_identical_to_main(inputs, monkeypatch):
    """``--preset sub-cub-paper`` (generate and filter) writes what the default run wrote on main;
    only the shard reports of the item store list the process's own command line, preset included."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, models = inputs
    folders = run_generate_and_filter(root, models, name="preset", spec_args=["--preset", "sub-cub-paper"])
    assert_recorded(fingerprints(root, folders, named_preset=True), RECORDINGS)
