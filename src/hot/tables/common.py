"""What every table shares: the table model, checks, and readers of the results JSON the workflow writes.

A table is built from *roles*: names the workflow gives to its input files (``hot@s0`` is the metrics of the
HOT run with seed 0, ``memory`` the memory analysis, ...). A missing or unreadable input never raises: the
cell shows why it has no number, and the checks that need it are reported as skipped or failed.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Value = float | str | None  # a number, a reason there is none ("not measured: no GPU"), or None (not in the paper)

PASS, FAIL, SKIP = "pass", "FAIL", "skipped"
REASON_PREFIXES = ("not ", "skipped", "failed", "error")  # a results file whose "status" starts so holds no numbers


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    paired: bool = False  # paired columns hold (paper, ours)
    digits: int = 2


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass
class Table:
    name: str
    title: str
    caption: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    scale: list[str] = field(default_factory=list)  # "reproduced at" lines
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "caption": self.caption,
            "columns": [c.__dict__ for c in self.columns],
            "rows": [{k: list(v) if isinstance(v, tuple) else v for k, v in row.items()} for row in self.rows],
            "scale": self.scale,
            "checks": [c.to_dict() for c in self.checks],
            "notes": self.notes,
        }


def fmt(value: Value, digits: int = 2) -> str:
    """A cell's text: numbers to ``digits`` decimals, NaN as the paper writes it, reasons verbatim, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "✓" if value else "✗"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    return f"{value:.{digits}f}"


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


# ---------------------------------------------------------------- inputs


def parse_inputs(pairs: Iterable[str]) -> dict[str, Path]:
    """``ROLE=PATH`` strings (from ``--input``) to a mapping."""
    inputs: dict[str, Path] = {}
    for pair in pairs:
        role, sep, path = pair.partition("=")
        if not sep or not role or not path:
            raise ValueError(f"--input expects ROLE=PATH, got {pair!r}")
        inputs[role] = Path(path)
    return inputs


def read_json(path: Path | None) -> dict[str, Any] | str:
    """A results file, or the reason it cannot be used (a string)."""
    if path is None:
        return "not run"
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return "not run"
    except (OSError, json.JSONDecodeError) as err:
        return f"unreadable: {err.__class__.__name__}"
    if not isinstance(data, dict):
        return "unreadable: not a JSON object"
    status = data.get("status")
    if isinstance(status, str) and status.lower().startswith(REASON_PREFIXES):
        return status
    return data


@dataclass(frozen=True)
class RunResult:
    """One training cell: the mean over seeds of the final top-1, or why there is none."""

    top1: Value
    seeds: int
    curves: list[list[tuple[int, float]]]
    scale: str

    @property
    def ok(self) -> bool:
        return is_number(self.top1)


def _scale_of(metrics: Mapping[str, Any]) -> str:
    cfg = metrics.get("config") or {}
    dataset = str(cfg.get("dataset", "?"))
    classes = cfg.get("classes")
    if classes:
        dataset += f"[{min(classes)}–{max(classes)}]" if len(classes) > 1 else f"[{classes[0]}]"
    epochs = cfg.get("epochs", len(metrics.get("epochs") or []))
    sched = f"{epochs} ep"
    if cfg.get("max_train_batches"):
        sched += f" × ≤{cfg['max_train_batches']} batches"
    device = metrics.get("device") or cfg.get("device") or "?"
    if isinstance(device, dict):
        device = device.get("name") or device.get("type") or "?"
    return f"{dataset} · {cfg.get('model', '?')} · {sched} · {device}"


def _top1(metrics: Mapping[str, Any]) -> float:
    value = metrics.get("final_top1")
    return float("nan") if value is None else float(value)


def run_result(paths: list[Path]) -> RunResult:
    """Combine the seeds of one cell. Any seed without a result makes the cell show why."""
    if not paths:
        return RunResult("not run", 0, [], "")
    tops: list[float] = []
    curves = []
    scale = ""
    for path in paths:
        metrics = read_json(path)
        if isinstance(metrics, str):
            return RunResult(metrics, len(paths), [], "")
        tops.append(_top1(metrics))
        curve = []
        for i, epoch in enumerate(metrics.get("epochs") or []):
            top1 = _first(epoch, "test_top1", "top1")
            if is_number(top1):
                curve.append((int(epoch.get("epoch", i + 1)), float(top1)))
        curves.append(curve)
        scale = _scale_of(metrics)
    top1 = float("nan") if any(math.isnan(t) for t in tops) else statistics.fmean(tops)
    if len(paths) > 1:
        scale += f" · mean of {len(paths)} seeds"
    return RunResult(top1, len(paths), curves, scale)


