"""Run the benchmarks: ``python -m benchmarks [NAME ...] [--quick] [--threads N]`` from the repo root.

Every module ``benchmarks/<name>.py`` (not starting with ``_``) that defines
``run(quick: bool) -> list[Result]`` is a benchmark; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {', '.join(discover())})")
    parser.add_argument("--quick", action="store_true", help="small work sizes and few repeats (< 60 s each)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads and OMP/MKL/OpenBLAS threads for every benchmark "
        "(default 1: on a shared machine extra threads mostly wait for each other)",
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    names = args.names or discover()
    unknown = sorted(set(names) - set(discover()))
    if unknown:
        print(f"error: no benchmark named {', '.join(unknown)}; choose from {', '.join(discover())}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(discover()))
        return 0
    if args.threads < 1:
        print("error: --threads must be >= 1", file=sys.stderr)
        return 2
    # Fixed threads before numpy/torch load their BLAS: ratios reproduce only with the same setting.
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[key] = str(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
    logging.basicConfig(level=logging.WARNING)
    for noisy in ("huggingface_hub", "transformers", "diffusers", "datasets"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    import torch

    torch.set_num_threads(args.threads)
    from benchmarks._harness import Skip, machine_state

    command = "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"$ {command.strip()}")
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, {platform.machine()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    for key, value in machine_state().items():
        print(f"{key} (before): {value}")
    ratios = {}
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        if not callable(getattr(module, "run", None)):
            print(
                f"\n# {name}: skipped, no run(quick) yet (its own command line still works; see benchmarks/README.md)"
            )
            continue
        print(f"\n# {name}{' (quick)' if args.quick else ''}: {module.__doc__.strip().splitlines()[0]}", flush=True)
        start = time.perf_counter()
        try:
            results = module.run(quick=args.quick)
        except Skip as reason:
            print(f"skipped: {reason}")
            continue
        for result in results:
            print("\n".join(result.lines()))
            ratios[f"{name}: {result.name}"] = (result.ratio, result.cpu_ratio)
        print(
            f"({name} took {time.perf_counter() - start:.0f} s; load average now {os.getloadavg()[0]:.2f})", flush=True
        )
    print()
    for key, value in machine_state().items():
        print(f"{key} (after): {value}")
    print("\nratios ours/baseline (wall time | CPU time):")
    for key, (wall, cpu) in ratios.items():
        print(f"  {wall:7.3g}x | {'-' if cpu is None else format(cpu, '.3g') + 'x':>7}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
