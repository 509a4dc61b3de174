"""The ConceptBed paper preset stays byte-identical (issue 46).

Why: making ConceptBed general (concepts from a spec file) must not change one byte of what the
paper's run writes. The hashes below were recorded from main before the spec existed; a tiny
Textual Inversion run over a style (PACS), an object (ImageNet) and a bird (CUB) with composite
captions is made again and every file of the release is compared, by its own hash.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.specs.recordings import EARLIER_MACHINES, EPYC_AVX512, assert_recorded

torch.set_num_threads(1)

#: sha256 of every file the run writes outside its work folder, recorded on unchanged main.
RECORDED = {
    "README.md": "3c97897db3bc4320210dce4ab397b97a0e2394397b918fafaed521cb48b357f4",
    "data/composition-00000-of-00001.parquet": "65c1a0de6f3ca464c9a99b5a5203607b86a4db0d0fe0b119c4723b1d1e632832",
    "data/concept-00000-of-00001.parquet": "1a6750966758bef491d6b62e5fb407c06b62203a4bb00bc4330f4f582038c7e3",
    # re-recorded on purpose: each tile names its concept first (a learner's placeholder is the same for
    # every concept) and captions take three lines, an ellipsis where cut; every other file is unchanged
    "grid.png": "fdd875638b07690daf7fe50b652a6ec3177ad62dac1078435dd955c19babc8c3",
    "provenance.json": "4ea757bde8fa39e1b9fdd4d889b03b5d140d3232c80c33b6391413b08630ed78",
}
#: The same files on an AVX-512 EPYC (tests/specs/recordings.py): the tiny SD's pixels end in
#: other bits there, and the card's README with them.
RECORDINGS = {
    EARLIER_MACHINES: RECORDED,
    EPYC_AVX512: {
        **RECORDED,
        "README.md": "3c620990f1eaf322beba6c0060e018085c78bcea22da0dc263236f45ced750ec",
        "data/composition-00000-of-00001.parquet": "379a72df18e565858f049f4b78b11a2673dfce98fb8b989e609eebe15ac47420",
        "data/concept-00000-of-00001.parquet": "d01deb391a7066b54490092e4203aed36129eff888f1031a5978aa4ef74c51dc",
        "grid.png": "a1e7d0aa28f99802f4888dd054dd862cea26d87f2f3f9de620e012158765ff68",
    },
}

CONCEPTS = ["art_painting", "beagle", "001.Black_footed_Albatross"]


def _image(seed: int) -> Image.Image:
    """A deterministic noise image (seeded by number, never by Python's salted str hash)."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 200, size=(40, 40, 3)).astype(np.uint8))


@pytest.fixture(scope="module")
def paper_inputs(tmp_path_factory) -> dict[str, Path]:
    """Tiny SD, PACS/ImageNet/CUB folders, captions and the old-format concept spec."""
    from conceptforge.generators.conceptbed.concepts import PACS_ENTITIES
    from conceptforge.testing.tiny_conceptbed import build_tiny_sd

    root = tmp_path_factory.mktemp("paper")
    for e, entity in enumerate(PACS_ENTITIES):
        folder = root / "PACS" / "art_painting" / entity
        folder.mkdir(parents=True)
        _image(10 + e).save(folder / "0.jpg")
    beagle = root / "imagenet" / "train" / "n02088364"
    beagle.mkdir(parents=True)
    for k in range(3):
        _image(100 + k).save(beagle / f"n02088364_{k}.JPEG")
    (root / "imagenet" / "LOC_synset_mapping.txt").write_text("n02088364 beagle\n")
    bird = root / "CUB" / "images" / "001.Black_footed_Albatross"
    bird.mkdir(parents=True)
    for k in range(2):
        _image(200 + k).save(bird / f"{k}.jpg")
    captions = root / "captions.jsonl"
    lines = [
        {"concept": "beagle", "caption": "the dog has a black nose"},
        {"concept": "beagle", "caption": "two dogs standing on grass"},
        {"concept": "001.Black_footed_Albatross", "caption": "a bird flying over the sea"},
    ]
    captions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    spec = root / "concepts.json"
    spec.write_text(
        json.dumps(
            {
                "pacs_root": "PACS",
                "imagenet_root": "imagenet/train",
                "cub_root": "CUB",
                "concepts": CONCEPTS,
                "captions": "captions.jsonl",
            }
        )
    )
    return {"spec": spec, "model": build_tiny_sd(root / "sd")}


#: A learned artifact's fingerprint hashes its learner.json, which names the model folder by its
#: absolute path (a new temporary folder in every test run): masked in provenance.json. The
#: learned weights themselves show in every generated image, which is compared byte for byte.


def _stable_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name != "provenance.json":
        return data
    record = json.loads(data)
    for config in record["configs"].values():
        config["rebuild"]["learners"] = {name: "<fingerprint>" for name in config["rebuild"]["learners"]}
    return json.dumps(record, sort_keys=True).encode()


def release_hashes(out: Path) -> dict[str, str]:
    """sha256 of every file under ``out`` but the run's work folder (weights, store, markers)."""
    return {
        path.relative_to(out).as_posix(): hashlib.sha256(_stable_bytes(path)).hexdigest()
        for path in sorted(out.rglob("*"))
        if path.is_file() and ".work" not in path.relative_to(out).parts
    }


def paper_run(paper_inputs: dict[str, Path], out: Path, *extra: str) -> dict[str, str]:
    """The run through the command line; the card records the command line (sys.argv), so it is
    fixed here rather than being pytest's own."""
    from conceptforge.commands import main

    sys.argv[:] = ["conceptforge", "generate", "conceptbed"]

    code = main(
        [
            "generate",
            "conceptbed",
            "--learner",
            "textual-inversion",
            "--steps",
            "2",
            "--model-id",
            str(paper_inputs["model"]),
            "--num-images",
            "2",
            "--num-inference-steps",
            "2",
            "--resolution",
            "32",
            "--out",
            str(out),
            *extra,
        ]
    )
    assert code == 0
    return release_hashes(out)


def test_default_run_is_byte_identical_to_main(tmp_path, paper_inputs, hub_offline, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    hashes = paper_run(paper_inputs, tmp_path / "out", "--concepts", str(paper_inputs["spec"]))
    assert_recorded(hashes, RECORDINGS)


def test_paper_preset_is_byte_identical_to_main(tmp_path, paper_inputs, hub_offline, monkeypatch):
    """The same run read as the built-in spec: Table 9's concepts from the preset, the folders,
    selection and captions from the JSON concept spec."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    hashes = paper_run(
        paper_inputs, tmp_path / "out", "--preset", "conceptbed-paper", "--concepts", str(paper_inputs["spec"])
    )
    assert_recorded(hashes, RECORDINGS)
    assert not (tmp_path / "out" / "benchmark_spec.yaml").exists()  # a preset run carries no spec file


def test_paper_preset_holds_table_9():
    """The preset's concepts are the library's 284, in Table 9's order, with the same parent words."""
    from conceptforge.generators.conceptbed.concepts import library
    from conceptforge.generators.conceptbed.spec_resolution import CONCEPTBED_PAPER_PRESET, load_conceptbed_spec

    preset = load_conceptbed_spec(preset=CONCEPTBED_PAPER_PRESET).spec
    read = {c.name: (c.kind, c.class_noun) for c in preset.concepts}
    assert list(read) == list(library()) and read == library()
    kinds = {c.kind: c.images.kind for c in preset.concepts}
    assert kinds == {"style": "pacs", "object": "imagenet", "cub": "cub"}
