"""The follow-up's (EVMT-HLA) keep-ratio sweep: HLA-only gradient filter vs gradient dropout at the same keep ratio.

Roles: ``fp@s<seed>``, ``hla_filter/<keep>@s<seed>``, ``grad_dropout/<keep>@s<seed>`` training metrics.
The follow-up publishes claims, not numbers, so the paper side of each cell is empty and the claims are checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..paper import paper_values
from . import TABLES, plots
from .common import (
    FAIL,
    SKIP,
    Check,
    Column,
    RunResult,
    Table,
    accuracy_below,
    accuracy_within,
    is_number,
    option,
    result_of,
    runs_by_cell,
    scale_lines,
)

METHODS = {"hla_filter": "HLA filter", "grad_dropout": "Gradient dropout"}


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    claims = paper_values()["keep_ratio_sweep"]["claims"]
    margin = float(option(options, "keep_ratio_margin_pp", 1.0))
    gap = float(option(options, "dropout_gap_pp", 2.0))
    runs = runs_by_cell(inputs)
    keeps = sorted({float(c.split("/", 1)[1]) for c in runs if "/" in c})
    fp = result_of(runs, "fp")
    table = Table(
        name="keep_ratio_sweep",
        title=TABLES["keep_ratio_sweep"],
        caption="Final top-1 (%) at each keep ratio of the g_w path: HLA-only low-pass filter (floating point) "
        "against random gradient dropout keeping the same fraction; FP for reference.",
        columns=[
            Column("keep", "Keep ratio"),
            *[Column(m, label + " %", paired=True) for m, label in METHODS.items()],
            Column("fp", "FP %", paired=True),
        ],
    )
    acc: dict[tuple[str, float], RunResult] = {}
    for keep in keeps:
        row: dict[str, Any] = {"keep": f"{keep:g}", "fp": (None, fp.top1)}
        for m in METHODS:
            acc[(m, keep)] = result_of(runs, f"{m}/{keep:g}")
            row[m] = (None, acc[(m, keep)].top1)
        table.rows.append(row)
    lowest = keeps[0] if keeps else None
    if lowest is None:
        table.checks.append(Check(claims[0], FAIL, "no keep-ratio runs"))
    else:
        hla, drop = acc[("hla_filter", lowest)], acc[("grad_dropout", lowest)]
        name = f"{claims[0]} (keep {lowest:g}, margin {margin:g} pp)"
        table.checks.append(accuracy_within(name, hla, fp, margin, "HLA filter", "FP"))
        name = f"{claims[1]} (keep {lowest:g}, ≥ {gap:g} pp below HLA)"
        table.checks.append(accuracy_below(name, drop, hla, gap, "gradient dropout", "HLA filter"))
    if lowest is None or lowest > 0.3:
        table.checks.append(Check(claims[2], SKIP, "keep ratios below 0.5 are outside this sweep"))
    table.scale = scale_lines(runs)
    table.notes.append(
        "The follow-up states these claims without a table of numbers; the paper side of each cell is empty."
    )
    if figure is not None:
        series = {
            label: [v if is_number(v := acc[(m, k)].top1) else None for k in keeps] for m, label in METHODS.items()
        }
        series["FP"] = [fp.top1 if is_number(fp.top1) else None for _ in keeps]
        plots.line_sweep(keeps, series, "keep ratio", "test top-1 (%)", "Keep-ratio sweep", figure)
    return table
