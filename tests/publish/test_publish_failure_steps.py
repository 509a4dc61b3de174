"""A failed publish names the step that failed, and a 404 says what does not exist instead of
advising a rerun (R_NP04, R_NN10). Failures are injected into the local Hub server."""

from __future__ import annotations

import re

import pytest
from publish_helpers import make_dataset

from conceptforge.cards.publish import publish_dataset
from conceptforge.errors import HubError

REPO = "conceptforge-test/fresh"


def test_a_failed_tree_listing_of_the_new_repository_is_named(tmp_path, hub, hub_token):
    folder = make_dataset(tmp_path / "v1", variant=0)
    # the first tree listing is the new repository's, after creating it; a 400 (the client retries 5xx itself)
    hub.fail_next("tree", status=400)
    with pytest.raises(HubError) as raised:
        publish_dataset(folder, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    assert str(raised.value) == (
        f"publishing {REPO} v1.0.0 failed while listing the files of the new repository (HTTP 400: injected "
        "failure (tree)); no version was changed — rerun the same command to complete the release"
    )
    result = publish_dataset(folder, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    assert result.action == "published"  # the rerun completes the release


def test_a_404_says_what_does_not_exist_and_that_a_rerun_will_not_help(tmp_path, hub, hub_token):
    folder = make_dataset(tmp_path / "v1", variant=0)
    hub.fail_next("tree", status=404)
    with pytest.raises(HubError) as raised:
        publish_dataset(folder, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    text = str(raised.value)
    # the tree of the new repository's main commit: /api/datasets/ORG/NAME/tree/<40-hex commit>
    pattern = (
        rf"publishing {REPO} v1\.0\.0 failed while listing the files of the new repository: "
        rf"{re.escape(hub.url)}/api/datasets/{REPO}/tree/[0-9a-f]{{40}} does not exist \(HTTP 404: injected failure "
        rf"\(tree\)\); a rerun will not change that — check the repo id and that {re.escape(hub.url)} \(HF_ENDPOINT\) "
        "is the Hub you mean"
    )
    assert re.fullmatch(pattern, text), text
    assert "rerun the same command" not in text and hub_token not in text
