"""Fixtures for the SUB tests: a miniature CUB_200_2011 directory and a tiny random FLUX pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

COLOURS = [
    "blue",
    "brown",
    "iridescent",
    "purple",
    "rufous",
    "grey",
    "yellow",
    "olive",
    "green",
    "pink",
    "orange",
    "black",
    "white",
    "red",
    "buff",
]
PATTERNS = ["solid", "spotted", "striped", "multi-colored"]
# CUB's 28 groups in attributes.txt order, with their values (312 attributes in all).
GROUPS = [
    (
        "has_bill_shape",
        [
            "curved_(up_or_down)",
            "dagger",
            "hooked",
            "needle",
            "hooked_seabird",
            "spatulate",
            "all-purpose",
            "cone",
            "specialized",
        ],
    ),
    ("has_wing_color", COLOURS),
    ("has_upperparts_color", COLOURS),
    ("has_underparts_color", COLOURS),
    ("has_breast_pattern", PATTERNS),
    ("has_back_color", COLOURS),
    (
        "has_tail_shape",
        ["forked_tail", "rounded_tail", "notched_tail", "fan-shaped_tail", "pointed_tail", "squared_tail"],
    ),
    ("has_upper_tail_color", COLOURS),
    (
        "has_head_pattern",
        [
            "spotted",
            "malar",
            "crested",
            "masked",
            "unique_pattern",
            "eyebrow",
            "eyering",
            "plain",
            "eyeline",
            "striped",
            "capped",
        ],
    ),
    ("has_breast_color", COLOURS),
    ("has_throat_color", COLOURS),
    ("has_eye_color", [c for c in COLOURS if c != "iridescent"]),
    ("has_bill_length", ["about_the_same_as_head", "longer_than_head", "shorter_than_head"]),
    ("has_forehead_color", COLOURS),
    ("has_under_tail_color", COLOURS),
    ("has_nape_color", COLOURS),
    ("has_belly_color", COLOURS),
    ("has_wing_shape", ["rounded-wings", "pointed-wings", "broad-wings", "tapered-wings", "long-wings"]),
    (
        "has_size",
        [
            "large_(16_-_32_in)",
            "small_(5_-_9_in)",
            "very_large_(32_-_72_in)",
            "medium_(9_-_16_in)",
            "very_small_(3_-_5_in)",
        ],
    ),
    (
        "has_shape",
        [
            "upright-perching_water-like",
            "chicken-like-marsh",
            "long-legged-like",
            "duck-like",
            "owl-like",
            "gull-like",
            "hummingbird-like",
            "pigeon-like",
            "tree-clinging-like",
            "hawk-like",
            "sandpiper-like",
            "upland-ground-like",
            "swallow-like",
            "perching-like",
        ],
    ),
    ("has_back_pattern", PATTERNS),
    ("has_tail_pattern", PATTERNS),
    ("has_belly_pattern", PATTERNS),
    ("has_primary_color", COLOURS),
    ("has_leg_color", COLOURS),
    ("has_bill_color", COLOURS),
    ("has_crown_color", COLOURS),
    ("has_wing_pattern", PATTERNS),
]
ATTRIBUTES = [f"{group}::{value}" for group, values in GROUPS for value in values]
# A miniature class list: the paper's 33 reference birds, its guidance birds and two others.
CLASSES = [
    "Western_Grebe",
    "Black_and_white_Warbler",
    "European_Goldfinch",
    "Pacific_Loon",
    "White_Pelican",
    "Cedar_Waxwing",
    "Gadwall",
    "Downy_Woodpecker",
    "Pileated_Woodpecker",
    "Purple_Finch",
    "Common_Raven",
    "White_breasted_Nuthatch",
    "Northern_Flicker",
    "Mallard",
    "Tropical_Kingbird",
    "Tree_Swallow",
    "Song_Sparrow",
    "Green_Violetear",
    "Gray_Catbird",
    "Green_Jay",
    "Cardinal",
    "Red_bellied_Woodpecker",
    "Pied_Kingfisher",
    "Rufous_Hummingbird",
    "Dark_eyed_Junco",
    "Green_Kingfisher",
    "Horned_Puffin",
    "Anna_Hummingbird",
    "Barn_Swallow",
    "American_Goldfinch",
    "Lazuli_Bunting",
    "Blue_Jay",
    "Painted_Bunting",
    "Brown_Thrasher",
    "Black_footed_Albatross",
    "Cactus_Wren",
]
# Class-level percentages that the tests rely on; everything else is 0..40 (absent).
KNOWN = {
    ("European_Goldfinch", "has_crown_color::black"): 80.0,  # S+ = S-: dropped in the paper spec
    ("Blue_Jay", "has_crown_color::blue"): 90.0,
    ("Blue_Jay", "has_crown_color::white"): 60.0,  # also present, less often: S- is blue
    ("Cardinal", "has_breast_color::red"): 95.0,  # red breast dropped for Cardinal
    ("Song_Sparrow", "has_breast_pattern::striped"): 85.0,
    ("Cactus_Wren", "has_wing_pattern::striped"): 99.0,  # most typical class for striped wings
    ("Brown_Thrasher", "has_wing_pattern::striped"): 70.0,
}


def write_mini_cub(root: Path, *, with_attributes_beside: bool = True) -> Path:
    """A CUB_200_2011 folder in the tarball's layout with a few classes and all 312 attributes."""
    cub = root / "CUB_200_2011"
    (cub / "attributes").mkdir(parents=True, exist_ok=True)
    (cub / "classes.txt").write_text("".join(f"{i} {i:03d}.{name}\n" for i, name in enumerate(CLASSES, 1)))
    text = "".join(f"{i} {name}\n" for i, name in enumerate(ATTRIBUTES, 1))
    (root if with_attributes_beside else cub / "attributes").joinpath("attributes.txt").write_text(text)
    rng = np.random.default_rng(0)
    table = rng.uniform(0.0, 40.0, size=(len(CLASSES), len(ATTRIBUTES)))
    for (bird, attribute), value in KNOWN.items():
        table[CLASSES.index(bird), ATTRIBUTES.index(attribute)] = value
    np.savetxt(cub / "attributes" / "class_attribute_labels_continuous.txt", table, fmt="%.6f")
    return cub


@pytest.fixture(scope="session")
def mini_cub(tmp_path_factory) -> Path:
    return write_mini_cub(tmp_path_factory.mktemp("cub"))


@pytest.fixture(scope="session")
def tiny_flux_dir(tmp_path_factory, random_flux_seed0) -> Path:
    """A tiny random FluxPipeline saved like a Hub snapshot; loaded back with from_pretrained
    (a copy of the session's one build: tests/conftest.py)."""
    import shutil

    return shutil.copytree(random_flux_seed0, tmp_path_factory.mktemp("tiny-flux"), dirs_exist_ok=True)


@pytest.fixture(scope="session")
def tiny_flux(tiny_flux_dir):
    """The tiny pipeline loaded through TDGFlux.from_pretrained (FluxPipeline.from_pretrained)."""
    from conceptforge.generators.sub.flux_tdg import TDGFlux

    return TDGFlux.from_pretrained(str(tiny_flux_dir), device="cpu", max_sequence_length=16)
