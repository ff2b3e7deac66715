"""HLA blocking ablation (this project's, not the paper's): where HLA's 16-position blocks sit along L.

Roles: ``fp@s<seed>`` and ``<blocking>@s<seed>`` training metrics, ``<blocking>`` one of ``hot.hla.BLOCKINGS``:
``spatial`` (4×4 windows of the token grid, prefix tokens exact: the default), ``paper`` (16 consecutive positions)
and ``official`` (the authors' code: T & -T consecutive positions). The paper leaves the choice open and publishes
no numbers for it, so the paper side of each cell is empty; docs/method.md gives the reason for the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..hla import BLOCKINGS
from . import TABLES, plots
from .common import (
    SKIP,
    Check,
    Column,
    Table,
    accuracy_below,
    accuracy_within,
    is_number,
    option,
    result_of,
    runs_by_cell,
    scale_lines,
)

LABELS = {
    "spatial": "4×4 windows of the grid, prefix exact (spatial)",
    "paper": "16 consecutive positions (paper)",
    "official": "T & -T consecutive positions (official)",
}


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    margin = float(option(options, "accuracy_margin_pp", 1.0))
    gap = float(option(options, "blocking_gap_pp", 1.0))
    runs = runs_by_cell(inputs)
    blockings = [b for b in BLOCKINGS if b in runs]
    fp = result_of(runs, "fp")
    table = Table(
        name="hla_blocking",
        title=TABLES["hla_blocking"],
        caption="Final top-1 (%) of HOT with each reading of HLA's 16-position blocks, and FP for reference.",
        columns=[Column("blocking", "HLA blocking"), Column("top1", "Top-1 %", paired=True)],
    )
    table.rows.append({"blocking": "FP (exact backward)", "top1": (None, fp.top1)})
    for blocking in blockings:
        table.rows.append({"blocking": LABELS[blocking], "top1": (None, runs[blocking].top1)})
    spatial, strips = result_of(runs, "spatial"), result_of(runs, "paper")
    table.checks.append(
        accuracy_within(f"HOT with 4×4 windows within {margin:g} pp of FP", spatial, fp, margin, "spatial", "FP")
    )
    name = f"16 consecutive positions at least {gap:g} pp below 4×4 windows"
    if "paper" in runs:
        table.checks.append(accuracy_below(name, strips, spatial, gap, "paper", "spatial"))
    else:
        table.checks.append(Check(name, SKIP, "no run with hla_blocking 'paper'"))
    table.scale = scale_lines(runs)
    table.notes.append(
        "An ablation of a choice the paper leaves open (docs/method.md): the paper side of each cell is empty."
    )
    if figure is not None:
        labels = ["FP", *blockings]
        values = [fp.top1, *(runs[b].top1 for b in blockings)]
        plots.grouped_bars(
            labels, {"top-1": [v if is_number(v) else None for v in values]}, "test top-1 (%)", table.title, figure
        )
    return table
