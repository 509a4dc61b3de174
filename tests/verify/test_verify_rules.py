"""Tiny-model SUB and ConceptBed releases verify with their tolerance rule; the comparison and
sampling pieces against values worked out by hand."""

from __future__ import annotations

import io
import json
import math
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptforge.commands import main
from conceptforge.generators.rebuild import EXACT, tolerance
from conceptforge.generators.verify import Key, choose, compare_values, image_distance
from tests.verify.verify_helpers import change_pixel, copy_release, differing_lines, edit_rows

SUB_SHARD = "data/candidates-00000-of-00001.parquet"


def _png(pixels) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(pixels, dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_image_distance_by_hand():
    a = _png([[[10, 20, 30], [40, 50, 60]]])  # 1x2 RGB: 6 values
    b = _png([[[10, 20, 30], [40, 52, 60]]])  # one value off by 2: MSE = 4/6
    psnr, pixels, peak = image_distance(a, b)
    assert psnr == pytest.approx(10 * math.log10(255**2 / (4 / 6)))  # 10*log10(65025*1.5) = 49.89 dB
    assert (pixels, peak) == (1, 2)
    assert image_distance(a, a)[0] == math.inf
    image = {"bytes": b, "path": "x.png"}
    assert compare_values({"bytes": a, "path": "x.png"}, image, "image", tolerance("test")) is None  # 49.9 >= 40
    assert compare_values({"bytes": a, "path": "x.png"}, image, "image", EXACT).startswith(
        "image: image bytes differ (PSNR 49.9 dB"
    )
    assert compare_values({"x": [1.0, math.nan]}, {"x": [1.0, math.nan]}, "m", EXACT) is None
    assert (
        compare_values({"x": [1.0, 2.0]}, {"x": [1.0, 2.5]}, "m", EXACT)
        == "m.x[1]: released 2.0, regenerated 2.5 (|diff| 0.5)"
    )


def test_sample_is_deterministic_and_spread_over_splits_and_configs():
    keys = [Key(c, s, f"{s}-{i:06d}") for c in ("one", "two") for s in ("train", "val", "gen") for i in range(50)]
    first = choose(keys, sample=12, items=None, config=None)
    assert first == choose(list(reversed(keys)), sample=12, items=None, config=None)  # order of listing does not matter
    assert len(first) == 12 and len({k.config for k in first}) == 2 and len({k.split for k in first}) == 3
    assert set(choose(keys, sample=5, items=None, config="two")) <= {k for k in keys if k.config == "two"}
    assert choose(keys, sample=None, items=None, config=None) == keys  # --all


def test_tiny_sub_release_verifies_with_the_psnr_rule(sub_release, tiny_flux, tmp_path, capsys, hub_offline):
    record = json.loads((sub_release / "provenance.json").read_text())
    rebuild = record["configs"]["default"]["rebuild"]
    assert record["generator"] == "sub" and rebuild["images_per_pair"] == 2 and len(rebuild["pairs"]) == 2
    assert rebuild["model"]["id"] == f".../{tiny_flux.name}" and rebuild["model"]["revision"].startswith(
        "local-sha256:"
    )
    assert str(tiny_flux.parent) not in (sub_release / "provenance.json").read_text()  # published: no local folders
    assert main(["verify", str(sub_release), "--all"]) == 2  # the card names a local folder: say which weights
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith(
        f"error: missing weights: diffusion model .../{tiny_flux.name} (local-sha256:"
    )
    assert error[0].endswith("was a local folder; pass --weights diffusion=PATH")

    assert main(["verify", str(sub_release), "--all", "--weights", f"diffusion={tiny_flux}"]) == 0
    out = capsys.readouterr().out
    assert "rule: images PSNR >= 40 dB, equal metadata (FLUX sampling" in out and "verified: 4 of 4 item(s)" in out

    # within the tolerance: a pixel off by one still verifies; an inverted image does not
    changed = copy_release(sub_release, tmp_path / "changed")

    def edit(rows):
        rows[0]["image"] = change_pixel(rows[0]["image"])
        with Image.open(io.BytesIO(rows[1]["image"]["bytes"])) as image:
            inverted = 255 - np.asarray(image.convert("RGB"))
        rows[1]["image"] = {**rows[1]["image"], "bytes": _png(inverted)}

    edit_rows(changed / SUB_SHARD, edit)
    assert main(["verify", str(changed), "--all", "--weights", f"diffusion={tiny_flux}"]) == 1
    printed = capsys.readouterr().out
    assert (
        "FAILED: 3 of 4 item(s)" in printed and "(1 within the PSNR tolerance, not byte-identical); 1 differ" in printed
    )
    lines = differing_lines(printed)
    assert len(lines) == 1 and "split=candidates: image: image bytes differ (PSNR" in lines[0]
    rows = pq.read_table(changed / SUB_SHARD).to_pylist()
    assert lines[0].startswith(f"differs: {rows[1]['item_id']} ")

    other = tmp_path / "other-flux"
    shutil.copytree(tiny_flux, other)
    (other / "model_index.json").write_text((other / "model_index.json").read_text() + "\n")
    assert main(["verify", str(sub_release), "--all", "--weights", f"diffusion={other}"]) == 2
    assert "is not the model the card names" in capsys.readouterr().err


def test_tiny_conceptbed_release_verifies_with_the_psnr_rule(conceptbed_release, capsys, hub_offline):
    out, sd, learners = conceptbed_release["out"], conceptbed_release["sd"], conceptbed_release["learners"]
    rebuild = json.loads((out / "provenance.json").read_text())["configs"]["default"]["rebuild"]
    assert "work_dir" not in rebuild and rebuild["model"]["id"] == f".../{sd.name}"
    assert list(rebuild["learners"]) == ["beagle"] and rebuild["learners"]["beagle"].startswith("local-sha256:")
    assert rebuild["captions"]["beagle"][0]["questions"] == ["is there the dog?", "is there a black nose?"]
    assert main(["verify", str(out), "--all", "--weights", f"diffusion={sd}"]) == 2
    assert "missing weights: the learned textual-inversion artifacts of beagle" in capsys.readouterr().err
    assert main(["verify", str(out), "--all", "--weights", f"diffusion={sd}", "--weights", f"learners={learners}"]) == 0
    printed = capsys.readouterr().out
    assert "rule: images PSNR >= 40 dB, equal metadata (diffusion sampling with learned concept weights" in printed
    assert "verified: 3 of 3 item(s)" in printed  # 2 concept images + 1 composition image
