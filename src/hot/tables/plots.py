"""Matplotlib figures for the report: accuracy curves, latency bars, memory bars (headless, Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from .common import RunResult


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def accuracy_curves(results: Mapping[str, RunResult], title: str, path: Path) -> None:
    """Test top-1 per epoch, one colour per cell, one line per seed."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    cmap = plt.get_cmap("tab20")
    drawn = False
    for i, (cell, result) in enumerate(sorted(results.items())):
        for j, curve in enumerate(result.curves):
            if curve:
                xs, ys = zip(*curve, strict=True)
                ax.plot(xs, ys, marker="o", color=cmap(i % 20), label=cell if j == 0 else None)
                drawn = True
    if drawn:
        ax.legend(fontsize="small", ncol=2)
    else:
        ax.text(0.5, 0.5, "no training curves (runs missing)", ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="epoch", ylabel="test top-1 (%)", title=title)
    ax.grid(alpha=0.3)
    _save(fig, path)


def grouped_bars(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    ylabel: str,
    title: str,
    path: Path,
    note: str = "",
) -> None:
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
