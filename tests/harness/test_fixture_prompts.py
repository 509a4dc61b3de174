"""Issue #39: a tiny model whose tokenizer truncates every prompt of a group to the same ids makes
an argmax test that cannot fail. Each tiny text encoder the evaluation tests use must give the
prompts they ask about distinct token ids; the check itself refuses the old truncating fixtures."""

from __future__ import annotations

import pytest

from conceptforge.testing.tiny_models import build_tiny_clip, build_tiny_siglip, check_distinct_token_ids
from tests.evaluation_fixtures import fixture_prompts


def test_the_shared_tiny_clip_tells_every_prompt_apart(tiny_clip_dir):
    check_distinct_token_ids(tiny_clip_dir, fixture_prompts())  # the fixture checks it too; say so here


@pytest.mark.parametrize("family", ["siglip", "blip", "vilt"])
def test_every_tiny_text_encoder_tells_every_prompt_apart(family, tmp_path):
    from conceptforge.testing.tiny_compmap import build_tiny_blip, build_tiny_vilt

    build = {"siglip": build_tiny_siglip, "blip": build_tiny_blip, "vilt": build_tiny_vilt}[family]
    check_distinct_token_ids(build(tmp_path / family), fixture_prompts())


@pytest.mark.parametrize(
    "build", [lambda p: build_tiny_clip(p, max_length=32), lambda p: build_tiny_siglip(p, max_length=16)]
)
def test_the_old_truncating_fixtures_are_refused(build, tmp_path):
    with pytest.raises(ValueError, match="tokenise to the same ids"):
        check_distinct_token_ids(build(tmp_path / "tiny"), fixture_prompts())
