"""Supplement Table 2: HLA rank r (EfficientFormer-L1 pre-trained on CIFAR-100).

Roles: ``r<rank>@s<seed>`` training metrics; ``gbops`` (``hot gbops`` for the paper's model).
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
    Check,
    Column,
    Table,
    fmt,
    gbops_by_rank,
    is_number,
    option,
    read_json,
    runs_by_cell,
    scale_lines,
    within_margin,
    within_rel,
)


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    paper = paper_values()["table2"]
    tol = float(option(options, "gbops_rel_tol", 0.01))
    margin = float(option(options, "accuracy_margin_pp", 1.0))
    noise = float(option(options, "rank_noise_pp", 0.5))
    runs = runs_by_cell(inputs)
    gbops_data = read_json(inputs.get("gbops"))
    gbops = gbops_by_rank(gbops_data)
    table = Table(
        name="table2",
        title="Supplement Table 2 — HLA rank r",
        caption=paper["caption"]
        + ". Computation cost: backward-pass GBOPs of the paper's model; accuracy: final top-1 (%).",
        columns=[
            Column("rank", "r"),
            Column("gbops", "GBOPs", paired=True),
            Column("accuracy", "Accuracy %", paired=True),
        ],
    )
    acc: dict[int, Any] = {}
    for row in paper["rows"]:
        rank = row["rank"]
        ours_g = gbops if isinstance(gbops, str) else gbops.get(rank, "not computed")
        acc[rank] = runs[f"r{rank}"].top1 if f"r{rank}" in runs else "not run"
        table.rows.append({"rank": rank, "gbops": (row["gbops"], ours_g), "accuracy": (row["accuracy"], acc[rank])})
        table.checks.append(within_rel(f"GBOPs at r={rank}", row["gbops"], ours_g, tol))
    if 16 in acc and 8 in acc:
        table.checks.append(within_margin(f"r=8 within {margin:g} pp of r=16", acc[8], acc[16], margin, "r=16"))
    below = [r for r in (8, 4, 2, 1) if r in acc]
    values = [acc[r] for r in below]
    if len(below) >= 2 and all(is_number(v) for v in values):
        rises = [
            f"r={a}→{b}: {fmt(va)}→{fmt(vb)}"
            for a, b, va, vb in zip(below, below[1:], values, values[1:], strict=False)
            if vb > va + noise
        ]
        drop = values[0] - values[-1]
        ok = not rises and drop > noise
        detail = f"r={below[0]}: {fmt(values[0])} → r={below[-1]}: {fmt(values[-1])}"
        detail += f" ({drop:+.2f} pp drop; noise {noise:g} pp)"
        if rises:
            detail += "; rises: " + ", ".join(rises)
        table.checks.append(Check("accuracy falls as r falls below 8", PASS if ok else FAIL, detail))
    else:
        table.checks.append(
            Check("accuracy falls as r falls below 8", FAIL, "missing runs: " + ", ".join(fmt(v) for v in values))
        )
    if any(c.status == FAIL and c.name.startswith("GBOPs") for c in table.checks):
        table.notes.append(
            "docs/gbops.md shows which accountings of the backward bit-operations were tried and why none "
            "reproduces the published column."
        )
    table.scale = scale_lines(runs)
    if isinstance(gbops_data, dict):
        table.scale.append(f"GBOPs: {gbops_data.get('model', paper['model'])}")
    if figure is not None:
        plots.accuracy_curves(runs, "Table 2: accuracy per HLA rank", figure)
    return table
