"""Supplement Table 2: HLA rank r (EfficientFormer-L1 pre-trained on CIFAR-100).

Roles: ``r<rank>@s<seed>`` training metrics; ``gbops`` (``hot gbops`` for the paper's model).
"""

from __future__ import annotations

import itertools
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
    Table,
    accuracy_below,
    accuracy_within,
    gbops_by_rank,
    option,
    read_json,
    result_of,
    runs_by_cell,
    scale_lines,
    within_rel,
)


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    paper = paper_values()["table2"]
    tol = float(option(options, "gbops_rel_tol", 0.01))
    margin = float(option(options, "accuracy_margin_pp", 1.0))
    noise = float(option(options, "rank_noise_pp", 0.5))
    drop = float(option(options, "rank_drop_pp", 2.0))
    runs = runs_by_cell(inputs)
    gbops_data = read_json(inputs.get("gbops"))
    gbops = gbops_by_rank(gbops_data)
    table = Table(
        name="table2",
        title=TABLES["table2"],
        caption=paper["caption"]
        + ". Computation cost: backward-pass GBOPs of the paper's model; accuracy: final top-1 (%).",
        columns=[
            Column("rank", "r"),
            Column("gbops", "GBOPs", paired=True),
            Column("accuracy", "Accuracy %", paired=True),
        ],
    )
    acc = {row["rank"]: result_of(runs, f"r{row['rank']}") for row in paper["rows"]}
    for row in paper["rows"]:
        rank = row["rank"]
        ours_g = gbops if isinstance(gbops, str) else gbops.get(rank, "not computed")
        table.rows.append(
            {"rank": rank, "gbops": (row["gbops"], ours_g), "accuracy": (row["accuracy"], acc[rank].top1)}
        )
        table.checks.append(within_rel(f"GBOPs at r={rank}", row["gbops"], ours_g, tol))
    table.checks.append(accuracy_within(f"r=8 within {margin:g} pp of r=16", acc[8], acc[16], margin, "r=8", "r=16"))
    swept = sorted((rank for rank in acc if rank <= 8 and f"r{rank}" in runs), reverse=True)
    if len(swept) < 2:
        table.checks.append(Check("accuracy does not rise as r falls below 8", SKIP, "fewer than two ranks ≤ 8 run"))
    for high, low in itertools.pairwise(swept):
        name = f"accuracy does not rise from r={high} to r={low} (noise {noise:g} pp)"
        table.checks.append(accuracy_within(name, acc[high], acc[low], noise, f"r={high}", f"r={low}"))
    name = f"accuracy falls sharply below r=4 (≥ {drop:g} pp)"
    lowest = swept[-1] if swept and swept[-1] < 4 else None
    if 4 not in swept or lowest is None:
        table.checks.append(Check(name, SKIP, "r=4 and a rank below it are not both in the sweep"))
    else:
        table.checks.append(accuracy_below(name, acc[lowest], acc[4], drop, f"r={lowest}", "r=4"))
    if any(c.status == FAIL and c.name.startswith("GBOPs") for c in table.checks):
        table.notes.append(
            "docs/gbops.md defines the count (it gives the compute figure's FP bars) and says why no counting "
            "rule gives this column: per rank it adds 32.99 GBOPs, 5.6 times HOT's INT8 g_w GEMM."
        )
    table.scale = scale_lines(runs)
    if isinstance(gbops_data, dict):
        table.scale.append(f"GBOPs: {gbops_data.get('model', paper['model'])}")
    if figure is not None:
        plots.accuracy_vs_rank(
            acc,
            {row["rank"]: row["accuracy"] for row in paper["rows"]},
            f"paper (Table 2, {paper['model']})",
            "Table 2: accuracy vs HLA rank",
            figure,
        )
    return table
