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
INCONCLUSIVE = "inconclusive"  # the margin inside the difference's t-interval, or a spread unknown (one seed)
REASON_PREFIXES = ("not ", "skipped", "failed", "error")  # a results file whose "status" starts so holds no numbers
# Leads a table's `cells:` line (and the summary) where `backend: auto` put HOT's runs on the fake backend
REFERENCE_BACKEND_WARNING = "WARNING: HOT ran on the reference (fake) backend, not on the hot-kernels extension"


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    paired: bool = False  # paired columns hold (paper, ours)
    digits: int = 2


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # PASS, FAIL, INCONCLUSIVE or SKIP
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
    """One training cell: the final top-1 of each seed and their mean, or why there is none."""

    top1: Value  # the mean over seeds, NaN if a seed diverged, or the reason there is no number
    values: list[float]  # the final top-1 of each seed (empty when there is a reason instead)
    curves: list[list[tuple[int, float]]]
    scale: str
    seed_ids: tuple[str, ...] = ()  # the seed of each value, where the roles named them
    backend: str = ""  # what computed it: "fake backend on CPU", "real backend on NVIDIA H100 …", …
    reference_fallback: bool = False  # `backend: auto` found no usable kernels: HOT ran on the fake backend

    @property
    def seeds(self) -> int:
        return len(self.values)

    @property
    def std(self) -> float | None:
        """Sample standard deviation of the final top-1 over seeds; None with fewer than 2 seeds or no number."""
        if self.seeds < 2 or not is_number(self.top1):
            return None
        return statistics.stdev(self.values)


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


def _backend_of(metrics: Mapping[str, Any]) -> str:
    """The backend of a run's quantised layers (and why, where the workflow chose it) and the GPU (or CPU) it ran on."""
    cfg = metrics.get("config") or {}
    gpu = (metrics.get("environment") or {}).get("gpu")
    where = gpu if gpu and str(metrics.get("device", "")).startswith("cuda") else "CPU"
    if cfg.get("method") in ("fp", "lora"):  # no layer is quantised
        return f"no quantisation on {where}"
    # what ran (backend auto chooses per call), else what the config named (results without a record name one; a
    # config naming none is from before auto, when fake was the default)
    ran = metrics.get("hot_backends")
    backend = f"{' + '.join(ran) if ran else (cfg.get('hot') or {}).get('backend', 'fake')} backend"
    if cfg.get("backend_reason"):
        backend += f" ({cfg['backend_reason']})"
    return f"{backend} on {where}"


def _reference_fallback(metrics: Mapping[str, Any]) -> bool:
    """Whether `backend: auto` put this run on the fake backend: only auto's runs record a ``backend_reason``."""
    cfg = metrics.get("config") or {}
    return bool(cfg.get("backend_reason")) and (cfg.get("hot") or {}).get("backend", "fake") == "fake"


def _top1(metrics: Mapping[str, Any]) -> float:
    value = metrics.get("final_top1")
    return float("nan") if value is None else float(value)


def no_result(reason: str = "not run") -> RunResult:
    """A cell with no number, and why."""
    return RunResult(reason, [], [], "")


def run_result(paths: list[Path], seed_ids: tuple[str, ...] = ()) -> RunResult:
    """Combine the seeds of one cell (``seed_ids``: each path's seed). Any seed without a result makes the cell
    show why."""
    if not paths:
        return no_result()
    tops: list[float] = []
    curves = []
    scale = ""
    backends: list[str] = []
    fallback = False
    for path in paths:
        metrics = read_json(path)
        if isinstance(metrics, str):
            return no_result(metrics)
        tops.append(_top1(metrics))
        curve = []
        for i, epoch in enumerate(metrics.get("epochs") or []):
            top1 = _first(epoch, "test_top1", "top1")
            if is_number(top1):
                curve.append((int(epoch.get("epoch", i + 1)), float(top1)))
        curves.append(curve)
        scale = _scale_of(metrics)
        backends += [b for b in [_backend_of(metrics)] if b not in backends]
        fallback = fallback or _reference_fallback(metrics)
    top1 = float("nan") if any(math.isnan(t) for t in tops) else statistics.fmean(tops)
    if len(paths) > 1:
        scale += f" · mean of {len(paths)} seeds"
    return RunResult(top1, tops, curves, scale, seed_ids, " / ".join(backends), fallback)


def runs_by_cell(inputs: Mapping[str, Path]) -> dict[str, RunResult]:
    """Group ``CELL@sSEED`` roles by cell, seeds in order."""
    grouped: dict[str, list[tuple[str, Path]]] = defaultdict(list)
    for role, path in inputs.items():
        cell, sep, seed = role.rpartition("@s")
        if sep:
            grouped[cell].append((seed, path))
    out = {}
    for cell, pairs in grouped.items():
        pairs.sort(key=lambda p: (int(p[0]) if p[0].isdigit() else p[0], str(p[1])))
        out[cell] = run_result([path for _, path in pairs], tuple(seed for seed, _ in pairs))
    return out


