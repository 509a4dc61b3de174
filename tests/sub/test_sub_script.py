"""`conceptforge generate sub` (and scripts/generate_sub.py) end to end on the tiny FLUX pipeline and the miniature CUB."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import ClassLabel, load_dataset

from conceptforge.cards.provenance import local_fingerprint
from conceptforge.commands import invoke
from tests.sub.sub_helpers import TINY_FLUX_ARGS, write_candidate_spec

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "generate_sub.py"


def main(argv):
    """`conceptforge generate sub ARGV` in this process; errors propagate."""
    return invoke(["generate", "sub", *argv])


@pytest.fixture
def candidate_spec(tmp_path):
    return write_candidate_spec(tmp_path / "candidates.json")


def _args(out, cub, model, spec, *extra):
    where = ["--cub-dir", str(cub), "--out", str(out), "--model", str(model), "--candidate-spec", str(spec)]
    return [*where, "--images-per-pair", "2", *TINY_FLUX_ARGS, *extra]


def _data_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "data").glob("*.parquet"))}


def test_generate_resume_and_shards_give_identical_datasets(tmp_path, mini_cub, tiny_flux_dir, candidate_spec, capsys):
    clean = tmp_path / "clean"
    assert main(_args(clean, mini_cub, tiny_flux_dir, candidate_spec)) == 0
    assert "wrote 8 images (4 pairs)" in capsys.readouterr().out

    ds = load_dataset(str(clean))
    assert list(ds) == ["candidates"]
    rows = ds["candidates"]
    assert rows.num_rows == 8
    row = rows[0]
    assert row["item_id"] == "Blue_Jay__has_crown_color--black__00000"
    assert (row["bird"], row["attribute"], row["group"], row["value"], row["category"]) == (
        "Blue_Jay",
        "has_crown_color::black",
        "has_crown_color",
        "black",
        "colour",
    )
    assert row["removed_attribute"] == "has_crown_color::blue"
    assert row["prompt_reference"] == "A photo of a Blue Jay with black colored feathers on the crown of its head"
    assert row["prompt_guidance"] == "A photo of a bird with black colored feathers on the crown of its head"
    assert (row["tdg_k"], row["tdg_tmin"], row["tdg_tmax"]) == pytest.approx((10.0, 0.2, 0.9))
    assert row["image"].size == (32, 32) and row["num_inference_steps"] == 2 and row["guidance_scale"] == 3.5
    # a local folder's revision is its fingerprint, the spelling every model of the card has (CRO2)
    assert row["model_revision"] == local_fingerprint(tiny_flux_dir) and row["generation_mode"] == "tdg"
    pattern = rows.filter(lambda r: r["attribute"] == "has_tail_pattern::solid")[0]
    assert pattern["tdg_tmax"] == pytest.approx(0.6) and pattern["guidance_bird"] == "Gray_Catbird"
    assert len(set(rows["seed"])) == 8
    # The published SUB's closed-set labels, names readable through the features (33 birds, `--` names)
    bird_label, attr_label = rows.features["bird_label"], rows.features["attr_label"]
    assert (
        isinstance(bird_label, ClassLabel) and bird_label.num_classes == 33 and bird_label.names[0] == "Western_Grebe"
    )
    assert isinstance(attr_label, ClassLabel) and attr_label.num_classes == 32
    assert all("--" in name and "::" not in name and name.startswith("has_") for name in attr_label.names)
    for r in rows.select_columns(["bird", "attribute", "bird_label", "attr_label"]):
        assert bird_label.int2str(r["bird_label"]) == r["bird"]
        assert attr_label.int2str(r["attr_label"]) == r["attribute"].replace("::", "--")
    assert attr_label.int2str(row["attr_label"]) == "has_crown_color--black"
    card = (clean / "README.md").read_text()
    assert "license: cc-by-nc-4.0" in card and "SUB candidates" in card and (clean / "grid.png").exists()
    assert "- en" in card and "extended|cub-200-2011" in card and "_Not written yet._" not in card
    for section in ("## Uses", "### Out-of-scope use", "## Bias, Risks and Limitations", "## Annotations"):
        assert section in card

    # Interrupted after 3 images (chunks of 2: one chunk kept, one cut short), then resumed:
    # byte-identical to the clean run.
    resumed = tmp_path / "resumed"
    assert main(_args(resumed, mini_cub, tiny_flux_dir, candidate_spec, "--max-items", "3", "--chunk-size", "2")) == 0
    assert not (resumed / "README.md").exists()  # incomplete runs never look complete
    assert main(_args(resumed, mini_cub, tiny_flux_dir, candidate_spec, "--chunk-size", "2")) == 0
    assert _data_bytes(resumed) == _data_bytes(clean)

    # Two explicit shards: the first says what is missing, the last to finish assembles;
    # a plain rerun finds it assembled. Identical again, nothing made twice.
    sharded = tmp_path / "sharded"

    def shard(index: int) -> list:
        return _args(sharded, mini_cub, tiny_flux_dir, candidate_spec, "--num-shards", "2", "--shard-index", str(index))

    capsys.readouterr()
    assert main([*shard(0), "--chunk-size", "2"]) == 0
    first = capsys.readouterr().out
    assert "made 4" in first and "4 of 8 items (2 chunks) are still missing, in shard(s) 1 of 2" in first
    assert "conceptforge assemble" in first and not (sharded / "README.md").exists()
    assert main([*shard(1), "--chunk-size", "2"]) == 0
    assert (sharded / "README.md").exists()
    capsys.readouterr()
    assert main(_args(sharded, mini_cub, tiny_flux_dir, candidate_spec, "--chunk-size", "2")) == 0
    assert "made 0, already done 8; " in (out := capsys.readouterr().out) and "was already assembled" in out
    assert _data_bytes(sharded) == _data_bytes(clean)

    # A resume with other settings is refused instead of mixing two datasets.
    from conceptforge.errors import ConceptforgeError

    with pytest.raises(ConceptforgeError, match="differs in: steps"):
        main(_args(resumed, mini_cub, tiny_flux_dir, candidate_spec, "--steps", "3", "--chunk-size", "2"))


def test_prompt_only_baseline_shares_noise_with_tdg(tmp_path, mini_cub, tiny_flux_dir, candidate_spec):
    out = tmp_path / "baseline"
    extra = ["--mode", "prompt-only", "--pairs", "Blue_Jay=has_crown_color::black", "--images-per-pair", "1"]
    assert main(_args(out, mini_cub, tiny_flux_dir, candidate_spec, *extra)) == 0
    row = load_dataset(str(out))["candidates"][0]
    assert (
        row["generation_mode"] == "prompt-only" and row["prompt_guidance"] == "" and row["tdg_k"] != row["tdg_k"]
    )  # NaN
    from conceptforge.engine.workitems import derive_seed

    assert row["seed"] == derive_seed(0, "Blue_Jay", "has_crown_color::black", 0)


def test_dry_run_and_errors(tmp_path, mini_cub, candidate_spec, capsys):
    from conceptforge.errors import ConceptforgeError

    assert (
        main(["--cub-dir", str(mini_cub), "--out", str(tmp_path / "x"), "--dry-run", "--seconds-per-image", "9"]) == 0
    )
    text = capsys.readouterr().out
    assert "pairs: 1052 (colour 888, pattern 131, shape 33)" in text
    assert "dropped (bird already has S+): 4" in text
    assert "images: 526000 (500 per pair)" in text and "estimated GPU-hours: 1,315\n" in text
    assert not (tmp_path / "x").exists()
    with pytest.raises(
        ConceptforgeError, match="--pairs selects nothing for: European_Goldfinch=has_crown_color::black \\(dropped"
    ):
        main(
            [
                "--cub-dir",
                str(mini_cub),
                "--out",
                str(tmp_path / "x"),
                "--dry-run",
                "--pairs",
                "European_Goldfinch=has_crown_color::black",
            ]
        )
    with pytest.raises(ConceptforgeError, match="--license is required"):
        main(["--cub-dir", str(mini_cub), "--out", str(tmp_path / "x"), "--model", str(tmp_path)])
    with pytest.raises(ConceptforgeError, match="use --mode prompt-only"):
        main(
            [
                "--cub-dir",
                str(mini_cub),
                "--out",
                str(tmp_path / "x"),
                "--reference-selection",
                "--license",
                "cc-by-4.0",  # a valid id: --license is checked at parse now
                "--model",
                str(tmp_path),
            ]
        )


def _run_script(*args, env_extra=None):
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        **(env_extra or {}),
    }
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.heavy
def test_script_reference_selection_offline_subprocess(tmp_path, mini_cub, tiny_flux_dir):
    out = tmp_path / "refsel"
    done = _run_script(
        "--mode",
        "prompt-only",
        "--reference-selection",
        "--classes",
        "Blue_Jay",
        "Cactus_Wren",
        "--images-per-pair",
        "1",
        "--cub-dir",
        str(mini_cub),
        "--out",
        str(out),
        "--model",
        str(tiny_flux_dir),
        "--resolution",
        "32",
        "--steps",
        "2",
        "--max-sequence-length",
        "16",
        "--license",
        "cc-by-nc-4.0",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = load_dataset(str(out))["candidates"]
    assert rows["item_id"] == ["Blue_Jay__plain__00000", "Cactus_Wren__plain__00000"]
    assert rows["prompt_reference"] == ["A photo of a Blue Jay", "A photo of a Cactus Wren"]
    assert set(rows["attribute"]) == {""} and set(rows["removed_attribute"]) == {""} and set(rows["group"]) == {""}


def test_script_without_weights_or_gpu_says_what_is_needed(tmp_path, mini_cub):
    done = _run_script(
        "--cub-dir",
        str(mini_cub),
        "--out",
        str(tmp_path / "o"),
        "--pairs",
        "Blue_Jay=has_crown_color::black",
        "--images-per-pair",
        "1",
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert "needs a CUDA GPU" in done.stderr and "--offload" in done.stderr


def test_cli_errors_are_one_line(tmp_path, capsys):
    from conceptforge.commands import main as conceptforge

    assert conceptforge(["generate", "sub", "--cub-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: conceptforge generate sub: argument --cub-dir: ") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_python_api_generate_with_loaded_model_and_guidance_images(tmp_path, mini_cub, tiny_flux, tiny_flux_dir):
    from conceptforge.generators.sub import GenerationSettings, generate, load_cub, plan_pairs

    plan = plan_pairs(["Blue_Jay"], ["has_bill_shape::needle"], cub=load_cub(mini_cub))
    settings = GenerationSettings(
        model=str(tiny_flux_dir), resolution=32, steps=2, max_sequence_length=16, dtype="fp32"
    )
    summary = generate(
        out=tmp_path / "api",
        plan=plan,
        images_per_pair=1,
        settings=settings,
        license="cc-by-nc-4.0",
        generator=tiny_flux,
        save_guidance=True,
    )
    assert summary.assembled and summary.made == 1
    from conceptforge.engine.store import ItemStore

    (record,) = ItemStore(tmp_path / "api" / ".work").records("candidates")
    assert record.item_id == "Blue_Jay__has_bill_shape--needle__00000"
    assert set(record.files) == {"png", "guidance.png"}
    meta = record.metadata
    assert meta["etas"][0] == 1.0 and meta["guidance_bird"] == "Hummingbird"
    row = load_dataset(str(tmp_path / "api"))["candidates"][0]
    assert row["prompt_guidance"] == "A photo of a Hummingbird" and row["category"] == "shape"


def test_foreign_out_folder_is_refused_untouched(tmp_path, mini_cub, tiny_flux_dir, candidate_spec, capsys):
    from conceptforge.cli import run_cli
    from tests.foreign_out import assert_refused_untouched, make_foreign_folder

    out = tmp_path / "mine"
    before = make_foreign_folder(out)
    code = run_cli(main, _args(out, mini_cub, tiny_flux_dir, candidate_spec))
    assert_refused_untouched(out, before, code, capsys.readouterr().err)


def test_failed_model_load_does_not_block_the_corrected_rerun(
    tmp_path, mini_cub, tiny_flux_dir, candidate_spec, capsys
):
    """Issue 20.2: settings are fixed only once the first item is written."""
    from conceptforge.cli import run_cli

    out = tmp_path / "out"
    extra = ["--pairs", "Blue_Jay=has_crown_color::black", "--chunk-size", "1"]
    assert run_cli(main, _args(out, mini_cub, tmp_path / "typo-model", candidate_spec, *extra)) == 2
    assert not (out / ".work" / "run.json").exists()
    capsys.readouterr()
    assert main(_args(out, mini_cub, tiny_flux_dir, candidate_spec, *extra)) == 0
    assert "wrote 2 images" in capsys.readouterr().out


def test_pairs_per_batch_gives_the_same_data_and_is_bound_to_the_run(
    tmp_path, mini_cub, tiny_flux_dir, candidate_spec, capsys
):
    """--pairs-per-batch 3 (batches of 6 transformer rows, cut across pairs) writes the same parquet
    bytes as one pair at a time; it is a stored setting, so a resume with another value is refused."""
    from conceptforge.errors import ConceptforgeError

    one, three = tmp_path / "one", tmp_path / "three"
    assert main(_args(one, mini_cub, tiny_flux_dir, candidate_spec)) == 0
    assert main(_args(three, mini_cub, tiny_flux_dir, candidate_spec, "--pairs-per-batch", "3")) == 0
    assert _data_bytes(three) == _data_bytes(one) and _data_bytes(one)
    run = json.loads((three / ".work" / "run.json").read_text())
    assert (
        run["settings"]["pairs_per_batch"] == 3
        and "pairs_per_batch" not in json.loads((one / ".work" / "run.json").read_text())["settings"]
    )
    capsys.readouterr()
    with pytest.raises(ConceptforgeError, match="exceeds --chunk-size 2"):
        main(
            _args(
                tmp_path / "x", mini_cub, tiny_flux_dir, candidate_spec, "--pairs-per-batch", "3", "--chunk-size", "2"
            )
        )
    with pytest.raises(ConceptforgeError, match="other settings"):
        main(_args(one, mini_cub, tiny_flux_dir, candidate_spec, "--pairs-per-batch", "2", "--max-items", "1"))
