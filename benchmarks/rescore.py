"""Evaluation without the model: ``evaluate --from-predictions`` vs rerunning it; a resumed run vs a cold rerun.

1. Ours: ``conceptforge evaluate --from-predictions RUN.samples`` (every metric recomputed from the
   per-sample parquet files, no model loaded). Baseline, what a user would otherwise do to get
   the numbers again (e.g. after changing how they are reported): rerun ``conceptforge evaluate
   --model CLIP --tasks binding-clip,binding-cdsm,sub-vlm`` with ``--no-sample-cache`` (the
   embedding cache stays warm, which favours the baseline). The rescored results JSON must equal
   the original byte for byte, or the benchmark raises.
2. Ours: a run of ``binding-clip`` that crashed half way (the first half of its items in the
   per-sample cache in ``--cache-dir``), run again: only the missing half is scored. Baseline:
   the same command with ``--no-sample-cache`` (everything scored again, what a user without the
   cache does after a crash; its embedding cache still holds the first half's images), and,
   second baseline, the same with an empty ``--cache-dir`` (nothing cached at all). Each round
   starts from its own copy of the crashed run's cache directory (made outside the timing); the
   metrics of both must be equal.

Every call goes through ``conceptforge.commands.main`` in-process. Models: a random CLIP built
from a config (quick: 2-layer 64-d; full: ViT-B/32 shapes), datasets from ``conceptforge.testing``.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path

from benchmarks._clip import random_clip
from benchmarks._harness import Result, interleave


def _main(argv: list[str], *, expect: int = 0) -> None:
    from conceptforge.commands import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(argv)
    if code != expect:
        raise RuntimeError(f"conceptforge {' '.join(argv[:3])} ... exited {code}: {err.getvalue()[-500:]}")


def _metrics(path: Path) -> list:
    return [task["metrics"] for task in json.loads(path.read_text())["tasks"]]


def run(quick: bool) -> list[Result]:
    import torch
    from huggingface_hub.utils import logging as hub_logging

    from conceptforge.loaders.binding import evaluate as binding_evaluate
    from conceptforge.loaders.binding.data import load_binding
    from conceptforge.testing import synthetic

    torch.set_num_threads(1)
    hub_logging.set_verbosity_error()  # "Repo card metadata block was not found" once per dataset load
    n_per_label, repeats = (4, 5) if quick else (8, 3)
    with tempfile.TemporaryDirectory(prefix="rescore-bench-") as tmp:
        work = Path(tmp)
        clip = random_clip(work / "clip", quick, max_length=32)
        cub = synthetic.write_fake_cub(work / "cub")
        sub = synthetic.write_dataset(work / "sub", {"test": synthetic.sub_rows()}, synthetic.sub_features())
        single = synthetic.write_single_object(work / "single-object", n_per_label=n_per_label)
        n_binding = sum(len(split) for split in load_binding(str(single)).values())
        cache = work / "cache"
        out = work / "run.json"
        model_args = ["--model", str(clip), "--device", "cpu", "--cub-dir", str(cub)]
        for option in (
            "binding-cdsm.models=add,mult",
            "binding-cdsm.seeds=0,1",
            "binding-cdsm.epochs=2",
            "sub-vlm.cbm_min_classes=1",
        ):
            model_args += ["--task-option", option]
        tasks = ["--tasks", f"binding-clip:{single},binding-cdsm:{single},sub-vlm:{sub}"]
        _main(["evaluate", *model_args, *tasks, "--cache-dir", str(cache), "--output", str(out)])
        original = out.read_text()

        def rescore(round_: int) -> None:
            again = work / f"rescored-{round_}.json"
            _main(["evaluate", "--from-predictions", str(work / "run.samples"), "--output", str(again)])
            if again.read_text() != original:
                raise AssertionError(f"--from-predictions wrote another results file than the run ({again} vs {out})")

        def rerun(round_: int) -> None:
            again = work / f"rerun-{round_}.json"
            _main(
                [
                    "evaluate",
                    *model_args,
                    *tasks,
                    "--cache-dir",
                    str(cache),
                    "--no-sample-cache",
                    "--output",
                    str(again),
                ]
            )
            if _metrics(again) != _metrics(out):
                raise AssertionError("the rerun's metrics differ from the first run's")

        rescore(-1), rerun(-1)
        cpu: dict[str, list[float]] = {}
        ours_s, base_s = interleave(rescore, rerun, repeats, cpu)
        results = [
            Result(
                "rescore vs rerun",
                "ours: --from-predictions",
                ours_s,
                "rerun with the model (--no-sample-cache)",
                base_s,
                work=f"binding-clip + binding-cdsm (2 models x 2 seeds) + sub-vlm, {n_binding} binding images, "
                f"{'tiny' if quick else 'ViT-B/32-shaped'} random CLIP",
                ours_cpu=cpu["ours"],
                baseline_cpu=cpu["baseline"],
                extra={"rescored results JSON equals the original": "yes, byte for byte, every round"},
            )
        ]
        results.extend(_resume(work, clip, single, n_binding, repeats, binding_evaluate))
    return results


def _resume(work: Path, clip: Path, single: Path, n_binding: int, repeats: int, binding_evaluate) -> list[Result]:
    """binding-clip crashed after half its items; rerun resuming from the cache vs with
    --no-sample-cache (same cache directory: its embedding cache holds the first half's images)
    and vs an empty cache directory (nothing cached at all)."""
    original = binding_evaluate.zero_shot_scores
    scored = {"n": 0, "stop_at": None}

    def counting(embedder, split, **kwargs):
        if scored["stop_at"] is not None and scored["n"] >= scored["stop_at"]:
            raise KeyboardInterrupt("simulated crash")
        scored["n"] += len(split)
        return original(embedder, split, **kwargs)

    args = [
        "evaluate",
        "--model",
        str(clip),
        "--device",
        "cpu",
        "--tasks",
        f"binding-clip:{single}",
        "--batch-size",
        "4",
    ]
    binding_evaluate.zero_shot_scores = counting
    results = []
    try:
        crashed = work / "crashed-cache"
        scored["stop_at"] = n_binding // 2
        # the command turns the interrupt into exit 130 ("rerun the same command to resume")
        _main([*args, "--cache-dir", str(crashed), "--output", str(work / "crashed.json")], expect=130)
        scored["stop_at"] = None
        first_half = scored["n"]

        def side(name: str, extra: list[str], *, empty: bool = False):
            """A call that reruns from its own copy of the crashed run's cache (made here, untimed)."""
            caches = {
                r: (work / f"cache-{name}-{r}") if empty else shutil.copytree(crashed, work / f"cache-{name}-{r}")
                for r in range(-1, repeats)
            }

            def call(round_: int) -> None:
                scored["n"] = 0
                outputs[name] = work / f"{name}-{round_}.json"
                _main([*args, "--cache-dir", str(caches[round_]), *extra, "--output", str(outputs[name])])
                counts.setdefault(name, []).append(scored["n"])

            return call

        outputs: dict[str, Path] = {}
        counts: dict[str, list[int]] = {}
        for label, name, empty in (
            ("--no-sample-cache, same --cache-dir (embeddings of the first half cached)", "kept", False),
            ("--no-sample-cache, empty --cache-dir (nothing cached)", "empty", True),
        ):
            ours, baseline = side(f"ours-{name}", []), side(name, ["--no-sample-cache"], empty=empty)
            ours(-1), baseline(-1)
            cpu: dict[str, list[float]] = {}
            ours_s, base_s = interleave(ours, baseline, repeats, cpu)
            if _metrics(outputs[f"ours-{name}"]) != _metrics(outputs[name]):
                raise AssertionError("the resumed run's metrics differ from the rerun's")
            if set(counts[f"ours-{name}"]) != {n_binding - first_half} or set(counts[name]) != {n_binding}:
                raise AssertionError(
                    f"items scored: resumed {counts[f'ours-{name}']}, rerun {counts[name]} of {n_binding}"
                )
            results.append(
                Result(
                    f"resume after a crash vs rerun, {name} cache",
                    "ours: resume (sample cache)",
                    ours_s,
                    label,
                    base_s,
                    work=f"binding-clip, {n_binding} images, crashed after {first_half}",
                    ours_cpu=cpu["ours"],
                    baseline_cpu=cpu["baseline"],
                    extra={
                        "items given to the scorer per round (ours / baseline)": (
                            f"{sorted(set(counts[f'ours-{name}']))} / {sorted(set(counts[name]))}"
                        ),
                        "metrics equal": "yes",
                    },
                )
            )
    finally:
        binding_evaluate.zero_shot_scores = original
    return results
