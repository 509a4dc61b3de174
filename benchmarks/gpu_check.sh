#!/usr/bin/env bash
# The GPU device check in one command (benchmarks/gpu.py; BENCHMARKS.md, "GPU device check"):
#
#   bash benchmarks/gpu_check.sh OUT            # on the GPU machine, from the repository root
#
# The GPU machine has torch, transformers, accelerate and peft but no network and no diffusers.
# This script
#   1. installs the wheels carried in .whl/ (pip --no-index --find-links: only what is missing or
#      too old there; nothing is downloaded),
#   2. makes this tree importable as `conceptforge` without building it (the layout of
#      pyproject.toml's package-dir, generators/ -> conceptforge.generators ..., as symlinks in a
#      temporary folder on PYTHONPATH),
#   3. runs `python -m benchmarks.gpu --out OUT --sections sub_fast` (`generate sub --fast` and each
#      of its parts against plain bf16, interleaved, with PSNRs: benchmarks/_gpu_fast.py; under 8
#      minutes on one H100/H200); other sections by naming them after OUT (`--sections sub vqa ...`),
#   4. writes the measured seconds into conceptforge/gpu_costs.json (`--merge-costs`: what every
#      --dry-run reads) and copies that file into OUT, the one folder that comes back from a loan,
# and leaves everything in OUT: gpu-check.json, gpu-check.md, measured-costs.json, gpu_costs.json,
# log.txt, pip.txt.
#
# Prepare .whl/ beforehand, on a machine with PyPI (the folder is ignored by git; ~40 MiB):
#
#   bash benchmarks/gpu_check.sh --prepare      # pip download diffusers + its dependencies and
#                                               # torchao (--quantize) for CPython 3.12 on
#                                               # manylinux x86_64 into .whl/
set -euo pipefail
cd "$(dirname "$0")/.."
DIFFUSERS="diffusers==0.42.0"
# huggingface_hub < 2: transformers 5.x on the GPU image needs a 1.x hub; diffusers 0.42 takes >= 1.32.
HUB="huggingface_hub>=1.32,<2"
# torchao for the --quantize fast paths (no dependencies; one abi3 wheel). Installed on its own: a
# .whl/ prepared without it, or a torchao that does not import beside the image's torch, leaves
# those two paths skipped with the reason in gpu-check.json, not the whole check undone.
TORCHAO="torchao==0.18.0"

if [[ "${1:-}" == "--prepare" ]]; then
    python="${PYTHON:-python3}"
    rm -rf .whl && mkdir -p .whl
    "$python" -m pip download --only-binary=:all: --python-version "${2:-3.12}" \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "$DIFFUSERS" "$HUB" "$TORCHAO"
    du -sh .whl
    exit 0
fi

out="${1:?usage: bash benchmarks/gpu_check.sh OUT  (or --prepare)}"
mkdir -p "$out"
python="${PYTHON:-python3}"
{
    if compgen -G ".whl/*.whl" >/dev/null; then
        "$python" -m pip install --no-index --find-links .whl "$DIFFUSERS" "$HUB"
        "$python" -m pip install --no-index --find-links .whl "$TORCHAO" ||
            echo "torchao not installed: the --quantize fast paths will be skipped"
    else
        echo "no .whl/ folder: using the installed packages (run --prepare where there is network)"
    fi
    "$python" -m pip list 2>/dev/null | grep -iE "^(torch|torchao|transformers|diffusers|accelerate|peft|huggingface.hub|numpy) " || true
} >"$out/pip.txt" 2>&1 || { tail -20 "$out/pip.txt"; exit 1; }

layout="$(mktemp -d)"
trap 'rm -rf "$layout"' EXIT
mkdir "$layout/conceptforge"
for entry in conceptforge/*; do ln -s "$PWD/$entry" "$layout/conceptforge/"; done
for package in generators filters cards loaders; do ln -s "$PWD/$package" "$layout/conceptforge/$package"; done

# -P: `python -m` would put the working directory (this tree, whose conceptforge/ lacks the
# symlinked packages) ahead of $layout on sys.path.
args=("${@:2}")
[[ ${#args[@]} -gt 0 ]] || args=(--sections sub_fast)
status=0
PYTHONPATH="$layout:$PWD" "$python" -P -m benchmarks.gpu --out "$out" "${args[@]}" 2>&1 | tee "$out/log.txt" || status=$?
# what was measured goes into the cost table even when a section failed (its error is in the report)
PYTHONPATH="$layout:$PWD" "$python" -P -m benchmarks.gpu --merge-costs "$out/measured-costs.json" 2>&1 | tee -a "$out/log.txt"
cp conceptforge/gpu_costs.json "$out/gpu_costs.json"
exit "$status"
