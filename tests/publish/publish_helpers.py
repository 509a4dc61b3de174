"""Helpers for the publish tests: small dataset directories, the CLI and a plain-datasets loader."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from datasets import ClassLabel, Features, List, Value
from datasets import Image as ImageFeature
from PIL import Image

from conceptforge.cards import DatasetMetadata, FilterStats, assemble_dataset_dir, collect_provenance, render_card
from conceptforge.cards.grid import make_sample_grid, png_bytes
from conceptforge.cards.validity import not_applicable, validity_report
from conceptforge.generators.binding import repo as binding_repo
from conceptforge.generators.binding.validity import binding_validity, config_validity
from conceptforge.generators.sub.card import CARD_SECTIONS as SUB_SECTIONS
from conceptforge.generators.sub.card import CITATION as SUB_CITATION
from conceptforge.generators.sub.validity import sub_validity
from conceptforge.testing.synthetic import COLOURS, SHAPES, binding_features, single_object_rows, sub_features, sub_rows
from tests.user_shell import plain_python_json

REPO_ROOT = Path(__file__).resolve().parents[2]
FEATURES = Features(
    {
        "image": ImageFeature(),
        "label": ClassLabel(names=["cube", "sphere", "cylinder"]),
        "idx": Value("int32"),
        "candidates": List(Value("string")),
    }
)
BIBTEX = """@inproceedings{bader2025sub,
  title = {{SUB}: Benchmarking {CBM} Generalization via Synthetic Attribute Substitutions},
  author = {Bader, Jessica and others},
  year = {2025}
}"""


def tiny_card_metadata(**fields) -> DatasetMetadata:
    """The card metadata of a test that renders one card or Croissant file: the texts every card
    needs, filled with words that say it is a test; ``fields`` add to them or replace them."""
    return DatasetMetadata(
        **{"license": "cc-by-4.0", "summary": "Tiny.", "uses": "Tests.", "annotations": "From the generator.", **fields}
    )


def sub_like_metadata(pretty_name: str, summary: str, **fields) -> DatasetMetadata:
    """The card metadata of a SUB-like test release: SUB's licence (CC BY-NC 4.0, as the paper's
    data) and task category, with the release's own name, summary and ``fields``."""
    return DatasetMetadata(
        pretty_name=pretty_name,
        license="cc-by-nc-4.0",
        summary=summary,
        task_categories=["image-classification"],
        **fields,
    )


def tiny_repo_metadata(**fields) -> DatasetMetadata:
    """The card metadata of a test release pushed to the local Hub (configs, push-results): every
    section a release card must fill, and a validity report whose checks do not apply to it."""
    not_here = not_applicable("a test repo")
    texts = {
        "uses": "Tests.",
        "out_of_scope_use": "Anything else.",
        "bias_risks_limitations": "Tiny.",
        "annotations": "Computed from the generator.",
        "validity": validity_report(blind_baselines=not_here, held_out=not_here, agreement=not_here),
    }
    return DatasetMetadata(**{**texts, **fields})


def make_rows(n: int, variant: int):
    for i in range(n):
        image = Image.new("RGB", (10 + variant, 8), ((i * 37 + variant * 91) % 256, (i * 11) % 256, 200 - variant))
        yield {
            "image": {"bytes": png_bytes(image), "path": None},
            "label": ["cube", "sphere", "cylinder"][(i + variant) % 3],
            "idx": i + 1000 * variant,
            "candidates": ["red cube", f"blue sphere {i}"],
        }


def _validity(n_train: int, n_test: int, variant: int) -> dict:
    """A label-majority baseline fitted on train (the rows' labels), the rest not applicable."""
    from collections import Counter

    from conceptforge.cards.validity import baseline_row, majority_accuracy, not_applicable, validity_report

    train = Counter(r["label"] for r in make_rows(n_train, variant))
    test = Counter(r["label"] for r in make_rows(n_test, variant + 7))
    return validity_report(
        blind_baselines={
            "rows": [
                baseline_row(
                    split=split,
                    baseline="label majority (train)",
                    accuracy=majority_accuracy(train, c),
                    n=sum(c.values()),
                )
                for split, c in (("train", train), ("test", test))
            ]
        },
        held_out=not_applicable("the test set holds nothing out"),
        agreement=not_applicable("nobody annotated the test set"),
    )


