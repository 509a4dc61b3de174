#!/usr/bin/env python
"""Binding renders: image quality (PSNR against 512 samples) and speed against bare bpy.

For the same relational scenes, in one process and run, with interleaved repeats:

* ``bare bpy``        — build the scene, Cycles 16 spp, write the PNG (what a user would script);
* ``bare bpy + OIDN`` — the same with Cycles' own OIDN denoiser (sharper, not reproducible);
* ``conceptforge``    — the project's item loop over one chunk, as ``generate binding`` runs it in
  one process: sample the layout, one Cycles float render with object-index (visibility check)
  and guide passes, then OIDN (fast) outside Cycles and PNG on a worker thread while the next
  scene renders (bit-reproducible across processes, thread counts and batch sizes).

PSNR is against a 512-sample render of the same scene through the project path without the
denoiser (cached under --cache). Prints images/min (min/median over repeats), the time ratio
against bare bpy, PSNR mean/min, the load average, and whether each method's bytes were equal
across repeats.

    python benchmarks/render_binding.py            # 6 scenes at 320x240, 3 repeats
    python benchmarks/render_binding.py --quick    # 2 scenes at 160x120, 1 repeat (< 60 s idle)
    python -m benchmarks render_binding --quick    # one chunk of 4 scenes at 320x240, 7 repeats (~1 min;
                                                   # the first run also renders 4 cached 512-sample references)
    python -m benchmarks render_binding [--quick]  # the same comparison in the benchmark harness
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image

from conceptforge.generators.binding.dataset import BindingConfig, make_batch_factory, plan_items, sample_scene
from conceptforge.generators.binding.render_blender import BlenderRenderer
from conceptforge.generators.binding.stage import CHUNK_SIZE


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def decode(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"))


def bare_bpy(renderer: BlenderRenderer, scene, *, oidn: bool) -> bytes:
    """Build the scene and render it the plain way (no ID render, Blender writes the PNG)."""
    renderer._build(scene)
    bpy = renderer.bpy
    cycles = bpy.context.scene.cycles
    if oidn:
        cycles.use_denoising = True
        cycles.denoiser = "OPENIMAGEDENOISE"
        cycles.denoising_use_gpu = False
        cycles.denoising_input_passes = "RGB_ALBEDO_NORMAL"
        cycles.denoising_prefilter = "FAST"
        cycles.denoising_quality = "BALANCED"
    pixels = renderer._render_to_array(scene.samples)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def kept_scenes(renderer: BlenderRenderer, config: BindingConfig, items) -> list:
    """The scenes the project keeps (after visibility retries), for the bare renders and references."""
    scenes = []
    for item in items:
        rng = random.Random(item.seed)
        while True:
            plan = sample_scene(item, config, rng)
            png, _ = renderer.render(replace(plan.scene, samples=1, denoise=False), min_pixels=config.visible_pixels)
            if png is not None:
                scenes.append(plan.scene)
                break
    return scenes


def reference_renders(renderer: BlenderRenderer, scenes: list, cache: Path) -> list[np.ndarray]:
    """512-sample renders of the scenes (project path, no denoiser), cached: the PSNR reference."""
    cache.mkdir(parents=True, exist_ok=True)
    references = []
    for scene in scenes:
        # REFERENCE_REVISION: bumped when the renderer's scene changes (v2: exact sphere normals,
        # v3: no light tree)
        key = hashlib.sha256(
            (REFERENCE_REVISION + repr(replace(scene, samples=512, denoise=False))).encode()
        ).hexdigest()[:16]
        path = cache / f"ref-{key}.png"
        if not path.exists():
            png, _ = renderer.render(replace(scene, samples=512, denoise=False), min_pixels=1)
            path.write_bytes(png)
        references.append(decode(path.read_bytes()))
    return references


REFERENCE_REVISION = "v3"


def _chunks(items: list) -> list[list]:
    """The items cut as the engine cuts them for one process (chunks of ``CHUNK_SIZE``)."""
    return [items[i : i + CHUNK_SIZE] for i in range(0, len(items), CHUNK_SIZE)]


DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "conceptforge-bench"


def run(quick: bool) -> list:
    """``python -m benchmarks render_binding``: the item loop (denoised default) vs a bare bpy
    render of the same scenes, interleaved, with PSNR against 512 samples for both."""
    from benchmarks._harness import Result, Skip, interleave

    # The harness pins OMP_NUM_THREADS=1 for the torch benchmarks; Cycles and OIDN ignore it, and
    # a renderer uses every core: all of them by default, CONCEPTFORGE_RENDER_THREADS to change it.
    threads = int(os.environ.get("CONCEPTFORGE_RENDER_THREADS", "0")) or os.cpu_count() or 1
    try:
        renderer = BlenderRenderer(threads=threads)
    except Exception as error:  # bpy missing or unusable
        raise Skip(f"Blender (bpy) unavailable: {error}") from None
    # One chunk per round, as a single-process `generate binding` renders it: the finishing of
    # each image overlaps the next render, so a round needs several images to show it.
    count, repeats = (CHUNK_SIZE, 7) if quick else (2 * CHUNK_SIZE, 9)
    config = BindingConfig(dataset="relational", split_sizes={"train": count})
    items = plan_items(config)
    make_batch = make_batch_factory(config, lambda: renderer)
    scenes = kept_scenes(renderer, config, items)
    references = reference_renders(renderer, scenes, DEFAULT_CACHE)
    outputs: dict[str, list[bytes]] = {}
    rounds: dict[str, set[tuple[bytes, ...]]] = {"ours": set(), "bare": set()}
    loads: list[float] = []  # 1-minute load average before each timed call: the ratio is only as good as it

    def ours(_round: int) -> None:
        loads.append(os.getloadavg()[0])
        outputs["ours"] = [r.files["png"] for chunk in _chunks(items) for r in make_batch(chunk)]
        rounds["ours"].add(tuple(outputs["ours"]))

    def bare(_round: int) -> None:
        loads.append(os.getloadavg()[0])
        outputs["bare"] = [bare_bpy(renderer, scene, oidn=False) for scene in scenes]
        rounds["bare"].add(tuple(outputs["bare"]))

    ours(-1)  # warm-up: kernels, OIDN weights
    bare(-1)
    loads.clear()
    cpu: dict[str, list[float]] = {}
    ours_t, base_t = interleave(ours, bare, repeats, cpu)
    per_image = statistics.median(ours_t) / len(scenes)

    def quality(name: str) -> str:
        scores = [psnr(decode(png), ref) for png, ref in zip(outputs[name], references)]
        return f"{np.mean(scores):.2f} dB mean, {min(scores):.2f} dB min"

    return [
        Result(
            "binding render",
            "ours: item loop (layout, Cycles + passes, OIDN outside Cycles, PNG)",
            ours_t,
            "bare bpy render of the same scene, no denoiser",
            base_t,
            work=(
                f"{len(scenes)} relational scenes per round in chunks of {CHUNK_SIZE}, {config.width}x{config.height}, "
                f"{config.samples} samples, {threads} render threads (CONCEPTFORGE_RENDER_THREADS sets it)"
            ),
            ours_cpu=cpu["ours"],
            baseline_cpu=cpu["baseline"],
            extra={
                "ours, median": f"{60 / per_image:.1f} images/min ({per_image:.2f} s/image) at {threads} render threads",
                "bare bpy, median": f"{60 * len(scenes) / statistics.median(base_t):.1f} images/min",
                "ratio of the minima (time)": f"{min(ours_t) / min(base_t):.3g}x",
                # this run itself keeps ~render-threads cores busy; more means other work shared them
                "load average during the rounds (1 min, this run included)": f"{min(loads):.2f}-{max(loads):.2f} on "
                f"{os.cpu_count()} CPUs"
                + (" - other work shared the cores: trust the CPU ratio" if max(loads) > threads + 1 else ""),
                "PSNR vs 512 spp, ours": quality("ours"),
                "PSNR vs 512 spp, bare": quality("bare"),
                "bytes equal across rounds (warm-up included)": f"ours {len(rounds['ours']) == 1}, bare {len(rounds['bare']) == 1}",
            },
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--resolution", default="320x240")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="2 scenes at 160x120, 1 repeat")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--save-grid", type=Path, default=None, help="write reference/bare/ours side by side as PNG")
    args = parser.parse_args()
    if args.quick:
        args.scenes, args.repeats, args.resolution = 2, 1, "160x120"
    width, height = (int(v) for v in args.resolution.split("x"))
    config = BindingConfig(
        dataset="relational", width=width, height=height, samples=args.samples, split_sizes={"train": args.scenes}
    )
    items = plan_items(config)
    renderer = BlenderRenderer(threads=args.threads)
    make_batch = make_batch_factory(config, lambda: renderer)

    scenes = kept_scenes(renderer, config, items)
    references = reference_renders(renderer, scenes, args.cache)

    methods = {
        "bare bpy": lambda: [bare_bpy(renderer, s, oidn=False) for s in scenes],
        "bare bpy + Cycles OIDN": lambda: [bare_bpy(renderer, s, oidn=True) for s in scenes],
        "conceptforge (item loop)": lambda: [r.files["png"] for chunk in _chunks(items) for r in make_batch(chunk)],
    }
    times: dict[str, list[float]] = {name: [] for name in methods}
    outputs: dict[str, list[list[bytes]]] = {name: [] for name in methods}
    bare_bpy(renderer, scenes[0], oidn=True)  # warm-up: kernels, OIDN weights
    make_batch(items[:1])
    loads = [os.getloadavg()[0]]
    for _ in range(args.repeats):
        for name, run in methods.items():  # interleaved
            start = time.perf_counter()
            outputs[name].append(run())
            times[name].append(time.perf_counter() - start)
        loads.append(os.getloadavg()[0])

    print(
        f"binding renders: {len(scenes)} relational scenes at {width}x{height}, {args.samples} spp, "
        f"{args.threads} render threads, {args.repeats} interleaved repeat(s); "
        f"load average {min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} CPUs"
    )
    bare_median = statistics.median(times["bare bpy"])
    print(
        f"{'method':26s} {'img/min best':>12s} {'img/min median':>14s} {'x bare (median)':>15s} "
        f"{'PSNR mean':>9s} {'PSNR min':>8s} {'bytes stable':>12s}"
    )
    for name in methods:
        best, median = min(times[name]), statistics.median(times[name])
        scores = [psnr(decode(png), ref) for png, ref in zip(outputs[name][0], references)]
        stable = all(run == outputs[name][0] for run in outputs[name])
        print(
            f"{name:26s} {len(scenes) / best * 60:12.1f} {len(scenes) / median * 60:14.1f} {median / bare_median:15.2f} "
            f"{np.mean(scores):9.2f} {min(scores):8.2f} {str(stable) if args.repeats > 1 else 'n/a':>12s}"
        )
    if args.save_grid:
        rows = [
            np.concatenate(
                [ref, decode(outputs["bare bpy"][0][i]), decode(outputs["conceptforge (item loop)"][0][i])], axis=1
            )
            for i, ref in enumerate(references)
        ]
        Image.fromarray(np.concatenate(rows, axis=0)).save(args.save_grid)
        print(f"grid (512 spp | bare 16 spp | conceptforge) written to {args.save_grid}")


if __name__ == "__main__":
    main()
