"""The CompMap paper setups stay byte-identical when they become presets (issue 46).

The expected digests were recorded from ``main`` before CompMap read specs: the tiny CUB n-way
k-shot and MIT-States CZSL evaluations of tests/compmap (the miniature folders, the tiny CLIP),
with ``SOURCE_DATE_EPOCH`` set so the results carry no clock. The same runs must give the same
files with no spec (today's command) and with ``--preset compmap-cub-paper`` /
``--preset compmap-mit-states-paper``.

What is hashed, and what is not: every file the run writes (results JSON, its Markdown table,
the breakdowns, the chart PNGs, the samples folder's marker files) byte for byte, with the run's
temporary folder as the working folder (so the model id and dataset repo the results name are
the same relative paths in every run); an absolute path left in a file would be written ``ROOT``.
The samples parquet files are hashed as their decoded rows and schema (metadata included), not as
bytes: the bytes depend on the parquet writer's version, the rows are what the run decided.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from conceptforge.commands import main
from conceptforge.testing.tiny_models import build_tiny_clip
from tests.compmap.synthetic import write_fake_cub, write_fake_mit_states
from tests.specs.recordings import EARLIER_MACHINES, EPYC_AVX512, assert_recorded

CUB_FLAGS = ["--ways", "2", "3", "--shots", "1", "2", "--episodes", "4", "--queries", "2"]
MIT_FLAGS = ["--world", "both", "--epochs", "20", "--dim", "8", "--lr", "0.05", "--templates", "a3:1,4,7"]

# Recorded from unchanged main (commit 9682a9a) with digests() below.
EXPECTED = {
    "cub": {
        "cub.breakdowns.json": "e6f585ac8afc4d08175149e6f6d3dc09fe813c697722487ef32e8fea385603d1",
        "cub.charts/compmap-cub.png": "c001beb493eaffde1b0fc44064e5e802d82c84acaeaaab88141137a619e0ef24",
        "cub.json": "c601a5e5c0a2a4d6c7b338406d121fdf7a1b27dd746894e4c5a42f6bb3ec33ba",
        "cub.md": "33507718da383255b64577cb367fbdc7e9cb4a189dd0c2274be27aea13fdba24",
        "cub.samples/.conceptforge-samples": "0c0f756568d72d90e39d778f5a716b9bbcfb99cf89cfde592fc7953f941f1a36",
        "cub.samples/.conceptforge.json": "1692f1ec2afa1acaf8d5ace4f28aa3e1d544ebe591ba3d1c424bb6710b1e03c2",
        "cub.samples/compmap-cub.parquet": "84515a961532b65791527699a5af6006bda3ab193584a897bc5707296da62346",
    },
    "mit-states": {
        "mit.breakdowns.json": "f25cbc05b44a641f5e031ddf075beb15c2ee2f99f0f64744c0d25a3664c46e3e",
        "mit.charts/compmap-mit-states.png": "24ff5a1d83255f4be9f1b7cc43069b57657b471f358ac2f75c947a710b98ca61",
        "mit.json": "7dd553acbc12a31b3972e9c10d9f62021102d1312e8b294c5a57ee99bbee1685",
        "mit.md": "267dfaf590136e0c6fabda0ae71119cc7c5d4dbe40d3230c3ebb1dfece14d229",
        "mit.samples/.conceptforge-samples": "0c0f756568d72d90e39d778f5a716b9bbcfb99cf89cfde592fc7953f941f1a36",
        "mit.samples/.conceptforge.json": "6547b923d0aded4fdd3d06bb39d0f0640c32babba3fba01055ed04cb3fa2dc92",
        "mit.samples/compmap-mit-states.parquet": "7ddd25b370aeda81eed63ad815c2fc36efef83580fb7c730a7336c905df014c6",
    },
}


@pytest.fixture(scope="module")
def paper_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("compmap-preset")
    return {
        "root": root,
        "clip": build_tiny_clip(root / "tiny-clip"),
        "cub": write_fake_cub(root / "CUB_200_2011"),
        "mit-states": write_fake_mit_states(root / "mit-states"),
    }


def _parquet_digest(path: Path, root: str) -> str:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    schema = table.schema.to_string(show_field_metadata=True, show_schema_metadata=True)
    rows = json.dumps(table.to_pylist(), sort_keys=True, default=str)
    return hashlib.sha256((schema + "\n" + rows).replace(root, "ROOT").encode()).hexdigest()


def digests(out: Path, root: Path) -> dict[str, str]:
    """sha256 of every file under ``out`` (relative path -> digest), ``root`` written as ROOT."""
    found = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = path.relative_to(out).as_posix()
        if path.suffix == ".parquet":
            found[name] = _parquet_digest(path, str(root))
        else:
            found[name] = hashlib.sha256(path.read_bytes().replace(str(root).encode(), b"ROOT")).hexdigest()
    return found


def run_paper(paper_data, benchmark: str, out: str, *extra: str) -> dict[str, str]:
    """The tiny paper run of ``benchmark`` into folder ``out`` of the data's root (the working
    folder: every path the results name is relative, so tables keep their widths); the digests."""
    root = paper_data["root"]
    assert Path.cwd() == root
    flags = CUB_FLAGS if benchmark == "cub" else MIT_FLAGS
    (root / out).mkdir()
    stem = "cub" if benchmark == "cub" else "mit"
    argv = ["evaluate", "compmap", "--benchmark", benchmark, "--model", "./tiny-clip"]
    argv += ["--data-dir", paper_data[benchmark].name, "--output", f"{out}/{stem}.json"]
    argv += ["--cache-dir", f"cache-{out}", *flags, *extra]
    assert main(argv) == 0
    return digests(root / out, root)


def recordings(benchmark: str) -> dict[str, dict[str, str]]:
    """Unchanged code's files on each kind of machine (tests/specs/recordings.py): on an AVX-512
    EPYC the MIT-States scores' float sums end in other bits; CUB's files are the same."""
    on_epyc = {**EXPECTED[benchmark], **ON_EPYC_AVX512.get(benchmark, {})}
    return {EARLIER_MACHINES: EXPECTED[benchmark], EPYC_AVX512: on_epyc}


ON_EPYC_AVX512 = {
    "mit-states": {
        "mit.json": "51d4336c8c32d5b02f853b794c962fa507b09b738326e1d6ca4cf577867b297e",
        "mit.samples/compmap-mit-states.parquet": "66d1aa264f7a45a6231de335db7d7246e07e89942d4c11f39d712d9bf39e0dd1",
    }
}


@pytest.fixture
def reproducible(monkeypatch, paper_data):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    monkeypatch.chdir(paper_data["root"])
    # float32 sums depend on torch's thread count (the 7th digit of MIT-States' CZSL scores moved
    # with the threads an earlier test in the same worker left): one thread, whatever the machine.
    # The hashes are of unchanged main (4ce8c0c) run under one thread too.
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


PRESETS = {"cub": "compmap-cub-paper", "mit-states": "compmap-mit-states-paper"}


@pytest.mark.parametrize("benchmark", ["cub", "mit-states"])
def test_paper_run_is_byte_identical_to_before(paper_data, benchmark, reproducible, capsys):
    found = run_paper(paper_data, benchmark, f"default-{benchmark}")
    capsys.readouterr()
    assert_recorded(found, recordings(benchmark))


@pytest.mark.parametrize("benchmark", ["cub", "mit-states"])
def test_paper_preset_is_byte_identical_to_before(paper_data, benchmark, reproducible, capsys):
    """``--preset`` names the protocol (``--benchmark`` then agrees or is left out); the same files."""
    found = run_paper(paper_data, benchmark, f"preset-{benchmark}", "--preset", PRESETS[benchmark])
    capsys.readouterr()
    assert_recorded(found, recordings(benchmark))


def test_presets_hold_the_tasks_defaults():
    """Each paper preset sets exactly the values the task runs with by default (no drift either way)."""
    from conceptforge.loaders.compmap.benchmark import load_compmap_spec
    from conceptforge.loaders.harness.registry import get_task

    for preset in PRESETS.values():
        spec = load_compmap_spec(preset=preset).spec
        assert not spec.names_its_data  # the paper's folder comes from the command line
        defaults = get_task(spec.task).option_defaults()
        assert spec.task_options() == {name: defaults[name] for name in spec.task_options()}