def runs_by_cell(inputs: Mapping[str, Path]) -> dict[str, RunResult]:
    """Group ``CELL@sSEED`` roles by cell."""
    grouped: dict[str, list[Path]] = defaultdict(list)
    for role, path in inputs.items():
        cell, sep, _seed = role.rpartition("@s")
        if sep:
            grouped[cell].append(path)
    return {cell: run_result(sorted(paths)) for cell, paths in grouped.items()}


def scale_lines(results: Mapping[str, RunResult]) -> list[str]:
    """The distinct scales the cells were reproduced at, with the cells that share each."""
    by_scale: dict[str, list[str]] = defaultdict(list)
    for cell, result in results.items():
        if result.scale:
            by_scale[result.scale].append(cell)
    if len(by_scale) == 1:
        return [next(iter(by_scale))]
    return [f"{scale} ({', '.join(cells)})" for scale, cells in by_scale.items()]


# ---------------------------------------------------------------- checks


def within_rel(name: str, paper: float | None, ours: Value, tol: float, unit: str = "") -> Check:
    """Deterministic numbers: |ours − paper| ≤ tol·|paper|."""
    if paper is None:
        return Check(name, SKIP, "no paper value")
    if not is_number(ours):
        skipped = isinstance(ours, str) and ours.startswith("not measured")  # hardware this run lacked
        return Check(name, SKIP if skipped else FAIL, f"no value: {ours}")
    err = abs(float(ours) - paper) / abs(paper)
    status = PASS if err <= tol else FAIL
    return Check(
        name,
        status,
        f"{fmt(float(ours))}{unit} vs paper {fmt(paper)}{unit}: {100 * err:.2f}% (tolerance {100 * tol:g}%)",
    )


def within_margin(name: str, ours: Value, reference: Value, margin_pp: float, ref_name: str) -> Check:
    """Accuracy claims: ``ours`` at most ``margin_pp`` points below ``reference``."""
    if not is_number(ours) or not is_number(reference):
        return Check(name, FAIL, f"no value: {fmt(ours)} vs {ref_name} {fmt(reference)}")
    gap = float(reference) - float(ours)
    status = PASS if gap <= margin_pp else FAIL
    return Check(
        name, status, f"{fmt(ours)} vs {ref_name} {fmt(reference)}: {gap:+.2f} pp below (margin {margin_pp:g} pp)"
    )


def option(options: Mapping[str, Any], key: str, default: Any) -> Any:
    value = options.get(key)
    return default if value is None else value


# ---------------------------------------------------------------- analysis results (hot memory / gbops / latency)


def _first(mapping: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in mapping and mapping[key] is not None:
            return mapping[key]
    return None


def memory_gb(data: Mapping[str, Any] | str, method: str, component: str = "total") -> Value:
    """A component of the paper's memory accounting for one method, in GB (2^30 bytes), from ``hot memory``'s JSON:
    the row of ``rows`` with ``accounting: paper`` and that ``method``, its ``<component>_gb``."""
    if isinstance(data, str):
        return data
    for row in data.get("rows") or []:
        if row.get("method") == method and row.get("accounting") == "paper":
            value = row.get(f"{component}_gb")
            return float(value) if is_number(value) else f"no {method} {component} in memory results"
    return f"no {method} in memory results"


def gbops_by_rank(data: Mapping[str, Any] | str) -> dict[int, float] | str:
    """``{rank: GBOPs}`` from ``hot gbops``'s JSON (``rows: [{rank, total_gbops}]``)."""
    if isinstance(data, str):
        return data
    rows = data.get("rows")
    if not isinstance(rows, list) or not rows:
        return "no rows in gbops results"
    return {int(r["rank"]): float(r["total_gbops"]) for r in rows if is_number(r.get("total_gbops"))}


def latency_rows(data: Mapping[str, Any] | str, scale: str = "smallest") -> list[dict[str, Any]] | str:
    """Per-layer rows (``model``, ``layer``, ``<method>_us``) from ``hot latency``'s JSON, or why there are none.

    ``hot latency`` times each layer at several batch scales (1 = the paper's per-sample shape); ``scale`` picks the
    ``smallest`` (the paper's figure) or the ``largest`` (a realistic batch).
    """
    if isinstance(data, str):
        return data
    rows = data.get("rows")
    if not isinstance(rows, list) or not rows:
        return "no rows in latency results"
    scales = sorted({int(r.get("scale", 1)) for r in rows})
    chosen = scales[0] if scale == "smallest" else scales[-1]
    return [r for r in rows if int(r.get("scale", 1)) == chosen]


def latency_us(row: Mapping[str, Any], method: str) -> Value:
    """µs of one method in a latency row; the paper's FP baseline is fp32."""
    value = row.get(f"{'fp32' if method == 'fp' else method}_us")
    return float(value) if is_number(value) else None


def latency_device(data: Mapping[str, Any] | str) -> str:
    if isinstance(data, str):
        return data
    return str((data.get("environment") or {}).get("gpu") or "GPU")
