"""Hashes of what unchanged code wrote, one recording per kind of machine it was run on.

Why more than one: an image or a score made with floats is byte-identical from run to run on one
machine, but not across CPUs. torch picks its kernels by the instruction set (AVX2, AVX-512),
oneDNN blocks convolutions by the CPU's caches, Blender's Cycles and Open Image Denoise dispatch
by ISA; the same code then writes other pixels on another kind of CPU. A preset's proof stays
"the bytes unchanged code wrote", with one recording for each kind of machine the project's
sessions and CI have run on; a change that alters a preset matches none of them.

To add a machine kind: check out the last main that CI passed, run the preset tests there on the
new machine, and add what they found (its differing files over the first recording) with the
commit and the machine named, as the recordings below do.
"""

from __future__ import annotations

from collections.abc import Mapping


def machine_kind() -> str:
    """The CPU's vendor and the kernels torch dispatches to: what a failure message names."""
    import torch

    vendor = "unknown vendor"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            vendor = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("vendor_id")), vendor)
    except OSError:
        pass
    return f"{vendor}, torch CPU kernels {torch.backends.cpu.get_cpu_capability()}"


def assert_recorded(found: Mapping[str, str], recordings: Mapping[str, Mapping[str, str]]) -> None:
    """``found`` (file -> sha256) equals one of ``recordings`` (machine kind -> file -> sha256);
    else the assertion shows the difference from the closest one and names this machine."""
    if any(dict(found) == dict(recorded) for recorded in recordings.values()):
        return

    def distance(item: tuple[str, Mapping[str, str]]) -> int:
        recorded = item[1]
        return sum(found.get(name) != recorded.get(name) for name in {*found, *recorded})

    kind, closest = min(recordings.items(), key=distance)
    assert dict(found) == dict(closest), (
        f"the files differ from every recording of unchanged code; closest: {kind!r}; this machine: {machine_kind()}"
    )


#: The machines of the sessions and CI runs that recorded the first hashes (each test names its commit).
EARLIER_MACHINES = "the development machines and CI that recorded the first hashes"
#: AMD EPYC (AuthenticAMD), AVX-512, torch CPU kernels AVX512: main 2dd1392 (CI passed it on the
#: earlier machines) run here on 2026-12-08; a ConceptBed, SUB, binding (two-object, relational)
#: and CompMap MIT-States run writes other float bits there, every other file the same.
EPYC_AVX512 = "AuthenticAMD, torch CPU kernels AVX512 (main 2dd1392, 2026-12-08)"
