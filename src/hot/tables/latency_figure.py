"""Appendix F, Figure 1 and the authors' per-layer latency figure: backward latency of one layer (µs).

Roles: ``latency`` (``hot latency``'s JSON; ``{"status": "not measured: no GPU"}`` without a GPU) and, optionally,
``committed_latency``: a GPU measurement committed with the sources (``kernels/results/latency_h200.json``), which the
figure shows, labelled as such, where this run measured nothing. The table's cells and its check are this run's only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..paper import paper_values
from . import TABLES, plots
from .common import (
    FAIL,
    PASS,
    SKIP,
    Check,
    Column,
    Table,
    Value,
    is_number,
    latency_device,
    latency_rows,
    latency_us,
    read_json,
)

METHODS = ("fp", "lbp_wht", "hot")


def _speedup(fp: Value, hot: Value) -> Value:
    if is_number(fp) and is_number(hot) and hot:
        return float(fp) / float(hot)
    return fp if isinstance(fp, str) else None


def _by_layer(rows: list[dict[str, Any]] | str) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {} if isinstance(rows, str) else {(str(r.get("model")), str(r.get("layer"))): r for r in rows}


def _figure_source(
    inputs: Mapping[str, Path], rows: list[dict[str, Any]] | str, device: str
) -> tuple[list[dict[str, Any]] | str, str, str]:
    """The latency rows the figure draws, their label and the note saying where they come from: this run's, or, where
    it measured nothing, the committed measurement's."""
    committed_path = inputs.get("committed_latency")
    if not isinstance(rows, str) or committed_path is None:
        return rows, f"ours, {device}", ""
    committed = read_json(committed_path)
    committed_rows = latency_rows(committed)
    if isinstance(committed_rows, str):
        return rows, "ours", ""
    gpu = latency_device(committed)
    note = (
        f"This run measured no latency ({rows}): the figure shows the committed measurement {committed_path.name} "
        f"({gpu}) instead, labelled so; the table's cells and check are this run's."
    )
    return committed_rows, f"committed {committed_path.name}, {gpu}", note


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    paper = paper_values()["latency_figure"]
    data = read_json(inputs.get("latency"))
    rows = latency_rows(data)
    device = latency_device(data)
    measured = _by_layer(rows)
    table = Table(
        name="latency_figure",
        title=TABLES["latency_figure"],
        caption=f"{paper['caption']}: paper on {paper['gpu']}; "
        + (f"ours: {data}" if isinstance(data, str) else f"ours on {device}")
        + "; µs per backward of one layer, FP32 baseline; speed-up = FP / HOT.",
        columns=[
            Column("model", "Model"),
            Column("layer", "Layer"),
            Column("shape", "(L, O, I)"),
            Column("fp", "FP32 µs", paired=True, digits=0),
            Column("lbp_wht", "LBP-WHT µs", paired=True, digits=0),
            Column("hot", "HOT µs", paired=True, digits=0),
            Column("speedup", "Speed-up ×", paired=True, digits=1),
        ],
    )
    slower: list[str] = []
    for ref in paper["rows"]:
        mine = measured.get((ref["model"], ref["layer"]))
        ours: dict[str, Value] = {}
        for m in METHODS:
            ours[m] = (latency_us(mine, m) if mine is not None else None) if not isinstance(rows, str) else rows
            if ours[m] is None:
                ours[m] = "not measured"
        table.rows.append(
            {
                "model": ref["model"],
                "layer": ref["layer"],
                "shape": f"({ref['L']}, {ref['O']}, {ref['I']})",
                **{m: (ref[m], ours[m]) for m in METHODS},
                "speedup": (ref["fp"] / ref["hot"], _speedup(ours["fp"], ours["hot"])),
            }
        )
        speed = _speedup(ours["fp"], ours["hot"])
        if is_number(speed) and speed <= 1.0:
            slower.append(f"{ref['model']}/{ref['layer']}")
    n_measured = sum(1 for r in table.rows if is_number(r["speedup"][1]))
    if isinstance(rows, str) or n_measured == 0:
        reason = rows if isinstance(rows, str) else "none of the paper's layers measured"
        table.checks.append(Check("HOT backward faster than FP32 on every layer", SKIP, reason))
    else:
        table.checks.append(
            Check(
                "HOT backward faster than FP32 on every layer",
                FAIL if slower else PASS,
                f"{n_measured} layers measured on {device}" + ("; slower: " + ", ".join(slower) if slower else ""),
            )
        )
    table.scale = [f"{device}" + ("" if isinstance(rows, str) else f", {n_measured} of {len(paper['rows'])} layers")]
    big = latency_rows(data, "largest")
    if not isinstance(big, str) and not isinstance(rows, str) and big[0].get("scale") != rows[0].get("scale"):
        for base in ("fp", "bf16"):
            ratios = [
                latency_us(r, base) / latency_us(r, "hot") for r in big if latency_us(r, base) and latency_us(r, "hot")
            ]
            if ratios:
                table.notes.append(
                    f"At batch scale {big[0].get('scale')} (L × scale), HOT's mean speed-up over "
                    f"{'FP32' if base == 'fp' else 'BF16'} is {sum(ratios) / len(ratios):.2f}× "
                    f"over {len(ratios)} layers."
                )
    table.notes.append(
        "Timings from another GPU are not expected to match the paper's RTX 3090 numbers; "
        "only the qualitative claim (HOT faster than FP32) is checked."
    )
    drawn_rows, source, source_note = _figure_source(inputs, rows, device)
    if source_note:
        table.notes.append(source_note)
    if figure is not None:
        drawn = _by_layer(drawn_rows)
        theirs = f"paper, {paper['gpu']}"
        series: dict[str, list[float | None]] = {f"FP32 ({theirs})": [], f"HOT ({theirs})": []}
        series |= {f"FP32 ({source})": [], f"HOT ({source})": []}
        for ref in paper["rows"]:
            row = drawn.get((ref["model"], ref["layer"]))
            series[f"FP32 ({theirs})"].append(ref["fp"])
            series[f"HOT ({theirs})"].append(ref["hot"])
            series[f"FP32 ({source})"].append(latency_us(row, "fp") if row is not None else None)
            series[f"HOT ({source})"].append(latency_us(row, "hot") if row is not None else None)
        labels = [f"{r['model'].split('_')[0]}/{r['layer']}" for r in paper["rows"]]
        note = f"this run: {rows}" if isinstance(rows, str) else "" if drawn else "ours: none of the paper's layers"
        plots.grouped_bars(labels, series, "backward latency (µs)", "Per-layer backward latency", figure, note)
    return table
