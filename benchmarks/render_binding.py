#!/usr/bin/env python
"""Binding-scene rendering speed and memory: our defaults vs CLEVR's 512-sample default.

Renders N relational items with the project's defaults (320x240, 16 samples, no denoiser, flat
ID render for the visibility check) and a couple with CLEVR's default of 512 samples, in the same
process and run, and prints images/min, the speed ratio, and resident memory after each image
(flat memory = no growth with the number of images).

    python benchmarks/render_binding.py [--images 12] [--clevr-images 2]
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from dataclasses import replace

from conceptforge.generators.binding.dataset import BindingConfig, plan_items, sample_scene
from conceptforge.generators.binding.render_blender import BlenderRenderer


def rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def render_items(renderer: BlenderRenderer, config: BindingConfig, count: int) -> tuple[float, list[float]]:
    items = plan_items(replace(config, split_sizes={"train": count}))
    memory = []
    start = time.perf_counter()
    for item in items:
        rng = random.Random(item.seed)
        while True:
            plan = sample_scene(item, config, rng)
            png, _ = renderer.render(plan.scene, min_pixels=config.visible_pixels)
            if png is not None:
                break
        memory.append(rss_mib())
    return time.perf_counter() - start, memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=12)
    parser.add_argument("--clevr-images", type=int, default=2)
    args = parser.parse_args()
    renderer = BlenderRenderer()
    ours = BindingConfig(dataset="relational")
    clevr = BindingConfig(dataset="relational", samples=512)
    render_items(renderer, ours, 1)  # warm-up: Cycles kernels, first scene set-up
    ours_s, memory = render_items(renderer, ours, args.images)
    clevr_s, _ = render_items(renderer, clevr, args.clevr_images)
    ours_rate = args.images / ours_s * 60
    clevr_rate = args.clevr_images / clevr_s * 60
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"ours  (320x240, {ours.samples} spp + visibility check): {ours_rate:6.1f} images/min ({ours_s / args.images:.2f} s/image)")
    print(f"CLEVR (320x240, 512 spp + visibility check): {clevr_rate:6.1f} images/min ({clevr_s / args.clevr_images:.2f} s/image)")
    print(f"speed ratio ours/CLEVR: {ours_rate / clevr_rate:.1f}x")
    print(f"resident memory after image 1 / {args.images}: {memory[0]:.0f} / {memory[-1]:.0f} MiB "
          f"(growth {memory[-1] - memory[0]:+.0f} MiB); peak {peak:.0f} MiB")


if __name__ == "__main__":
    main()
