"""Supplement Table 4: pre-training accuracy of FP, INT4, LUQ, LBP-WHT and HOT.

Roles: ``<dataset>/<model>/<method>@s<seed>`` training metrics. Option ``paper_rows`` maps a reproduced
``dataset/model`` to the paper's row it stands for (at reduced scale the dataset and model differ).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..paper import paper_values
from . import TABLES, plots
from .common import SKIP, Check, Column, Table, accuracy_within, backend_line, option, result_of, runs_by_cell

LABELS = {"fp": "FP", "int4": "INT4", "luq": "LUQ", "lbp_wht": "LBP-WHT", "hot": "HOT"}


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    paper = paper_values()["table4"]
    methods = list(paper["methods"])
    margin = float(option(options, "accuracy_margin_pp", 1.0))
    noise = float(option(options, "rank_noise_pp", 0.5))
    mapping: Mapping[str, str] = option(options, "paper_rows", {})
    paper_rows = {f"{r['dataset']}/{r['model']}": r for r in paper["rows"]}
    runs = runs_by_cell(inputs)
    ours_rows = sorted({cell.rsplit("/", 1)[0] for cell in runs}, key=lambda k: (k.split("/")[0], k))

    table = Table(
        name="table4",
        title=TABLES["table4"],
        caption=paper["caption"] + ". Final top-1 (%); NaN: training failed.",
        columns=[
            Column("row", "Dataset / model (ours)"),
            Column("paper_row", "Paper row"),
            *[Column(m, LABELS.get(m, m), paired=True) for m in methods],
        ],
    )
    for key in ours_rows:
        ref_key = mapping.get(key, key)
        ref = paper_rows.get(ref_key, {})
        row: dict[str, Any] = {"row": key, "paper_row": ref_key if ref else "—"}
        acc = {m: result_of(runs, f"{key}/{m}") for m in methods}
        for m in methods:
            paper_value = (float("nan") if ref.get(m) is None else ref[m]) if ref else None  # null: NaN in the paper
            row[m] = (paper_value, acc[m].top1)
        table.rows.append(row)
        if "hot" in acc and "fp" in acc:
            table.checks.append(
                accuracy_within(f"{key}: HOT within {margin:g} pp of FP", acc["hot"], acc["fp"], margin, "HOT", "FP")
            )
        name = f"{key}: HOT at least LBP-WHT (within {noise:g} pp)"
        if f"{key}/lbp_wht" in runs:
            table.checks.append(accuracy_within(name, acc["hot"], acc["lbp_wht"], noise, "HOT", "LBP-WHT"))
        else:
            table.checks.append(Check(name, SKIP, "LBP-WHT is not among this run's methods"))
    table.scale = [*sorted({r.scale for r in runs.values() if r.scale}), *backend_line(runs)]
    missing = sorted(set(paper_rows) - {mapping.get(k, k) for k in ours_rows})
    if missing:
        table.notes.append(
            f"{len(missing)} of the paper's {len(paper_rows)} rows are not reproduced at this scale: "
            + ", ".join(missing)
            + "."
        )
    if figure is not None:
        plots.accuracy_curves(runs, "Table 4: pre-training accuracy", figure)
    return table
