"""Supplement Table 3: HOT with LoRA, on the frozen and/or the decomposed weights (ViT-B, CIFAR-100).

Roles: ``f<0|1>d<0|1>@s<seed>`` training metrics (HOT on frozen weights, HOT on decomposed weights).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..paper import paper_values
from . import TABLES, plots
from .common import (
    Column,
    RunResult,
    Table,
    accuracy_below,
    accuracy_within,
    option,
    result_of,
    runs_by_cell,
    scale_lines,
)


def cell(on_frozen: bool, on_decomposed: bool) -> str:
    return f"f{int(on_frozen)}d{int(on_decomposed)}"


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    paper = paper_values()["table3"]
    margin = float(option(options, "accuracy_margin_pp", 1.0))
    gap = float(option(options, "lora_gap_pp", 20.0))
    runs = runs_by_cell(inputs)
    table = Table(
        name="table3",
        title=TABLES["table3"],
        caption=paper["caption"] + ". Accuracy: final top-1 (%).",
        columns=[
            Column("frozen", "HOT on frozen"),
            Column("decomposed", "HOT on decomposed"),
            Column("accuracy", "Accuracy %", paired=True),
        ],
    )
    acc: dict[str, RunResult] = {}
    for row in paper["rows"]:
        key = cell(row["hot_on_frozen"], row["hot_on_decomposed"])
        acc[key] = result_of(runs, key)
        table.rows.append(
            {
                "frozen": row["hot_on_frozen"],
                "decomposed": row["hot_on_decomposed"],
                "accuracy": (row["accuracy"], acc[key].top1),
            }
        )
    table.checks.append(
        accuracy_within(
            f"HOT on frozen only within {margin:g} pp of no HOT",
            acc["f1d0"],
            acc["f0d0"],
            margin,
            "frozen only",
            "no HOT",
        )
    )
    for key, label in (("f0d1", "decomposed only"), ("f1d1", "frozen + decomposed")):
        name = f"HOT on {label} far worse than on frozen only (≥ {gap:g} pp)"
        table.checks.append(accuracy_below(name, acc[key], acc["f1d0"], gap, label, "frozen only"))
    table.scale = scale_lines(runs)
    if "lora_rank" in options:
        table.scale.append(f"LoRA rank {options['lora_rank']}")
    if figure is not None:
        plots.accuracy_curves(runs, "Table 3: HOT × LoRA", figure)
    return table
