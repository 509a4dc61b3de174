"""Release check: ``conceptforge verify DIR --sample N`` / ``--all`` vs regenerating the dataset and comparing parquet bytes.

Ours: ``conceptforge verify RELEASE --sample N`` (N items re-rendered from the recorded
provenance and compared field by field, images byte for byte), and ``verify --all`` (every item).
Baseline, what a reader would do without ``verify``: rerun the recorded ``conceptforge generate
binding`` command into a new folder and compare the released parquet shards' bytes with the new
ones (the benchmark raises if they differ, or if verify fails). Every call goes through
``conceptforge.commands.main`` in-process, so Blender is imported once (warm-up) for all.
Quick: the single-object demo config (8 scenes) at 64x48, 2 samples; full: every config of the
demo preset (24 scenes) at 128x96, 8 samples. Skipped without bpy.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
from pathlib import Path

from benchmarks._harness import Result, Skip, compare


def _main(argv: list[str]) -> str:
    from conceptforge.commands import main

    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(argv)
    if code != 0:
        raise RuntimeError(
            f"conceptforge {' '.join(argv[:2])} exited {code}: {out.getvalue()[-500:]} {err.getvalue()[-500:]}"
        )
    return out.getvalue()


def _shards(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted((directory / "data").rglob("*.parquet"))}


def run(quick: bool) -> list[Result]:
    try:
        import bpy  # noqa: F401
    except ImportError as error:
        raise Skip(f"bpy is not installed ({error})") from None

    dataset, size, samples, sample_n, repeats = (
        ("single-object", "64x48", "2", 2, 5) if quick else ("all", "128x96", "8", 4, 3)
    )
    generate = [
        "generate",
        "binding",
        "--dataset",
        dataset,
        "--preset",
        "demo",
        "--resolution",
        size,
        "--samples",
        samples,
    ]
    with tempfile.TemporaryDirectory(prefix="verify-bench-") as tmp:
        work = Path(tmp)
        release = work / "release"
        _main([*generate, "--out", str(release)])
        shutil.rmtree(release / ".work", ignore_errors=True)  # what a release holds
        released = _shards(release)
        n_items = None

        def verify(*choice: str):
            def call(round_: int) -> None:
                nonlocal n_items
                out = _main(["verify", str(release), *choice])
                line = next((text for text in out.splitlines() if text.startswith("verified: ")), None)
                if line is None:
                    raise AssertionError(f"verify did not report success: {out[-500:]}")
                if choice == ("--all",):
                    n_items = int(line.split(" of ")[1].split()[0])

            return call

        def regenerate(round_: int) -> None:
            again = work / f"again-{round_}"
            _main([*generate, "--out", str(again)])
            if _shards(again) != released:
                raise AssertionError(f"regenerated parquet bytes differ from the release ({again})")
            shutil.rmtree(again)

        sample, every = verify("--sample", str(sample_n)), verify("--all")
        sample(-1), every(-1), regenerate(-1)  # warm-up: Blender imported, scenes compiled once
        results = []
        for label, ours in ((f"verify --sample {sample_n}", sample), ("verify --all", every)):
            result = compare(
                label, (f"ours: {label}", ours), ("regenerate + compare parquet bytes", regenerate), repeats
            )
            result.work = f"binding {dataset} demo preset, {n_items} items at {size}, {samples} samples"
            result.extra["outcome"] = "verify passed and the regenerated shards equalled the release's, every round"
            results.append(result)
    return results
