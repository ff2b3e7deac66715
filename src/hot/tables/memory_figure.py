"""The memory figure: training memory of ViT-B at batch 256, FP vs HOT + ABC, by component (the paper's accounting).

Roles: ``memory`` (``hot memory``'s JSON for the figure's model and batch size).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..paper import paper_values
from . import TABLES, plots
from .common import Column, Table, is_number, memory_gb, option, read_json, within_rel

COMPONENTS = ("weight", "gradient", "optimizer", "activation", "total")


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    paper = paper_values()["memory_figure"]
    tol = float(option(options, "memory_rel_tol", 0.03))
    data = read_json(inputs.get("memory"))
    table = Table(
        name="memory_figure",
        title=TABLES["memory_figure"],
        caption=f"{paper['caption']}; GB = 2^30 bytes.",
        columns=[
            Column("component", "Component"),
            Column("fp", "FP GB", paired=True),
            Column("hot_abc", "HOT + ABC GB", paired=True),
        ],
    )
    for comp in COMPONENTS:
        row: dict[str, Any] = {"component": comp}
        for method in ("fp", "hot_abc"):
            ours = memory_gb(data, method, comp)
            row[method] = (paper[method][comp], ours)
            table.checks.append(within_rel(f"{method} {comp}", paper[method][comp], ours, tol, " GB"))
        table.rows.append(row)
    if isinstance(data, dict):
        table.scale = [
            f"{data.get('model', '?')}, batch {data.get('batch_size', '?')}, "
            f"{data.get('num_classes', '?')} classes (accounting, no training)"
        ]
        if data.get("model") != paper["model"] or data.get("batch_size") != paper["batch_size"]:
            table.notes.append(f"The paper's figure is {paper['model']} at batch {paper['batch_size']}.")
    else:
        table.scale = [data]
    if figure is not None:
        parts = COMPONENTS[:-1]
        series = {}
        for method in ("fp", "hot_abc"):
            series[f"{method} (paper)"] = [paper[method][c] for c in parts]
            series[f"{method} (ours)"] = [v if is_number(v := memory_gb(data, method, c)) else None for c in parts]
        plots.grouped_bars(
            list(parts),
            series,
            "GB",
            "Training memory by component",
            figure,
            "" if isinstance(data, dict) else f"ours: {data}",
        )
    return table