def result_of(runs: Mapping[str, RunResult], cell: str) -> RunResult:
    """A cell of :func:`runs_by_cell`, or one that says it was not run."""
    return runs[cell] if cell in runs else no_result()


def scale_lines(results: Mapping[str, RunResult]) -> list[str]:
    """The distinct scales the cells were reproduced at, with the cells that share each, then :func:`backend_line`."""
    by_scale: dict[str, list[str]] = defaultdict(list)
    for cell, result in results.items():
        if result.scale:
            by_scale[result.scale].append(cell)
    if len(by_scale) == 1:
        return [next(iter(by_scale)), *backend_line(results)]
    return [*(f"{scale} ({', '.join(cells)})" for scale, cells in by_scale.items()), *backend_line(results)]


def backend_line(results: Mapping[str, RunResult]) -> list[str]:
    """``cells: <backend> on <GPU>``, naming the cells of each where they differ; empty with no result. Where
    `backend: auto` put a HOT run on the fake backend, the line starts with :data:`REFERENCE_BACKEND_WARNING` and
    the cells it concerns."""
    by_backend: dict[str, list[str]] = defaultdict(list)
    for cell, result in results.items():
        if result.backend:
            by_backend[result.backend].append(cell)
    fallback = [cell for cell, result in results.items() if result.reference_fallback]
    warning = f"{REFERENCE_BACKEND_WARNING} ({', '.join(fallback)}): " if fallback else ""
    if len(by_backend) <= 1:
        return [f"cells: {warning}{backend}" for backend in by_backend]
    return [f"cells: {warning}" + "; ".join(f"{b} ({', '.join(cells)})" for b, cells in by_backend.items())]


# ---------------------------------------------------------------- checks


def unavailable(value: object) -> bool:
    """A reason this machine or this data could not give a number: ``not measured: no GPU``, ``not run: imagenet1k
    not found at …``. Checks on it are skipped; a bare ``not run`` (a result that should exist but does not) is not
    such a reason."""
    return isinstance(value, str) and value.startswith(("not measured", "not run: "))


def within_rel(name: str, paper: float | None, ours: Value, tol: float, unit: str = "") -> Check:
    """Deterministic numbers: |ours − paper| ≤ tol·|paper|."""
    if paper is None:
        return Check(name, SKIP, "no paper value")
    if not is_number(ours):
        return Check(name, SKIP if unavailable(ours) else FAIL, f"no value: {ours}")
    err = abs(float(ours) - paper) / abs(paper)
    status = PASS if err <= tol else FAIL
    return Check(
        name,
        status,
        f"{fmt(float(ours))}{unit} vs paper {fmt(paper)}{unit}: {100 * err:.2f}% (tolerance {100 * tol:g}%)",
    )


def _described(label: str, result: RunResult) -> str:
    """``HOT 83.02 ± 0.31 (3 seeds)``: the mean, its spread over seeds (when known) and the seed count."""
    spread = f" ± {fmt(result.std)}" if result.std is not None else ""
    return f"{label} {fmt(result.top1)}{spread} ({result.seeds} seed{'' if result.seeds == 1 else 's'})"


def paired(ours: RunResult, reference: RunResult) -> bool:
    """Whether the two cells ran the same seeds: a seed fixes the initial weights and the batch order, so runs
    of one seed are compared with each other."""
    return bool(ours.seed_ids) and ours.seed_ids == reference.seed_ids and len(set(ours.seed_ids)) == ours.seeds


CONFIDENCE = 0.95  # the two-sided level of every accuracy interval


