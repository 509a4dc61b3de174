"""Binding scenes (Blender Cycles): our renderer vs a bare bpy render of the same scenes.

Ours: ``BlenderRenderer.render`` with the project's defaults (320x240, 16 samples, no denoiser):
a flat 1-sample ID render for the visibility check and boxes, then the beauty render, PNG bytes.
Baseline, what a user would otherwise run: the same scene built in bpy and rendered once at the
same samples, with no visibility check. The ratio is the visibility check's price. (CLEVR's 512
samples are not a baseline: that is a different image quality, not a different implementation.)
"""

from __future__ import annotations

import os
import random
import resource
from dataclasses import replace

from benchmarks._harness import Result, Skip, interleave


def run(quick: bool) -> list[Result]:
    try:
        from conceptforge.generators.binding.dataset import BindingConfig, plan_items, sample_scene
        from conceptforge.generators.binding.render_blender import BlenderRenderer
        # Cycles' threads fixed like torch's (the runner's --threads), or it takes every core.
        renderer = BlenderRenderer(threads=int(os.environ.get("OMP_NUM_THREADS", "0")) or None)
    except Exception as error:  # bpy missing or unusable
        raise Skip(f"Blender (bpy) unavailable: {error}") from None
    scenes_per_round, repeats = (1, 9) if quick else (3, 9)
    config = BindingConfig(dataset="relational")
    items = plan_items(replace(config, split_sizes={"train": scenes_per_round}))
    scenes = []
    for item in items:  # layouts that pass the visibility check, so both sides render the same scenes
        rng = random.Random(item.seed)
        while True:
            plan = sample_scene(item, config, rng)
            png, _ = renderer.render(plan.scene, min_pixels=config.visible_pixels)
            if png is not None:
                scenes.append(plan.scene)
                break

    def ours(_round: int) -> None:
        for scene in scenes:
            renderer.render(scene, min_pixels=config.visible_pixels)

    def bare(_round: int) -> None:
        for scene in scenes:
            renderer._build(scene)  # the same bpy scene construction
            renderer._render_to_array(scene.samples)  # one render, no ID pass

    cpu: dict[str, list[float]] = {}
    ours_t, base_t = interleave(ours, bare, repeats, cpu)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per_image = sorted(ours_t)[len(ours_t) // 2] / len(scenes)
    return [Result(
        "binding render", "ours: visibility check + render + PNG", ours_t, "bare bpy render of the same scene", base_t,
        work=f"{len(scenes)} relational scenes per round, {config.width}x{config.height}, {config.samples} samples",
        ours_cpu=cpu["ours"], baseline_cpu=cpu["baseline"],
        extra={"ours, median": f"{60 / per_image:.1f} images/min ({per_image:.2f} s/image)",
               "peak RSS of the process": f"{peak:.0f} MiB"})]
