"""Matplotlib figures for the report: accuracy curves (mean ± std per cell), accuracy vs rank, bars (Agg)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from .common import RunResult, is_number


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _seeds(n: int) -> str:
    return f"{n} seed{'' if n == 1 else 's'}"


def mean_curve(result: RunResult) -> list[tuple[int, float, float | None, int]]:
    """Per epoch: (epoch, mean top-1 over the seeds that reached it, their sample std or None with one, how many)."""
    by_epoch: dict[int, list[float]] = defaultdict(list)
    for curve in result.curves:
        for epoch, top1 in curve:
            by_epoch[epoch].append(top1)
    return [
        (epoch, statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else None, len(v))
        for epoch, v in sorted(by_epoch.items())
    ]


def accuracy_curves(results: Mapping[str, RunResult], title: str, path: Path) -> plt.Figure:
    """Test top-1 per epoch: per cell the mean over its seeds, a band of ± one sample std where there are two or
    more, one colour and one legend entry per cell."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    cmap = plt.get_cmap("tab10")
    drawn = False
    for i, (cell, result) in enumerate(sorted(results.items())):
        points = mean_curve(result)
        if not points:
            continue
        epochs, means, stds, counts = zip(*points, strict=True)
        colour = cmap(i % 10)
        style = ("-", "--", ":", "-.")[i // 10 % 4]  # ten colours, then the next line style
        spread = " ± std" if any(s is not None for s in stds) else ""
        label = f"{cell} (mean{spread}, {_seeds(max(counts))})"
        ax.plot(epochs, means, marker="o", linestyle=style, color=colour, label=label)
        band = [(e, m - s, m + s) for e, m, s in zip(epochs, means, stds, strict=True) if s is not None]
        if band:
            xs, low, high = zip(*band, strict=True)
            ax.fill_between(xs, low, high, color=colour, alpha=0.2, linewidth=0)
        drawn = True
    if drawn:
        ax.legend(fontsize="small", ncol=2)
    else:
        ax.text(0.5, 0.5, "no training curves (runs missing)", ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="epoch", ylabel="test top-1 (%)", title=title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    _save(fig, path)
    return fig


def accuracy_vs_rank(
    ours: Mapping[int, RunResult], paper: Mapping[int, float], paper_label: str, title: str, path: Path
) -> plt.Figure:
    """Final top-1 against the HLA rank: ours as the mean over seeds with ± one sample std where there are two or
    more, the paper's published points beside them (log₂ rank axis)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ranks = sorted(paper)
    ax.plot(ranks, [paper[r] for r in ranks], marker="s", linestyle="--", color="tab:gray", label=paper_label)
    measured = sorted((r, res) for r, res in ours.items() if is_number(res.top1))
    if measured:
        xs = [r for r, _ in measured]
        ys = [float(res.top1) for _, res in measured]  # type: ignore[arg-type]
        errs = [res.std or 0.0 for _, res in measured]
        seeds = max(res.seeds for _, res in measured)
        spread = " ± std" if any(res.std is not None for _, res in measured) else ""
        ax.errorbar(
            xs, ys, yerr=errs, marker="o", capsize=3, color="tab:blue", label=f"ours (mean{spread}, {_seeds(seeds)})"
        )
    else:
        ax.text(0.5, 0.1, "ours: no rank run", ha="center", va="bottom", transform=ax.transAxes)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.set(xlabel="HLA rank r (of 16)", ylabel="final test top-1 (%)", title=title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    _save(fig, path)
    return fig


def grouped_bars(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    ylabel: str,
    title: str,
    path: Path,
    note: str = "",
) -> plt.Figure:
    """One group of bars per label; a missing value leaves its bar out, a series with none is left out."""
    series = {name: values for name, values in series.items() if any(v is not None for v in values)}
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.4, 0.35 * len(groups) * max(1, len(series)))), 4.2))
    width = 0.8 / max(1, len(series))
    for k, (name, values) in enumerate(series.items()):
        xs = [i + k * width for i, v in enumerate(values) if v is not None]
        ys = [v for v in values if v is not None]
        ax.bar(xs, ys, width=width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))], groups, rotation=45, ha="right", fontsize="small")
    ax.set(ylabel=ylabel, title=title)
    ax.legend(fontsize="small")
    if note:
        ax.text(0.99, 0.97, note, ha="right", va="top", fontsize="small", transform=ax.transAxes)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)
    return fig


def line_sweep(
    xs: Sequence[float], series: Mapping[str, Sequence[float | None]], xlabel: str, ylabel: str, title: str, path: Path
) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, ys in series.items():
        pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=name)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    _save(fig, path)