def make_dataset(
    out: Path, *, n_train: int = 30, n_test: int = 4, variant: int = 0, shard: int = 10**6, token: str | None = None
) -> Path:
    """A small dataset directory in Hub layout with a full card (provenance, stats, BibTeX, grid)."""
    stats = FilterStats(group_label="pair")
    for i in range(n_train + n_test):
        stats.add(kept=True, group=f"pair{i % 2}")
    stats.add(kept=False, reason="answer is not S+", group="pair0", count=5)
    stats.add(kept=False, reason="below top 10%", group="pair1", count=7)
    argv = ["scripts/generate_test.py", "--seed", "3"] + (["--token", token] if token else [])
    metadata = sub_like_metadata(
        "Publish test set",
        "Tiny synthetic shapes for the publishing tests.",
        tags=["synthetic", "conceptforge"],
        citation=BIBTEX,
        paper_title="SUB: Benchmarking CBM Generalization via Synthetic Attribute Substitutions",
        paper_url="https://arxiv.org/abs/2507.23784",
        column_docs={"image": "the picture", "label": "shape", "idx": "row id", "candidates": "captions"},
        language=["en"],
        uses="Exercising the publishing code.",
        out_of_scope_use="Anything else: the shapes mean nothing.",
        bias_risks_limitations="Three shapes in flat colours; no people.",
        annotations="Labels come from the generating loop; nobody checked them.",
        provenance=collect_provenance(
            generator="tests.publish",
            models={"renderer": ("org/tiny-model", "a" * 40)},
            parameters={"variant": variant, "n_train": n_train},
            seeds={"run": 3},
            argv=argv,
        ),
        filter_stats=stats,
        validity=_validity(n_train, n_test, variant),
        personal_data="None: flat-coloured synthetic shapes.",
    )
    grid = make_sample_grid(
        [(Image.open(io.BytesIO(r["image"]["bytes"])), r["label"]) for r in make_rows(4, variant)], thumb_width=64
    )
    assemble_dataset_dir(
        out,
        splits={"train": lambda: make_rows(n_train, variant), "test": lambda: make_rows(n_test, variant + 7)},
        features=FEATURES,
        render_card=lambda split_stats: render_card(metadata, FEATURES, split_stats),
        grid_png=png_bytes(grid),
        max_shard_size=shard,
    )
    return out


def expected_rows(directory: Path) -> dict[str, list[dict]]:
    """Rows of a dataset directory read straight from its parquet files (image bytes as sha256)."""
    import pyarrow.parquet as pq

    out: dict[str, list[dict]] = {}
    for path in sorted((directory / "data").glob("*.parquet")):
        split = path.name.split("-")[0]
        for row in pq.read_table(path).to_pylist():
            out.setdefault(split, []).append(
                {
                    "image": hashlib.sha256(row["image"]["bytes"]).hexdigest(),
                    "label": row["label"],
                    "idx": row["idx"],
                    "candidates": row["candidates"],
                }
            )
    return out


def run_publish(env: dict, directory: Path, repo_id: str, version: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "publish.py"),
            str(directory),
            "--repo-id",
            repo_id,
            "--version",
            version,
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


