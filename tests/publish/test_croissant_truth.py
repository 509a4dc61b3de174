"""croissant.json says only what is true of the release (issue 39.5): the maintenance plan's verify
command names the tag that exists (``@v1.0.0``, not ``@1.0.0``), and a release a human study was
applied to does not say "no data collected from people" beside its count of answers."""

from __future__ import annotations

import re

from datasets import Features, Value
from publish_helpers import tiny_card_metadata

from conceptforge.cards import DatasetMetadata
from conceptforge.cards.croissant import croissant_document
from conceptforge.cards.dataset_dir import SplitStats
from conceptforge.cards.release_source import parse_hub_reference

FEATURES = Features({"item_id": Value("string"), "label": Value("string")})
SPLITS = [SplitStats("test", 8, 100, ["data/test-00000-of-00001.parquet"])]


def _metadata(**overrides) -> DatasetMetadata:
    return tiny_card_metadata(
        **{"pretty_name": "Binding", "reproducible": True, "provenance": {"generator": "tests"}, **overrides}
    )


def test_the_maintenance_plan_verifies_the_tag_that_exists():
    document = croissant_document(_metadata(), FEATURES, SPLITS, repo_id="me/binding", version="v1.0.0")
    plan = document["rai:dataReleaseMaintenancePlan"]
    commands = re.findall(r"`conceptforge verify ([^`]+)`", plan)
    assert commands == ["me/binding@v1.0.0"]
    assert parse_hub_reference(commands[0]) == ("me/binding", "v1.0.0")  # what verify reads: the tag
    assert document["version"] == "1.0.0"  # schema.org's version stays the bare number


def test_a_human_validated_release_does_not_say_nobody_was_asked():
    plain = croissant_document(_metadata(), FEATURES, SPLITS, repo_id="me/sub", version="v1.0.0")
    assert plain["rai:dataCollectionType"] == [
        "Others: synthetic generation by software (no data collected from people)"
    ]
    studied = _metadata(
        provenance={"generator": "tests", "study": "sub-faithfulness"},
        filter_stats={"progress": {"answers": 62, "annotated_items": 20}},
    )
    document = croissant_document(studied, FEATURES, SPLITS, repo_id="me/sub-hv", version="v1.0.0")
    kinds = " ".join(document["rai:dataCollectionType"])
    assert "no data collected from people" not in kinds
    assert "answers collected from people" in kinds and "sub-faithfulness" in kinds
    assert document["rai:annotationsPerItem"] == "3.10 answers per annotated item (62 on 20)"
