"""Synthetic SUB and ConceptBed dataset directories with exactly the columns of docs/schemas.md."""

from __future__ import annotations

import io
import socket
import threading
from pathlib import Path

import pytest
from datasets import Features
from PIL import Image, ImageDraw

from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card
from conceptforge.filters.sub.pipeline import VQA_FEATURES
from conceptforge.generators.conceptbed.card import FEATURES as CONCEPTBED_GENERATED_FEATURES
from conceptforge.generators.sub.card import SCHEMA_FEATURES as SUB_SCHEMA_FEATURES

REPO_ROOT = Path(__file__).resolve().parents[2]

SUB_FEATURES = Features({**SUB_SCHEMA_FEATURES, **VQA_FEATURES})

# The generator's own columns less its addition ``categories``: the docs/schemas.md ConceptBed set.
CONCEPTBED_FEATURES = Features({name: f for name, f in CONCEPTBED_GENERATED_FEATURES.items() if name != "categories"})

COLOURS = ["#c0392b", "#2980b9", "#27ae60", "#f1c40f", "#8e44ad", "#e67e22", "#16a085", "#7f8c8d"]

# (bird, class-level removed attribute per group)
SUB_BIRDS = {
    "Blue_Jay": {"has_crown_color": "has_crown_color::blue", "has_bill_shape": "has_bill_shape::cone"},
    "Cardinal": {"has_crown_color": "has_crown_color::red", "has_bill_shape": "has_bill_shape::cone"},
}
SUB_ATTRIBUTES = [
    ("has_crown_color::black", "colour"),
    ("has_bill_shape::needle", "shape"),
    ("has_crown_color::red", "colour"),
]


def _encode(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


BIRD_COLOURS = {"Blue_Jay": "#4a78c2", "Cardinal": "#c8322c"}
VALUE_COLOURS = {"black": "#111111", "red": "#d62020", "blue": "#2a5bd7", "brown": "#7a4a1d"}


def bird_png(bird: str, attribute: str, index: int, size: tuple[int, int] = (320, 240)) -> bytes:
    """A cartoon bird: body in the species colour, crown colour / bill shape from the attribute."""
    width, height = size
    sky = (200 - 12 * index % 60, 225, 240)
    image = Image.new("RGB", size, sky)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, int(height * 0.82), width, height), fill=(120, 160, 90))
    draw.line((40, int(height * 0.78), width - 40, int(height * 0.78)), fill=(90, 60, 30), width=6)  # branch
    body = BIRD_COLOURS.get(bird, "#888888")
    cx, cy = width // 2 - 10 + 6 * (index % 3), int(height * 0.55)
    draw.ellipse((cx - 70, cy - 40, cx + 50, cy + 40), fill=body)  # body
    draw.polygon([(cx - 70, cy), (cx - 120, cy - 20), (cx - 115, cy + 25)], fill=body)  # tail
    hx, hy = cx + 55, cy - 45
    draw.ellipse((hx - 32, hy - 32, hx + 32, hy + 32), fill=body)  # head
    group, value = attribute.split("::")
    crown = VALUE_COLOURS.get(value) if group == "has_crown_color" else None
    crown = crown or ("#2a5bd7" if bird == "Blue_Jay" else "#d62020")
    draw.pieslice((hx - 32, hy - 32, hx + 32, hy + 32), 200, 340, fill=crown)  # crown
    draw.ellipse((hx + 8, hy - 8, hx + 18, hy + 2), fill="white")
    draw.ellipse((hx + 11, hy - 5, hx + 16, hy), fill="black")  # eye
    if group == "has_bill_shape" and value == "needle":
        draw.polygon([(hx + 28, hy), (hx + 95, hy + 6), (hx + 28, hy + 10)], fill="#333333")
    else:
        draw.polygon([(hx + 26, hy - 8), (hx + 55, hy + 5), (hx + 26, hy + 16)], fill="#e0a030")  # cone
    draw.line((cx - 10, cy + 38, cx - 14, int(height * 0.78)), fill="#444444", width=3)
    draw.line((cx + 15, cy + 38, cx + 18, int(height * 0.78)), fill="#444444", width=3)
    return _encode(image)


def concept_png(concept: str, variant: int, size: tuple[int, int] = (256, 256)) -> bytes:
    """A stand-in for a concept image: a painting-like pattern or a fish, varied by ``variant``."""
    width, height = 256, 256  # drawn at 256 px, then resized
    image = Image.new("RGB", (width, height), COLOURS[variant % len(COLOURS)])
    draw = ImageDraw.Draw(image)
    if concept == "art_painting":
        for k in range(7):
            x = (k * 41 + variant * 17) % width
            draw.line((x, 0, (x + 90) % width, height), fill=COLOURS[(k + variant + 3) % len(COLOURS)], width=14)
        draw.ellipse((width * 0.3, height * 0.3, width * 0.7, height * 0.7), fill="#f5e6c8", outline="black", width=3)
    else:
        cy = height // 2 + 8 * (variant % 3) - 8
        draw.ellipse((40, cy - 40, 190, cy + 40), fill="#7f9a5a", outline="#3d4d2a", width=3)  # fish body
        draw.polygon([(60, cy), (10, cy - 40), (10, cy + 40)], fill="#7f9a5a", outline="#3d4d2a")  # tail
        draw.ellipse((160, cy - 15, 172, cy - 3), fill="black")
    return _encode(image.resize(size, Image.BILINEAR) if size != (width, height) else image)