LOADER = r"""
import hashlib, json, sys
from datasets import load_dataset, Image
from huggingface_hub import hf_hub_download, DatasetCard
repo, revisions = sys.argv[1], sys.argv[2:]
out = {}
for revision in revisions:
    ds = load_dataset(repo, revision=revision)
    result = {"splits": {}, "features": {}, "first_image_size": {}}
    for split, data in ds.items():
        result["features"] = {name: type(f).__name__ for name, f in data.features.items()}
        result["label_names"] = data.features["label"].names
        result["first_image_size"][split] = list(data[0]["image"].size)
        raw = data.cast_column("image", Image(decode=False))
        result["splits"][split] = [
            {"image": hashlib.sha256(r["image"]["bytes"]).hexdigest(), "label": r["label"], "idx": r["idx"], "candidates": r["candidates"]}
            for r in raw
        ]
    card = DatasetCard(open(hf_hub_download(repo, "README.md", repo_type="dataset", revision=revision)).read())
    grid = open(hf_hub_download(repo, "grid.png", repo_type="dataset", revision=revision), "rb").read()
    result["card_data"] = card.data.to_dict()
    result["card_text"] = card.text
    result["grid_png"] = grid[:8] == b"\x89PNG\r\n\x1a\n"
    result["grid_sha256"] = hashlib.sha256(grid).hexdigest()
    out[revision] = result
assert not any(m.split(".")[0] == "conceptforge" for m in sys.modules), "conceptforge was imported"
print(json.dumps(out))
"""


def load_with_plain_datasets(env: dict, repo_id: str, *revisions: str) -> dict:
    """``datasets.load_dataset(repo, revision=…)`` in a process that cannot import conceptforge."""
    return plain_python_json(LOADER, repo_id, *revisions, env=env, drop=("HF_TOKEN",))


def binding_release(out):
    """A tiny binding release folder (cards, validity, two configs), for the publish and export tests."""
    out, splits, _ = binding_release_with_metadata(out)
    return out, splits


def binding_release_with_metadata(out, train: Sequence[str] = ("blue cube", "gray sphere", "yellow cylinder")):
    """:func:`binding_release` with the train split's compositions chosen (a gen composition there is a
    leak), and its card metadata returned too."""
    labels = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    splits = {
        "train": single_object_rows(list(train), 2, 1, labels),
        "val": single_object_rows(["brown cube"], 2, 2, labels),
        "gen": single_object_rows(["red cube"], 2, 3, labels),
    }
    part = config_validity("single-object", lambda split: iter(splits[split]), list(splits))
    metadata = DatasetMetadata(
        pretty_name="Binding (tiny)",
        license="cc-by-4.0",
        summary="Tiny single-object binding release for the benchmark tests.",
        task_categories=["zero-shot-image-classification"],
        tags=["concept-binding", "synthetic"],
        citation=binding_repo.CITATION,
        language=["en"],
        source_datasets=["original"],
        uses=binding_repo.USES,
        out_of_scope_use=binding_repo.OUT_OF_SCOPE,
        bias_risks_limitations=binding_repo.BIAS_RISKS,
        annotations=binding_repo.ANNOTATIONS,
        personal_data=binding_repo.PERSONAL_DATA,
        validity={**binding_validity({"single-object": part})},
        provenance={"generator": "tests.publish (tiny binding)", "seeds": {"run": 1}},
    )
    _write(out, splits, binding_features(), metadata)
    return out, splits, metadata


def sub_release(out, **overrides):
    """A tiny SUB release folder (cards, validity, provenance); ``overrides`` replace metadata fields."""
    rows = sub_rows()
    fields = {
        "validity": sub_validity({"test": iter(rows)}),
        "provenance": {
            "generator": "tests.publish (tiny SUB)",
            "models": [{"role": "vqa", "id": "org/vqa", "revision": "a" * 40}],
        },
        **SUB_SECTIONS,
        **overrides,
    }
    metadata = sub_like_metadata(
        "SUB (tiny)",
        "Tiny SUB release for the benchmark tests.",
        tags=["sub", "synthetic"],
        citation=SUB_CITATION,
        **fields,
    )
    _write(out, {"test": rows}, sub_features(), metadata)
    return out


def _write(out, splits, features, metadata):
    assemble_dataset_dir(
        out,
        splits={name: (lambda rows=rows: iter(rows)) for name, rows in splits.items()},
        features=features,
        render_card=lambda stats: render_card(metadata, features, stats, has_grid=False),
    )
