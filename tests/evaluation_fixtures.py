"""Fixtures of the evaluation tests (tests/harness, and each benchmark's evaluation tests in
tests/binding and tests/sub): a tiny offline CLIP and small synthetic datasets. tests/conftest.py
loads them as a plugin (each is built only when a test asks for it); the evaluation test modules use
``offline_single_thread``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.testing.tiny_models import build_tiny_clip, check_distinct_token_ids


@pytest.fixture
def offline_single_thread(hub_offline):
    """Tiny models load from local folders; offline mode makes a wrong path fail without a request.
    Tiny tensors on a shared 2-core machine: intra-op threads cost 30x more than they save."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def fixture_prompts() -> list[str]:
    """Every prompt the evaluation tests give a dual encoder: SUB's attribute prompts over the fake
    CUB (and its none prompt), binding's "a photo of {label}" over the synthetic labels."""
    from conceptforge.loaders.sub.protocol import NONE_TEMPLATE, attribute_prompt
    from conceptforge.testing.synthetic import COLOURS, CUB_ATTRIBUTES, RELATIONS, SHAPES

    prompts = [attribute_prompt(a) for a in CUB_ATTRIBUTES] + [NONE_TEMPLATE]
    labels = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    labels += [f"{a} {r} {b}" for a in SHAPES for r in RELATIONS for b in SHAPES if a != b]
    return prompts + [f"a photo of {label}" for label in labels]


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory):
    # 77 positions (CLIP's own): at 32 the byte-level tokenizer cut every SUB prompt of a group to
    # the same ids ("a photo of a bird whose crown c…"), and SUB's argmax tests proved nothing.
    path = build_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip", max_length=77)
    check_distinct_token_ids(path, fixture_prompts())
    return path


@pytest.fixture()
def embedder(tiny_clip_dir, tmp_path):
    from conceptforge.loaders.harness.embeddings import EmbeddingModel

    model = EmbeddingModel.from_pretrained(str(tiny_clip_dir), cache_dir=tmp_path / "emb-cache", device="cpu")
    yield model
    model.close()


@pytest.fixture(scope="session")
def fake_cub(tmp_path_factory):
    from conceptforge.testing.synthetic import write_fake_cub

    return write_fake_cub(tmp_path_factory.mktemp("cub"))


@pytest.fixture(scope="session")
def sub_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import sub_features, sub_rows, write_dataset

    return write_dataset(tmp_path_factory.mktemp("sub") / "sub", {"test": sub_rows()}, sub_features())


@pytest.fixture(scope="session")
def published_sub_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import sub_rows, write_published_sub

    return write_published_sub(tmp_path_factory.mktemp("pub") / "SUB", sub_rows())


@pytest.fixture(scope="session")
def single_object_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import write_single_object

    return write_single_object(tmp_path_factory.mktemp("binding") / "single-object", n_per_label=2)


@pytest.fixture(scope="session")
def relational_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import write_relational

    return write_relational(tmp_path_factory.mktemp("binding") / "relational")


@pytest.fixture(scope="session")
def tiny_llava_dir(tmp_path_factory):
    """A tiny LLaVA whose tokenizer has "Yes" and "No" as single tokens (VQAScore reads P("Yes"))."""
    from conceptforge.testing.tiny_vlms import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("models") / "tiny-llava", words=("Yes", "No"))


@pytest.fixture(scope="session")
def tiny_blip_dir(tmp_path_factory):
    from conceptforge.testing.tiny_compmap import build_tiny_blip

    return build_tiny_blip(tmp_path_factory.mktemp("models") / "tiny-blip")


@pytest.fixture(scope="session")
def tiny_vilt_dir(tmp_path_factory):
    from conceptforge.testing.tiny_compmap import build_tiny_vilt

    return build_tiny_vilt(tmp_path_factory.mktemp("models") / "tiny-vilt")


@pytest.fixture(scope="session")
def tiny_open_clip_dir(tmp_path_factory):
    from conceptforge.testing.tiny_open_clip import build_tiny_open_clip

    return build_tiny_open_clip(tmp_path_factory.mktemp("models") / "tiny-open-clip")


def evaluate_script(*args, importable: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python scripts/evaluate.py ARGS`` as a user runs it: a fresh process, offline, one thread;
    ``importable``: a folder put on PYTHONPATH beside the checkout (a user's own model factory)."""
    repo = Path(__file__).resolve().parents[1]
    path = os.pathsep.join(str(p) for p in (repo, importable) if p)
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, str(repo / "scripts" / "evaluate.py"), *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


# Small binding and SUB settings that still give every metric its spread: two CDSMs, two seeds.
SMALL_BINDING_SUB_OPTIONS = (
    "binding-cdsm.models=add,mult",
    "binding-cdsm.seeds=0,1",
    "binding-cdsm.epochs=2",
    "sub-vlm.cbm_min_classes=1",
)


def task_options(*options: str) -> list[str]:
    """``--task-option OPTION`` for each option, as ``conceptforge evaluate`` takes them."""
    return [arg for option in options for arg in ("--task-option", option)]


def binding_and_sub_argv(clip: Path, single_object: Path, sub: Path, cub: Path, work: Path) -> tuple[list[str], Path]:
    """The ``conceptforge evaluate`` arguments of a tiny binding-clip, binding-cdsm and sub-vlm run
    writing ``work/run.json``, and that path."""
    out = work / "run.json"
    tasks = f"binding-clip:{single_object},binding-cdsm:{single_object},sub-vlm:{sub}"
    argv = ["evaluate", "--model", str(clip), "--tasks", tasks, "--cub-dir", str(cub)]
    argv += [*task_options(*SMALL_BINDING_SUB_OPTIONS), "--device", "cpu"]
    return [*argv, "--cache-dir", str(work / "cache"), "--output", str(out)], out


def compmap_argv(clip: Path, work: Path, *options: str) -> tuple[list[str], Path, Path]:
    """The ``conceptforge evaluate`` arguments of a tiny compmap-cub and compmap-mit-states run on
    fresh miniature datasets under ``work`` (writing ``work/compmap.json``): argv, output, MIT-States.
    ``options`` add to the small defaults (MIT-States: an 8-dim probe on the primitives)."""
    from tests.compmap.synthetic import write_fake_cub, write_fake_mit_states

    cub, mit = write_fake_cub(work / "CUB_200_2011"), write_fake_mit_states(work / "mit")
    out = work / "compmap.json"
    argv = ["evaluate", "--model", str(clip), "--tasks", "compmap-cub,compmap-mit-states"]
    argv += ["--cub-dir", str(cub), "--mit-states-dir", str(mit), "--cache-dir", str(work / "cache")]
    small = ("compmap-cub.ways=2,3", "compmap-cub.shots=1", "compmap-cub.episodes=5", "compmap-cub.queries=2")
    small += ("compmap-mit-states.dim=8", "compmap-mit-states.targets=primitives")
    return [*argv, "--device", "cpu", "--output", str(out), *task_options(*small, *options)], out, mit
