"""PNG charts of the breakdowns: horizontal bars with their intervals, one panel per breakdown,
one bar per model; and forest plots of paired differences.

Why horizontal bars: group labels (birds, attribute groups, relations) are long and numerous;
written along the y axis they stay readable at any count. Every bar carries its number (a 0% bar
has no length: without its label it would look like a missing group). One chart shows one
dataset: the caller groups runs by (task, dataset) and names the dataset in the title. The
legend sits below the plots, apart from the title. Drawn with matplotlib's Agg backend (no
display, no GUI toolkit), deterministic for the same input.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from conceptforge.loaders.analysis.bootstrap import BootstrapConfig, Difference
from conceptforge.loaders.analysis.breakdowns import TaskBreakdowns

# Okabe–Ito: distinguishable for colour-blind readers, and in grey print.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
MAX_LABEL = 34


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _short(label: str, limit: int = MAX_LABEL) -> str:
    """A tick label: a local dataset path by its folder name (the tables keep the whole path)."""
    head, sep, tail = label.rpartition(": ")  # forest plots: "dataset: /data/binding/two-object"
    if tail.startswith(("/", "./", "../", "~")):
        label = head + sep + tail.rstrip("/").rsplit("/", 1)[-1]
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    return buffer.getvalue()


def _signed(result: TaskBreakdowns) -> bool:
    return result.family == "conceptbed-ccd"


def _interval_words(config: BootstrapConfig) -> str:
    return f"{100 * config.confidence:g}% interval ({config.proportions} for proportions, BCa otherwise)"


def task_chart(
    models: Sequence[tuple[str, TaskBreakdowns]], *, config: BootstrapConfig, dataset: str | None = None
) -> bytes | None:
    """One PNG for one task on one dataset (named in the title): a panel per breakdown, bars =
    each model's group statistic, whiskers = its interval, every bar labelled with its value;
    values in % (CCD as is, with its zero line). ``None`` when no breakdown has a group."""
    plt = _pyplot()
    first = models[0][1]
    signed = _signed(first)
    scale = 1.0 if signed else 100.0
    names = [b.name for b in first.breakdowns]
    for _, result in models[1:]:
        names += [b.name for b in result.breakdowns if b.name not in names]
    panels = []
    for name in names:
        labels: list[str] = []
        per_model = []
        title = name
        for _, result in models:
            found = next((b for b in result.breakdowns if b.name == name), None)
            groups = {g.label: g.estimate for g in found.groups} if found else {}
            title = found.title if found else title
            labels += [label for label in groups if label not in labels]
            per_model.append(groups)
        panels.append((title, labels, per_model))
    panels = [panel for panel in panels if panel[1]]
    if not panels:
        return None
    heights = [max(1.2, 0.32 * len(labels) * (1 + 0.45 * (len(models) - 1)) + 0.9) for _, labels, _ in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(8.2, sum(heights) + 0.9),
        squeeze=False,
        sharex=True,
        gridspec_kw={"height_ratios": heights},
        layout="constrained",
    )
    bar = 0.8 / len(models)
    for ax, (title, labels, per_model) in zip(axes[:, 0], panels):
        for m, ((model, _), groups) in enumerate(zip(models, per_model)):
            ys, xs, lows, highs = [], [], [], []
            for i, label in enumerate(labels):
                e = groups.get(label)
                if e is None or e.value != e.value:
                    continue
                ys.append(i - 0.4 + bar * (m + 0.5))
                xs.append(scale * e.value)
                lows.append(scale * (e.value - e.low))
                highs.append(scale * (e.high - e.value))
            colour = PALETTE[m % len(PALETTE)]
            ax.barh(ys, xs, height=bar * 0.9, color=colour, label=model, zorder=2)
            ax.errorbar(xs, ys, xerr=[lows, highs], fmt="none", ecolor="#222222", elinewidth=1.1, capsize=3, zorder=3)
            for x, y, high in zip(xs, ys, highs):  # the number itself, right of the whisker
                if x == 0:  # a bar of no length: a marker in the model's colour shows it is there
                    ax.plot([0], [y], marker="D", markersize=5, color=colour, clip_on=False, zorder=5)
                ax.annotate(
                    f"{x:.3f}" if signed else f"{x:.1f}",
                    (x + high, y),
                    xytext=(4, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=8 if len(models) == 1 else 7,
                    color="#333333",
                )
        if len(models) == 1:
            counts = [per_model[0].get(label) for label in labels]
            ticks = [f"{_short(label)}  (n={e.n})" if e else _short(label) for label, e in zip(labels, counts)]
        else:
            ticks = [_short(label) for label in labels]
        ax.set_yticks(range(len(labels)), ticks, fontsize=9)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
        ax.grid(axis="x", color="#dddddd", zorder=0)
        ax.set_axisbelow(True)
        ax.tick_params(labelbottom=True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        if signed:
            ax.axvline(0, color="#555555", linewidth=0.8)
        else:
            ax.set_xlim(0, 100)
    axes[-1, 0].set_xlabel(first.axis, fontsize=9)
    fig.suptitle(
        f"{first.task}" + (f" on {_short(dataset, 60)}" if dataset else "") + f": {first.statistic}\n"
        f"whiskers: {_interval_words(config)}",
        x=0.01,
        ha="left",
        fontsize=10,
    )
    if len(models) > 1:  # below the plots: never over the title
        fig.legend(
            *axes[0, 0].get_legend_handles_labels(),
            loc="outside lower center",
            fontsize=8,
            ncols=min(4, len(models)),
            frameon=False,
        )
    return _png(fig)


def difference_chart(
    task: str,
    model_a: str,
    model_b: str,
    rows: Sequence[tuple[str, Difference]],
    *,
    signed: bool,
    config: BootstrapConfig,
) -> bytes:
    """Forest plot of ``model_a − model_b`` per group (paired, shared items), zero line marked;
    coloured where the exact test rejects at the stated level."""
    plt = _pyplot()
    scale = 1.0 if signed else 100.0
    fig, ax = plt.subplots(figsize=(8.2, 0.3 * len(rows) + 1.5), layout="constrained")
    for i, (_label, d) in enumerate(rows):
        rejected = d.p_value < 1 - config.confidence
        colour = (PALETTE[0] if d.value > 0 else PALETTE[5]) if rejected else "#777777"
        ax.errorbar(
            [scale * d.value],
            [i],
            xerr=[[scale * (d.value - d.low)], [scale * (d.high - d.value)]],
            fmt="o",
            color=colour,
            ecolor=colour,
            capsize=3,
            markersize=5,
        )
    ax.axvline(0, color="#555555", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [f"{_short(label, 44)}  (n={d.n_shared})" for label, d in rows], fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(axis="x", color="#dddddd")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    span = max([abs(scale * v) for _, d in rows for v in (d.low, d.high) if math.isfinite(v)] + [1e-3])
    ax.set_xlim(-1.15 * span, 1.15 * span)
    ax.set_xlabel(f"{model_a} − {model_b} ({'CCD' if signed else 'percentage points'})", fontsize=9)
    unit = rows[0][1].unit if rows else "item"
    method = "Newcombe" if rows and rows[0][1].method == "newcombe" else "BCa bootstrap"
    ax.set_title(
        f"{task}: paired difference over shared {unit}s, {100 * config.confidence:g}% {method} interval; "
        f"coloured where the {rows[0][1].test if rows else 'exact sign test'} gives p < {1 - config.confidence:.2g}",
        loc="left",
        fontsize=9,
    )
    return _png(fig)
