"""Supplement Table 1: incremental ablation of ABC and LQS (ViT-B fine-tuned on CIFAR-100).

Roles: ``<method>@s<seed>`` training metrics for fp, hot, hot_abc, hot_abc_lqs; ``memory`` (``hot memory`` at the
fine-tuning batch size); ``latency`` (``hot latency``).
"""

from __future__ import annotations

import statistics
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
    accuracy_within,
    is_number,
    latency_device,
    latency_rows,
    latency_us,
    memory_gb,
    option,
    read_json,
    result_of,
    runs_by_cell,
    scale_lines,
    within_rel,
)

LABELS = {"fp": "FP (reference)", "hot": "HOT", "hot_abc": "HOT + ABC", "hot_abc_lqs": "HOT + ABC + LQS"}
MEMORY_METHOD = {"fp": "fp", "hot": "hot", "hot_abc": "hot_abc", "hot_abc_lqs": "hot_abc"}  # LQS changes no buffer


def acceleration(latency: Mapping[str, Any] | str, model_hint: str, method: str) -> Value:
    """Mean FP/HOT backward speed-up over the measured layers of the ViT (the paper's "average across ViT layers")."""
    rows = latency_rows(latency)
    if isinstance(rows, str):
        return rows
    ratios = []
    for row in rows:
        if model_hint not in str(row.get("model", "")):
            continue
        fp = latency_us(row, "fp")
        ours = latency_us(row, method) or latency_us(row, "hot")
        if fp and ours:
            ratios.append(fp / ours)
    return statistics.fmean(ratios) if ratios else f"no {model_hint} layers in latency results"


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    paper = paper_values()["table1"]
    mem_tol = float(option(options, "memory_rel_tol", 0.03))
    margin = float(option(options, "accuracy_margin_pp", 1.0))
    runs = runs_by_cell(inputs)
    memory = read_json(inputs.get("memory"))
    latency = read_json(inputs.get("latency"))
    paper_rows = {r["method"]: r for r in paper["rows"]}

    table = Table(
        name="table1",
        title=TABLES["table1"],
        caption=paper["caption"] + ". Memory: the paper's accounting; acceleration: mean per-layer backward speed-up "
        "over FP on the ViT layers; accuracy: final top-1 (%).",
        columns=[
            Column("method", "Method"),
            Column("memory_gb", "Memory GB", paired=True),
            Column("acceleration", "Acceleration ×", paired=True, digits=1),
            Column("accuracy", "Accuracy %", paired=True),
        ],
    )
    fp = result_of(runs, "fp")
    for method in ("fp", "hot", "hot_abc", "hot_abc_lqs"):
        ref = paper_rows.get(method, {})
        mem = memory_gb(memory, MEMORY_METHOD[method])
        run = result_of(runs, method)
        accel = acceleration(latency, str(option(options, "latency_model", "vit")), method) if method != "fp" else 1.0
        table.rows.append(
            {
                "method": LABELS[method],
                "memory_gb": (ref.get("memory_gb"), mem),
                "acceleration": (ref.get("acceleration"), accel),
                "accuracy": (ref.get("accuracy"), run.top1),
            }
        )
        if method in ("hot", "hot_abc"):
            table.checks.append(
                within_rel(f"memory of {LABELS[method]} (accounting)", ref.get("memory_gb"), mem, mem_tol, " GB")
            )
        if method != "fp":
            table.checks.append(
                accuracy_within(
                    f"{LABELS[method]} accuracy within {margin:g} pp of FP", run, fp, margin, LABELS[method], "FP"
                )
            )
            if is_number(accel):
                ok = float(accel) > 1.0
                table.checks.append(
                    Check(
                        f"{LABELS[method]} backward faster than FP",
                        PASS if ok else FAIL,
                        f"{accel:.2f}× on {latency_device(latency)}",
                    )
                )
            else:
                table.checks.append(Check(f"{LABELS[method]} backward faster than FP", SKIP, str(accel)))
    table.scale = scale_lines(runs)
    if isinstance(memory, dict):
        table.scale.append(f"memory: {memory.get('model', '?')}, batch {memory.get('batch_size', '?')} (accounting)")
    table.scale.append(f"latency: {latency_device(latency)}")
    table.notes.append("The paper has no FP row in Table 1; FP is run here as the reference for the accuracy check.")
    table.notes.append(
        "HOT and HOT + ABC compute the same gradients (ABC stores in the forward the codes HLA would compute in the"
        " backward): equal accuracies are expected. HOT + ABC + LQS differs only in layers where LQS picks"
        " per-tensor scales for g_x; where it picks per-token everywhere (the run's lqs.json says), it equals them too."
    )
    if figure is not None:
        plots.accuracy_curves(runs, "Table 1: fine-tuning accuracy", figure)
    return table
