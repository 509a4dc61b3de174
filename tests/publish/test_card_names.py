"""The card and croissant.json name things as a reader finds them (CARD1, CRO2, the Croissant
endpoint cross-check): a paper by its authors and title, not "paper 004"; every local model the
same way (``.../<folder> @ local-sha256:…``) whether it was given as a relative path, an absolute
one or already elided; and every URL the Hub the release goes to."""

from __future__ import annotations

import json

from datasets import Features, Value
from publish_helpers import binding_release, tiny_card_metadata

from conceptforge.cards import DatasetMetadata
from conceptforge.cards.card import render_card
from conceptforge.cards.croissant import croissant_document
from conceptforge.cards.dataset_dir import SplitStats

FEATURES = Features({"item_id": Value("string"), "label": Value("string")})
SPLITS = [SplitStats("test", 8, 100, ["data/test-00000-of-00001.parquet"])]
HUB_SHA = "a" * 40


def _metadata(provenance) -> DatasetMetadata:
    return tiny_card_metadata(pretty_name="SUB (tiny)", provenance=provenance)


PROVENANCE = {
    "generator": "tests",
    "models": [
        {"role": "vqa", "id": "fx/vlm", "revision": "local-sha256:0123456789abcdef"},  # given as a relative path
        {"role": "classifier", "id": "org/cub-classifier", "revision": HUB_SHA},  # a Hub model: as it is
    ],
    "model_id": ".../flux",  # the FLUX column's id, elided when the rows were assembled
    "model_revision": "local-sha256:fedcba9876543210",
}


def test_croissant_and_card_spell_every_local_model_one_way():
    document = croissant_document(_metadata(PROVENANCE), FEATURES, SPLITS, repo_id="me/sub", version="v1.0.0")
    # by hand: both local folders as .../<last path segment> @ their fingerprint; the Hub id untouched
    assert document["rai:machineAnnotationTools"] == [
        "vqa: .../vlm @ local-sha256:0123456789abcdef",
        f"classifier: org/cub-classifier @ {HUB_SHA}",
        "diffusion: .../flux @ local-sha256:fedcba9876543210",
    ]
    card = render_card(_metadata(PROVENANCE), FEATURES, SPLITS, has_grid=False)
    assert "| vqa | `.../vlm` | `local-sha256:0123456789abcdef` |" in card
    assert f"| classifier | `org/cub-classifier` | `{HUB_SHA}` |" in card
    assert "fx/vlm" not in json.dumps(document)  # (the card's machine-readable provenance keeps the id as given)


def test_croissant_urls_name_the_hub_the_release_goes_to():
    hub = "http://127.0.0.1:8321/"  # another endpoint (HF_ENDPOINT), with a trailing slash
    document = croissant_document(
        _metadata({"generator": "tests"}), FEATURES, SPLITS, repo_id="me/sub", version="v1.0.0", hub=hub
    )
    assert document["url"] == "http://127.0.0.1:8321/datasets/me/sub"
    assert document["creator"]["url"] == "http://127.0.0.1:8321/me"
    repo = next(d for d in document["distribution"] if d["@type"] == "cr:FileObject")
    assert repo["contentUrl"] == "http://127.0.0.1:8321/datasets/me/sub/tree/refs%2Ftags%2Fv1.0.0"
    assert "huggingface.co" not in json.dumps(document)


def test_the_binding_card_names_the_paper_and_its_section(tmp_path):
    binding, _ = binding_release(tmp_path / "binding")
    card = (binding / "README.md").read_text()
    assert "paper 004" not in card
    assert (
        "(Section 3 of Lewis et al., *Does CLIP Bind Concepts? Probing Compositionality in Large Image Models* "
        "(EACL Findings 2024), and the objects and relations in the picture" in " ".join(card.split())
    )
