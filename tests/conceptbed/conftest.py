"""Fixtures for the ConceptBed tests: a tiny SD pipeline saved once, small reference folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

torch.set_num_threads(1)  # the shared 2-core machine is far slower with two threads


@pytest.fixture(autouse=True)
def _offline(hub_offline):
    """Tiny models load from local folders; offline mode makes a wrong path fail without a request."""


def _image(seed: int, size: int = 40, tint: tuple[int, int, int] = (0, 0, 0)) -> Image.Image:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 160, size=(size, size, 3)) + np.array(tint)
    return Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))


@pytest.fixture(scope="session")
def tiny_sd(tmp_path_factory) -> Path:
    from conceptforge.testing.tiny_conceptbed import build_tiny_sd

    return build_tiny_sd(tmp_path_factory.mktemp("tiny-sd") / "sd")


@pytest.fixture(scope="session")
def tiny_ldm(tmp_path_factory) -> Path:
    """A tiny LDMTextToImagePipeline (CompVis/ldm-text2im-large-256's layout, KL autoencoder)."""
    from conceptforge.testing.tiny_conceptbed import build_tiny_ldm

    return build_tiny_ldm(tmp_path_factory.mktemp("tiny-ldm") / "ldm")


@pytest.fixture(scope="session")
def datasets_root(tmp_path_factory) -> Path:
    """PACS (2 styles x 7 entities), ImageNet (WordNet-id folders + mapping), CUB (2 classes)."""
    root = tmp_path_factory.mktemp("refs")
    from conceptforge.generators.conceptbed.concepts import PACS_ENTITIES

    for s, style in enumerate(("art_painting", "sketch")):
        for e, entity in enumerate(PACS_ENTITIES):
            folder = root / "PACS" / "kfold" / style / entity
            folder.mkdir(parents=True)
            for k in range(2):
                _image(100 * s + 10 * e + k, tint=(80 * s, 0, 0)).save(folder / f"{k}.jpg")
    imagenet = root / "imagenet" / "train"
    for wnid, name in (("n02088364", "beagle"), ("n02123045", "tabby")):
        (imagenet / wnid).mkdir(parents=True)
        for k in range(3):
            _image(hash(name) % 1000 + k, tint=(0, 60, 0)).save(imagenet / wnid / f"{wnid}_{k}.JPEG")
    (root / "imagenet" / "LOC_synset_mapping.txt").write_text(
        "n02088364 beagle\nn02123045 tabby, tabby cat\nn01440764 tench, Tinca tinca\n"
    )
    for c, name in enumerate(("001.Black_footed_Albatross", "002.Laysan_Albatross")):
        (root / "CUB" / "images" / name).mkdir(parents=True)
        for k in range(2):
            _image(500 + 10 * c + k, tint=(0, 0, 60)).save(root / "CUB" / "images" / name / f"{k}.jpg")
    return root


@pytest.fixture()
def captions_file(tmp_path, datasets_root) -> Path:
    path = tmp_path / "captions.jsonl"
    lines = [
        {"concept": "beagle", "caption": "the dog has a black nose"},
        {
            "concept": "beagle",
            "caption": "two dogs standing on grass",
            "image": str(datasets_root / "imagenet" / "train" / "n02088364" / "n02088364_0.JPEG"),
        },
        {"concept": "beagle", "caption": "a cat on a sofa"},  # no 'dog': skipped
        {"concept": "tabby", "caption": "cat is licking herself", "categories": ["action"]},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture()
def write_spec():
    """``write_spec(tmp_path, datasets_root, concepts, captions=None, **extra) -> spec path``."""
    return _write_spec


def _write_spec(tmp_path: Path, datasets_root: Path, concepts, captions: Path | None = None, **extra) -> Path:
    spec = {
        "pacs_root": str(datasets_root / "PACS"),
        "imagenet_root": str(datasets_root / "imagenet" / "train"),
        "cub_root": str(datasets_root / "CUB"),
        "concepts": concepts,
        **extra,
    }
    if captions is not None:
        spec["captions"] = str(captions)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture()
def tiny_run_args():
    """``tiny_run_args(learner, spec, out, model, *extra, num_images=1)``: `generate conceptbed`
    flags for a tiny run (2 sampling steps, 32 px), ``extra`` appended."""
    return _tiny_run_args


def _tiny_run_args(learner: str, spec: Path, out: Path, model: Path, *extra: str, num_images: int = 1) -> list[str]:
    return [
        "--learner",
        learner,
        "--concepts",
        str(spec),
        "--out",
        str(out),
        "--model-id",
        str(model),
        "--num-images",
        str(num_images),
        "--num-inference-steps",
        "2",
        "--resolution",
        "32",
        *extra,
    ]


@pytest.fixture(scope="session")
def oracles(tmp_path_factory) -> dict[str, Path]:
    """Tiny oracles: style / object / CUB classifiers and a ViLT VQA model."""
    from conceptforge.testing.tiny_conceptbed import build_tiny_classifier, build_tiny_vilt

    root = tmp_path_factory.mktemp("oracles")
    return {
        "style": build_tiny_classifier(root / "style", ["art_painting", "sketch", "unrelated"], arch="resnet"),
        "object": build_tiny_classifier(root / "object", ["beagle", "Tabby", "not-a-concept"], arch="convnext"),
        "cub": build_tiny_classifier(
            root / "cub", ["001.Black_footed_Albatross", "002.Laysan_Albatross"], arch="resnet"
        ),
        "vqa": build_tiny_vilt(root / "vilt"),
    }


@pytest.fixture()
def oracle_flags(oracles) -> list[str]:
    """`evaluate conceptbed`'s oracle flags for :func:`oracles`, on the CPU."""
    return [
        "--style-oracle",
        str(oracles["style"]),
        "--object-oracle",
        str(oracles["object"]),
        "--cub-oracle",
        str(oracles["cub"]),
        "--vqa-model",
        str(oracles["vqa"]),
        "--device",
        "cpu",
    ]


@pytest.fixture()
def run_script(capsys):
    """Run ``scripts/<name>``'s command (``conceptforge …``) in this process: (exit code, stdout, stderr).

    In-process keeps the area fast (a subprocess pays ~10 s of imports); each script also has
    one real subprocess test for its exit code and error line.
    """
    from conceptforge.commands import main

    commands = {
        "generate_conceptbed.py": ["generate", "conceptbed"],
        "evaluate.py": ["evaluate"],
        "train_oracle.py": ["train-oracle"],
        "verify.py": ["verify"],
    }

    def run(name: str, *args: str):
        capsys.readouterr()
        code = main([*commands[name], *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
