"""A SUB benchmark from a spec file (``--spec``) or a preset (``--preset``): what the commands use.

It joins the three things a run needs: the validated spec file (for the release), the generator's
view of it (:class:`SubSpec`) and the class-level labels (CUB's table, or one computed from the
spec's dataset). A run from ``--spec FILE`` carries the spec into its dataset directory
(``benchmark_spec.yaml``) and its card (a section saying the domain, classes, attributes, counts
and rules); a preset's run writes exactly what the paper's run wrote before specs existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conceptforge.generators.sub.benchmark import SubBenchmarkSpec
from conceptforge.generators.sub.spec import SUB_PAPER_PRESET, PairPlan, SubSpec, sub_spec_from
from conceptforge.specs import BenchmarkSpecFile, DatasetSource, load_benchmark_spec
from conceptforge.specs.release import BENCHMARK_SPEC_NAME, release_spec_text


@dataclass
class SubBenchmark:
    spec_file: BenchmarkSpecFile
    spec: SubSpec
    table: Any = None  # ClassAttributeTable of a dataset source (None: CUB, read from --cub-dir)

    @property
    def carries_spec(self) -> bool:
        """A user's spec travels with the release; a preset (the paper's) does not."""
        return self.spec_file.preset is None

    @property
    def benchmark(self) -> SubBenchmarkSpec:
        return self.spec_file.spec


def load_sub_benchmark(
    spec: str | Path | None = None, *, preset: str | None = None, with_labels: bool = True
) -> SubBenchmark:
    """Validate the spec (one line naming the field on error), then read a dataset source's labels
    (``with_labels``: the generator needs them; the filter asks the spec's questions only)."""
    spec_file = load_benchmark_spec(spec, preset=preset, method="sub", spec_cls=SubBenchmarkSpec)
    table = None
    if spec_file.spec.source.kind == "dataset" and with_labels:
        from conceptforge.generators.sub.attribute_table import table_from_dataset

        source = f"preset {preset}" if preset else str(spec)
        table = table_from_dataset(spec_file.spec, base_dir=spec_file.base_dir, spec_source=source)
    return SubBenchmark(spec_file, sub_spec_from(spec_file.spec), table)


def vocabulary(benchmark: SubBenchmark) -> dict[str, list[str]]:
    """group -> its values, as the VQA filter asks them."""
    return {group: list(definition.values) for group, definition in benchmark.benchmark.groups.items()}


def published_source(dataset: DatasetSource) -> str:
    """How a card names the source: a Hub dataset by ``ORG/NAME@REV``, a local one by its folder's
    name only (``.../NAME``): the user's own folders mean nothing on the Hub, and the card check
    refuses a card that holds them."""
    if dataset.hub:
        return dataset.description
    folder = Path(dataset.imagefolder or dataset.path or "").name
    return f"imagefolder .../{folder}" if dataset.imagefolder else f".../{folder}"


def card_section(benchmark: SubBenchmark, plan: PairPlan | None = None) -> str:
    """The card's "Benchmark spec" section: domain, classes, attributes, counts and the rules applied."""
    spec = benchmark.benchmark
    name = benchmark.spec_file.name
    lines = [f"### Benchmark spec: {name}", ""]
    if benchmark.spec_file.description:
        lines += [benchmark.spec_file.description.strip(), ""]
    source = published_source(spec.source.dataset) if spec.source.dataset else "CUB-200-2011 (--cub-dir)"
    lines += [
        f"- **Domain**: {spec.domain}; source: {source}",
        f"- **Reference classes** ({len(spec.classes)}): {', '.join(spec.classes)}",
        f"- **Attribute groups** ({len(spec.groups)}):",
    ]
    for group, definition in spec.groups.items():
        values = ", ".join(definition.values) or "(the source's values)"
        lines.append(f"  - `{group}` ({definition.category}): {values}")
    lines.append(
        f"- **Substitutions S+** ({len(spec.substitutions)}): {', '.join(f'`{s}`' for s in spec.substitutions)}"
    )
    if plan is not None:
        lines.append(f"- **Counts**: {len(plan.pairs)} pairs made, {len(plan.dropped)} left out (the class has S+)")
    if benchmark.table is not None:
        counts = dict(zip(benchmark.table.classes, benchmark.table.image_counts))
        lines.append(
            "- **Source images per class**: " + ", ".join(f"{c} {counts[c]}" for c in spec.classes if c in counts)
        )
    named = ", ".join(f"`{a}` -> {g}" for a, g in spec.guidance.named.items()) or "none"
    tdg = "; ".join(f"{c}: k={t.k}, tmin={t.tmin}, tmax={t.tmax}" for c, t in spec.tdg.items())
    lines += [
        "- **Rules**: a class has an attribute when at least "
        f"{spec.presence.class_percent:g}% of its images show it; S- is the group's most frequent such value; "
        + (
            "pairs whose class already has S+ are left out"
            if spec.presence.drop_present
            else "pairs whose class already has S+ are kept"
        )
        + f". Guidance class: colour -> '{spec.guidance.generic}'; named: {named}; otherwise the class "
        "whose images most often show S+. TDG schedules: " + tdg + ".",
        f"- **VQA question**: {spec.vqa_question}",
        "",
        "The whole spec is `benchmark_spec.yaml` in this dataset.",
    ]
    return "\n".join(lines)


def carried(benchmark: SubBenchmark | None, plan: PairPlan | None = None) -> dict[str, Any] | None:
    """What a run stores for its assembly: the spec's text, its card section, its label names."""
    if benchmark is None or not benchmark.carries_spec:
        return None
    spec = benchmark.benchmark
    spec_yaml = release_spec_text(benchmark.spec_file)
    if benchmark.spec_file.path is not None and benchmark.spec_file.path.name == BENCHMARK_SPEC_NAME:
        spec_yaml = benchmark.spec_file.path.read_text(encoding="utf-8")  # a release's own: carried as it is
    return {
        "spec_yaml": spec_yaml,
        "card_section": card_section(benchmark, plan),
        "domain": spec.domain,
        "classes": list(spec.classes),
        "substitutions": list(spec.substitutions),
        "vocabulary": vocabulary(benchmark),
        "vqa_question": spec.vqa_question,
        "group_questions": {g: d.question for g, d in spec.groups.items() if d.question},
    }


def questions_of(benchmark: SubBenchmark) -> dict[str, Any]:
    """The filter's question settings of a spec: the template, the domain, each group's own question."""
    spec = benchmark.benchmark
    return {
        "template": spec.vqa_question,
        "domain": spec.domain,
        "group_templates": {g: d.question for g, d in spec.groups.items() if d.question},
    }


def without_paper_preset(argv: list[str]) -> list[str]:
    """``argv`` without ``--preset sub-cub-paper``: it is the default, so the paper's run records
    (and writes) the same command line whether it names the preset or not."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--preset":
            skip = True  # only --preset sub-cub-paper gets here (see the callers)
        elif arg != f"--preset={SUB_PAPER_PRESET}":
            out.append(arg)
    return out
