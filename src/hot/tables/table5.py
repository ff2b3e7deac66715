"""Supplement Table 5: the additional FLOPs of HOT's backward paths, evaluated for the Appendix D example layer.

No results inputs: the paper's formulas (from the paper values) are evaluated here for the example shape, with
n = 16 and r = 8, and compared with the two numbers Appendix D gives.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..paper import paper_values
from . import TABLES
from .common import Column, Table, option, within_rel

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(formula: str, variables: Mapping[str, float]) -> float:
    """Arithmetic (+ − × ÷, log2) over named variables; nothing else is accepted."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in variables:
            return float(variables[node.id])
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "log2"
            and len(node.args) == 1
        ):
            return math.log2(walk(node.args[0]))
        raise ValueError(f"unsupported expression in formula {formula!r}: {ast.dump(node)}")

    return walk(ast.parse(formula, mode="eval"))


def build(inputs: Mapping[str, Path], options: Mapping[str, Any], figure: Path | None = None) -> Table:
    paper = paper_values()["table5"]
    tol = float(option(options, "flops_rel_tol", 0.01))
    example = paper["example"]
    variables = {
        **example["shape"],
        "n": float(option(options, "hq_block", 16)),
        "r": float(option(options, "hla_rank", 8)),
    }
    flops = {path: evaluate(f, variables) / 1e6 for path, f in paper["formulas"].items()}
    shape = example["shape"]
    table = Table(
        name="table5",
        title=TABLES["table5"],
        caption=f"{paper['caption']}, evaluated for {example['layer']} of EfficientFormer-L1 "
        f"(L, O, I) = ({shape['L']}, {shape['O']}, {shape['I']}), "
        f"n = {variables['n']:g}, r = {variables['r']:g}; MFLOPs.",
        columns=[Column("path", "Path"), Column("formula", "Formula"), Column("mflops", "MFLOPs", paired=True)],
    )
    hot_total = sum(v for k, v in flops.items() if k != "vanilla_bp")
    for path, formula in paper["formulas"].items():
        paper_value = example["vanilla_bp_mflops"] if path == "vanilla_bp" else None
        table.rows.append({"path": path, "formula": formula, "mflops": (paper_value, flops[path])})
    table.rows.append(
        {"path": "HOT total (g_x + g_w + dequant)", "formula": "sum", "mflops": (example["hot_mflops"], hot_total)}
    )
    table.checks.append(
        within_rel("vanilla BP FLOPs of the example", example["vanilla_bp_mflops"], flops["vanilla_bp"], tol, " M")
    )
    table.checks.append(within_rel("HOT FLOPs of the example", example["hot_mflops"], hot_total, tol, " M"))
    table.scale = ["analytic (the paper's formulas), no training"]
    table.notes.append(
        "Each path's FLOPs are the paper's formula evaluated exactly; the paper prints only the two totals."
    )
    table.notes.append(
        f"4·L·I·O for this shape is {flops['vanilla_bp']:.2f} M; the paper's {example['vanilla_bp_mflops']} M "
        "may be a misprint of it. The check compares with the printed value regardless."
    )
    return table