def student_t_two_sided(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t with ``df`` (a positive integer) degrees of freedom, in closed form
    (Abramowitz & Stegun 26.7.3–4): with θ = atan(t/√df), c = cos²θ, a finite series in c times sin θ."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be a positive integer, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    c = math.cos(theta) ** 2
    if df % 2 == 0:  # sin θ · (1 + c/2 + (1·3)/(2·4) c² + … up to c^(df/2 − 1))
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c * (2 * k - 1) / (2 * k)
            total += term
        return math.sin(theta) * total
    # (2/π) (θ + sin θ cos θ · (1 + (2/3) c + (2·4)/(3·5) c² + … up to c^((df − 3)/2)))
    term, total = 1.0, 1.0 if df > 1 else 0.0
    for k in range(1, (df - 1) // 2):
        term *= c * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)


def t_critical(df: int, confidence: float = CONFIDENCE) -> float:
    """The t with P(|T| ≤ t) = ``confidence`` under Student's t with ``df`` degrees of freedom (12.71 for one,
    4.30 for two, 1.96 in the normal limit at 95 %), by bisection on :func:`student_t_two_sided`."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    low, high = 0.0, 1.0
    while student_t_two_sided(high, df) < confidence:
        low, high = high, 2 * high
    for _ in range(200):
        mid = (low + high) / 2
        if student_t_two_sided(mid, df) < confidence:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * high:
            break
    return (low + high) / 2


@dataclass(frozen=True)
class Interval:
    """d = mean(reference) − mean(ours) in points and the half-width u of its two-sided t-interval."""

    d: float
    u: float | None  # None: one seed, no spread
    df: int = 0
    paired: bool = False

    def label(self) -> str:
        """How u was made, for a check's detail: ``95% t-interval, 1 df, paired by seed``."""
        return f"{100 * CONFIDENCE:g}% t-interval, {self.df} df{', paired by seed' if self.paired else ''}"


def accuracy_difference(ours: RunResult, reference: RunResult) -> Interval:
    """d and its Student's t-interval. Paired by seed (:func:`paired`): u = t(n − 1)·s_Δ/√n with s_Δ the sample std
    of the n per-seed differences. Otherwise, or where every seed gives the same difference (a zero s_Δ from a few
    seeds is the accuracies' resolution, not a spread), u = t(min(n_o, n_r) − 1)·sqrt(s_o²/n_o + s_r²/n_r), Welch's
    interval with its conservative degrees of freedom (s: sample std over seeds, n: seeds). u is None with fewer
    than two seeds on either side."""
    d = float(reference.top1) - float(ours.top1)  # type: ignore[arg-type]
    if ours.std is None or reference.std is None:
        return Interval(d, None)
    if paired(ours, reference):
        diffs = [r - o for r, o in zip(reference.values, ours.values, strict=True)]
        spread = statistics.stdev(diffs)
        if spread > 0:
            n = len(diffs)
            return Interval(d, t_critical(n - 1) * spread / math.sqrt(n), n - 1, paired=True)
    df = min(ours.seeds, reference.seeds) - 1
    return Interval(d, t_critical(df) * math.sqrt(ours.std**2 / ours.seeds + reference.std**2 / reference.seeds), df)


def _diverged(result: RunResult) -> bool:
    return isinstance(result.top1, float) and math.isnan(result.top1)


def _accuracy_claim(
    name: str, ours: RunResult, reference: RunResult, ours_name: str, ref_name: str, bound_pp: float, at_most: bool
) -> Check:
    """The one rule for claims on two accuracies: the claim on d holds (fails) if it holds (fails) for every value in
    d ± u, the t-interval of :func:`accuracy_difference`; otherwise, or with u unknown, the result is INCONCLUSIVE.
    A diverged run (NaN) lies below any accuracy; a cell with no number FAILs, unless it says why the data or the
    hardware was not there (:func:`unavailable`): then the check is skipped."""
    claim = f"margin {bound_pp:g} pp" if at_most else f"required gap {bound_pp:g} pp"
    sides = f"{_described(ours_name, ours)} vs {_described(ref_name, reference)}"
    numbers = (is_number(ours.top1), is_number(reference.top1))
    if (numbers == (True, False) and _diverged(reference)) or (numbers == (False, True) and _diverged(ours)):
        holds = _diverged(ours) != at_most
        return Check(name, PASS if holds else FAIL, f"{sides}: a diverged run lies below any accuracy; {claim}")
    if not all(numbers):
        status = SKIP if unavailable(ours.top1) or unavailable(reference.top1) else FAIL
        return Check(name, status, f"no value: {ours_name} {fmt(ours.top1)} vs {ref_name} {fmt(reference.top1)}")
    interval = accuracy_difference(ours, reference)
    d, u = interval.d, interval.u
    detail = f"{sides}: {abs(d):.2f} pp {'below' if d >= 0 else 'above'}"
    if u is None:
        return Check(name, INCONCLUSIVE, f"{detail}; {claim}; spread unknown: {min(ours.seeds, reference.seeds)} seed")
    detail += f" ± {u:.2f} ({interval.label()}); {claim}"
    if at_most:
        status = PASS if d + u <= bound_pp else FAIL if d - u > bound_pp else INCONCLUSIVE
    else:
        status = PASS if d - u >= bound_pp else FAIL if d + u < bound_pp else INCONCLUSIVE
    return Check(name, status, detail)


def accuracy_within(
    name: str, ours: RunResult, reference: RunResult, margin_pp: float, ours_name: str, ref_name: str
) -> Check:
    """Claim: ``ours`` at most ``margin_pp`` points below ``reference``; PASS if d + u ≤ margin, FAIL if d − u > it."""
    return _accuracy_claim(name, ours, reference, ours_name, ref_name, margin_pp, at_most=True)


def accuracy_below(
    name: str, ours: RunResult, reference: RunResult, gap_pp: float, ours_name: str, ref_name: str
) -> Check:
    """Claim: ``ours`` at least ``gap_pp`` points below ``reference``; PASS if d − u ≥ gap, FAIL if d + u < it."""
    return _accuracy_claim(name, ours, reference, ours_name, ref_name, gap_pp, at_most=False)


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
