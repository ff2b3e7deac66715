"""The follow-up's (EVMT-HLA) keep-ratio sweep: HLA-only gradient filter vs gradient dropout at the same keep ratio.

Roles: ``fp@s<seed>``, ``hla_filter/<keep>@s<seed>``, ``grad_dropout/<keep>@s<seed>`` training metrics.
The follow-up publishes claims, not numbers, so the paper side of each cell is empty and the claims are checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..paper import paper_values
from . import plots
from .common import (
    FAIL,
    PASS,
    SKIP,
    Check,
    Column,
    Table,
    fmt,
    is_number,
    option,
    runs_by_cell,
    scale_lines,
    within_margin,
)

METHODS = {"hla_filter": "HLA filter", "grad_dropout": "Gradient dropout"}


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    claims = paper_values()["keep_ratio_sweep"]["claims"]
    margin = float(option(options, "keep_ratio_margin_pp", 1.0))
    runs = runs_by_cell(inputs)
    keeps = sorted({float(c.split("/", 1)[1]) for c in runs if "/" in c})
    fp = runs["fp"].top1 if "fp" in runs else "not run"
    table = Table(
        name="keep_ratio_sweep",
        title="Follow-up keep-ratio sweep — HLA filter vs gradient dropout",
        caption="Final top-1 (%) at each keep ratio of the g_w path: HLA-only low-pass filter (floating point) "
        "against random gradient dropout keeping the same fraction; FP for reference.",
        columns=[
            Column("keep", "Keep ratio"),
            *[Column(m, label + " %", paired=True) for m, label in METHODS.items()],
            Column("fp", "FP %", paired=True),
        ],
    )
    acc: dict[tuple[str, float], Any] = {}
    for keep in keeps:
        row: dict[str, Any] = {"keep": f"{keep:g}", "fp": (None, fp)}
        for m in METHODS:
            key = f"{m}/{keep:g}"
            acc[(m, keep)] = runs[key].top1 if key in runs else "not run"
            row[m] = (None, acc[(m, keep)])
        table.rows.append(row)
    lowest = keeps[0] if keeps else None
    if lowest is None:
        table.checks.append(Check(claims[0], FAIL, "no keep-ratio runs"))
    else:
        hla, drop = acc[("hla_filter", lowest)], acc[("grad_dropout", lowest)]
        table.checks.append(
            within_margin(f"{claims[0]} (keep {lowest:g}, margin {margin:g} pp)", hla, fp, margin, "FP")
        )
        if is_number(hla) and is_number(drop) and is_number(fp):
            ok = (fp - drop) > (fp - hla)
            table.checks.append(
                Check(
                    f"{claims[1]} (keep {lowest:g})",
                    PASS if ok else FAIL,
                    f"loss vs FP: dropout {fp - drop:+.2f} pp, HLA {fp - hla:+.2f} pp",
                )
            )
        else:
            table.checks.append(Check(claims[1], FAIL, f"missing runs: {fmt(hla)}, {fmt(drop)}, FP {fmt(fp)}"))
    if lowest is None or lowest > 0.3:
        table.checks.append(Check(claims[2], SKIP, "keep ratios below 0.5 are outside this sweep"))
    table.scale = scale_lines(runs)
    table.notes.append(
        "The follow-up states these claims without a table of numbers; the paper side of each cell is empty."
    )
    if figure is not None:
        series = {label: [v if is_number(v := acc[(m, k)]) else None for k in keeps] for m, label in METHODS.items()}
        series["FP"] = [fp if is_number(fp) else None for _ in keeps]
        plots.line_sweep(keeps, series, "keep ratio", "test top-1 (%)", "Keep-ratio sweep", figure)
    return table