def sub_rows(per_pair: int) -> list[dict]:
    rows = []
    for b, (bird, removed) in enumerate(SUB_BIRDS.items()):
        for a, (attribute, category) in enumerate(SUB_ATTRIBUTES):
            group, value = attribute.split("::")
            for index in range(per_pair):
                slug = attribute.removeprefix("has_").replace("::", "-")
                rows.append(
                    {
                        "image": {"bytes": bird_png(bird, attribute, index), "path": None},
                        "item_id": f"{bird}__{slug}__{index:03d}",
                        "bird": bird,
                        "attribute": attribute,
                        "group": group,
                        "value": value,
                        "category": category,
                        "removed_attribute": removed[group],
                        "prompt_reference": f"a photo of a {bird} with a {value} {group}",
                        "prompt_guidance": f"a photo of a bird with a {value} {group}",
                        "image_index": index,
                        "seed": 1000 * b + 10 * a + index,
                        "tdg_k": 10.0,
                        "tdg_tmin": 0.2,
                        "tdg_tmax": 0.9,
                        "guidance_scale": 3.5,
                        "num_inference_steps": 4,
                        "model_id": "black-forest-labs/FLUX.1-dev",
                        "model_revision": "main",
                        "vqa_options": ["black", "blue", "red", "Other"],
                        "vqa_probs": [0.7, 0.1, 0.1, 0.1],
                        "vqa_answer": value,
                        "vqa_splus_prob": 0.7,
                        "vqa_raw_mass": 0.9,
                        "rank": index,
                    }
                )
    return sorted(rows, key=lambda r: r["item_id"])


def write_dataset(
    path: Path, features: Features, splits: dict[str, list[dict]], *, license: str = "cc-by-nc-4.0"
) -> Path:
    metadata = DatasetMetadata(pretty_name=f"synthetic {path.name}", license=license, summary="synthetic test data")
    assemble_dataset_dir(
        path,
        splits={name: (lambda rows=rows: iter(rows)) for name, rows in splits.items()},
        features=features,
        render_card=lambda stats: render_card(metadata, features, stats, has_grid=False),
    )
    return path


def make_sub_dataset(path: Path, *, per_pair: int = 4, split: str = "test") -> Path:
    return write_dataset(path, SUB_FEATURES, {split: sub_rows(per_pair)})


CAPTIONS = {
    ("art_painting", "action"): "a dancer in the style of the painting, study {index}",
    ("art_painting", "counting"): "three paintings hanging on a wall, study {index}",
    ("n01440764", "action"): "a tench swimming past a rock, take {index}",
    ("n01440764", "counting"): "two tench fish side by side, take {index}",
}


def conceptbed_rows(split: str, per_group: int = 3) -> list[dict]:
    rows = []
    learners = ["textual-inversion", "dreambooth"]
    concepts = ["art_painting", "n01440764"]
    categories = ["action", "counting"]
    for li, learner in enumerate(learners):
        for c, concept in enumerate(concepts):
            refs = [{"bytes": concept_png(concept, 2 * c + k, (128, 128)), "path": None} for k in range(3)]
            for index in range(per_group):
                category = categories[index % 2] if split == "composition" else ""
                rows.append(
                    {
                        "image": {"bytes": concept_png(concept, 2 * c + li + index), "path": None},
                        "item_id": f"{split}__{learner}__{concept}__{index:03d}",
                        "concept": concept,
                        "concept_kind": "style" if c == 0 else "object",
                        "learner": learner,
                        "prompt": "a photo of <V*>" if split == "concept" else "a photo of two <V*> on a table",
                        "caption": "" if split == "concept" else CAPTIONS[(concept, category)].format(index=index + 1),
                        "category": category,
                        "questions": [] if split == "concept" else [f"Is there a {concept}?"],
                        "reference_images": refs,
                        "seed": 100 * li + 10 * c + index,
                    }
                )
    return sorted(rows, key=lambda r: r["item_id"])


def make_conceptbed_dataset(path: Path, *, per_group: int = 3) -> Path:
    return write_dataset(
        path,
        CONCEPTBED_FEATURES,
        {"concept": conceptbed_rows("concept", per_group), "composition": conceptbed_rows("composition", per_group)},
    )


@pytest.fixture(scope="session")
def sub_dataset(tmp_path_factory) -> Path:
    return make_sub_dataset(tmp_path_factory.mktemp("sub") / "sub-filtered")


@pytest.fixture(scope="session")
def conceptbed_dataset(tmp_path_factory) -> Path:
    return make_conceptbed_dataset(tmp_path_factory.mktemp("cb") / "conceptbed")


class RunningServer:
    """An annotation server on a free port in a background thread."""

    def __init__(self, app) -> None:
        from conceptforge.filters.annotation.server import make_server, server_url, wait_until_serving

        self.app = app
        self.server = make_server(app, host="127.0.0.1", port=0)
        self.url = server_url(self.server)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        wait_until_serving(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def serve_study(tmp_path):
    """``serve_study(dataset_dir, study, **settings)`` -> RunningServer; closed after the test."""
    from conceptforge.filters.annotation.session import StudySettings, open_study

    running = []

    def start(dataset_dir: Path, study: str, **kwargs) -> RunningServer:
        kwargs.setdefault("db", tmp_path / f"{study}.sqlite")
        app, _ = open_study(StudySettings(dataset_dir=dataset_dir, study=study, **kwargs))
        running.append(RunningServer(app))
        return running[-1]

    yield start
    for server in running:
        server.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def make_sub():
    """The SUB dataset builder (tests cannot import conftest under --import-mode=importlib)."""
    return make_sub_dataset


@pytest.fixture
def make_conceptbed():
    return make_conceptbed_dataset
