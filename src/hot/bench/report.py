"""The targets of ``hot bench`` (issue: HOT faster than bf16 on Hopper), the verdicts against them, the summary
table printed after a run, and the comparison with the last committed run on the same GPU.

Runs are kept as ``kernels/results/bench_<gpu slug>_<short commit>.json`` (:func:`result_name`). The comparison
(:func:`compare`) takes every metric of :func:`comparison_metrics` present in either run and flags one as regressed
where it got worse by more than :data:`REGRESSION_THRESHOLD`: a time or memory that grew past 1.1× the old value,
a speedup that fell below the old one / 1.1.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..rounding import SPEC_HASH

# bf16_us / hot_backward_us of each ViT-B linear at training batch: 1.0 each, a stretch of 1.3 on fc1/fc2
LAYER_TARGETS = {"qkv": 1.0, "proj": 1.0, "fc1": 1.0, "fc2": 1.0}
LAYER_STRETCH = {"fc1": 1.3, "fc2": 1.3}
BANDWIDTH_TARGET = 0.8  # fraction of copy bandwidth for the memory-bound quantisers
STEP_BASELINE = "bf16"  # the step's ratios are against bf16 eager
STEP_MEMORY_TARGET = 0.75  # HOT peak memory / bf16 eager's
REGRESSION_THRESHOLD = 0.10  # a metric worse than the last committed run's by more than this fraction is flagged
COMPARED_SETTINGS = (
    "batch",
    "steps",
    "warmup_steps",
    "seed",
    "gemm",
    "fused_grad_output",
    "single_stream",
    "rounding_hash",
)
# What a run recorded before its setting existed ran with: the setting's value then.
SETTINGS_BEFORE_RECORDED = {"rounding_hash": SPEC_HASH}


# A variant whose middle 80% of step times spans more than this fraction of its median is reported unsteady: its
# median then says more about the machine (host jitter meets a host-bound step) than about the variant.
UNSTEADY_SPREAD = 0.05


def step_spread(times: list[float]) -> float:
    """(90th − 10th percentile) / median of the step times; 0 for fewer than two."""
    if len(times) < 2:
        return 0.0
    deciles = statistics.quantiles(times, n=10, method="inclusive")
    return (deciles[-1] - deciles[0]) / statistics.median(times)


def meets(value: float | None, target: float, higher_is_better: bool = True) -> bool | None:
    """Whether ``value`` reaches ``target`` (None where nothing was measured)."""
    if value is None:
        return None
    return value >= target if higher_is_better else value <= target


def layer_verdict(name: str, bf16_us: float, hot_us: float) -> dict[str, Any]:
    speedup = bf16_us / hot_us
    target, stretch = LAYER_TARGETS[name], LAYER_STRETCH.get(name)
    verdict = {"speedup_vs_bf16": speedup, "target": target, "target_met": meets(speedup, target)}
    if stretch is not None:
        verdict |= {"stretch": stretch, "stretch_met": meets(speedup, stretch)}
    return verdict


def step_summary(variants: dict[str, dict[str, Any]], baseline: str = STEP_BASELINE) -> dict[str, Any]:
    """Speedup and memory ratio of every measured variant against ``baseline`` (bf16 eager, else the first
    variant measured), and each HOT variant's targets: faster than torchao float8 and than bf16 eager, peak memory
    at most :data:`STEP_MEMORY_TARGET` of bf16's; stretch: faster than bf16 + compile (None where a baseline was
    not measured)."""
    measured = {name: v for name, v in variants.items() if "step_ms" in v}
    if baseline not in measured and measured:
        baseline = next(iter(measured))
    base = measured.get(baseline, {})
    ratios: dict[str, dict[str, float | None]] = {}
    for name, v in measured.items():
        mem, base_mem = v.get("peak_memory_gib"), base.get("peak_memory_gib")
        ratios[name] = {
            "speedup": base["step_ms"] / v["step_ms"],
            "memory_ratio": mem / base_mem if mem is not None and base_mem else None,
        }

    def faster(ms: float, other: str) -> bool | None:
        return ms < measured[other]["step_ms"] if other in measured else None

    bf16_mem = measured.get("bf16", {}).get("peak_memory_gib")
    targets: dict[str, dict[str, Any]] = {}
    for name, v in measured.items():
        if not name.startswith("hot"):
            continue
        mem = v.get("peak_memory_gib")
        targets[name] = {
            "faster_than_torchao_float8": faster(v["step_ms"], "torchao_float8"),
            "faster_than_bf16": faster(v["step_ms"], "bf16"),
            f"memory_vs_bf16_le_{STEP_MEMORY_TARGET}": meets(
                mem / bf16_mem if mem is not None and bf16_mem else None, STEP_MEMORY_TARGET, False
            ),
            "stretch_faster_than_bf16_compile": faster(v["step_ms"], "bf16_compile"),
        }
    return {"baseline": baseline, "ratios": ratios, "targets": targets}


def budget_cells(budget: dict[str, Any] | None) -> str:
    """The summary's g_y budget columns: the µs bf16 leaves to g_y's quantisers beside the two GEMMs, and the
    fraction of copy bandwidth that asks of g_y read once and twice, then twice with the weight quantiser's time
    taken too ("none" where no time is left). Empty for a run from before the budget was measured."""
    if not budget:
        return ""

    def cell(key: str) -> str:
        if key not in budget:
            return "-"  # a run from before this count existed
        return "none" if budget[key] is None else f"{budget[key]:.2f}"

    keys = ("one_read", "two_reads", "two_reads_with_weight")
    return f" {budget['budget_us']:14.1f}  " + ", ".join(cell(f"fraction_of_copy_{k}") for k in keys)


def summary_lines(payload: dict[str, Any]) -> list[str]:
    """A short human table of the JSON's results."""

    def f(value: Any, fmt: str = ".2f") -> str:
        if value is None or isinstance(value, bool):
            return {None: "-", True: "yes", False: "no"}[value]
        return format(value, fmt) if isinstance(value, int | float) else str(value)

    lines = [f"hot bench: {payload.get('status')} on {payload.get('environment', {}).get('gpu')}"]
    if "copy_bandwidth" in payload:
        lines.append(f"copy bandwidth: {payload['copy_bandwidth']['gbps']:.0f} GB/s")
    layers = payload.get("layers", {})
    if layers:
        lines.append(
            "layer  bf16 us  hot us  abc us  speedup  target  met    limit  fp8 TF/s  int8 TOP/s  g_y budget us  "
            "copy asked (1 read, 2, 2 with W)"
        )
    for name, r in layers.items():
        if not isinstance(r, dict) or "error" in r:
            lines.append(f"{name:<6} error: {str(r.get('error') if isinstance(r, dict) else r)[:200]}")
            continue
        lines.append(
            f"{name:<6} {r['bf16_us']:7.1f} {r['hot_backward_us']:7.1f} {r['hot_forward_abc_us']:7.1f} "
            f"{r['speedup_vs_bf16']:8.2f} {r['target']:7.2f}  {f(r['target_met']):<5} "
            f"{r['arithmetic_limit']['limit']:6.2f} {r['fp8_tflops']:9.0f} {r['int8_tops']:11.0f}"
            + budget_cells(r.get("grad_output_budget"))
            + (f"  stretch {r['stretch']:.2f} {f(r['stretch_met'])}" if "stretch" in r else "")
        )
    kernels = payload.get("kernels", {})
    if kernels:
        lines.append("kernel (fraction of copy)   g_y unique  g_y moved  pack unique  pack moved")
    for name, k in kernels.items():
        if name == "target_fraction_of_copy":
            continue
        if not isinstance(k, dict) or "error" in k:
            lines.append(f"{name:<27} error: {str(k.get('error') if isinstance(k, dict) else k)[:200]}")
            continue
        g, p = k["grad_output_quantizer"], k["pack_input"]
        lines.append(
            f"{name:<27} {g['unique']['fraction_of_copy']:10.2f} {g['moved']['fraction_of_copy']:10.2f} "
            f"{p['unique']['fraction_of_copy']:12.2f} {p['moved']['fraction_of_copy']:11.2f}"
        )
    step = payload.get("step")
    if step:
        lines.append(
            f"step variant     ms      GiB   speedup  mem ratio   min ms  spread  (ratios to {step.get('baseline')})"
        )
        ratios = step.get("ratios", {})
        for name, v in step["variants"].items():
            if "step_ms" in v:
                r = ratios.get(name, {})
                spread = v.get("step_ms_spread")
                unsteady = "  UNSTEADY" if spread is not None and spread > UNSTEADY_SPREAD else ""
                lines.append(
                    f"{name:<15} {v['step_ms']:7.1f} {f(v.get('peak_memory_gib')):>7} "
                    f"{f(r.get('speedup')):>8} {f(r.get('memory_ratio')):>9} {f(v.get('step_ms_min')):>8} "
                    f"{f(spread):>7}{unsteady}"
                )
            else:
                lines.append(f"{name:<15} {str(v.get('skipped') or v.get('error'))[:100]}")
            if "hot" in v:
                h = v["hot"]
                lines.append(
                    f"{'':<15} {h['converted_layers']} HOT layers {h['converted_by_type']}, "
                    f"head {'converted' if h['head_converted'] else 'exact'}"
                )
        for name, t in step.get("targets", {}).items():
            lines.append(f"targets {name}: {t}")
    eq = payload.get("equivalence")
    if eq:
        if "error" in eq:
            lines.append(f"equivalence: error {eq['error'][:200]}")
        else:
            lines.append(equivalence_line(eq))
    return lines


# --------------------------------------------------------------------------------------------- runs compared


def gpu_slug(gpu: str | None) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``; ``no-gpu`` for None."""
    return re.sub(r"[^a-z0-9]+", "-", (gpu or "no gpu").lower()).strip("-")


def result_name(gpu: str | None, commit: str | None, dirty: bool | None = False) -> str:
    """The file name a run is kept under: GPU, short commit (``-dirty`` where tracked files differ from it)."""
    short = commit[:10] if commit else "unknown"
    return f"bench_{gpu_slug(gpu)}_{short}{'-dirty' if dirty else ''}.json"


def comparison_metrics(payload: dict[str, Any]) -> dict[str, tuple[float, bool]]:
    """Every compared metric of a run: name -> (value, lower is better). Step time and peak memory per step
    variant; per ViT-B layer HOT's backward time and its speedup over bf16 (errors and skips contribute nothing)."""
    metrics: dict[str, tuple[float, bool]] = {}
    variants = payload.get("step", {}).get("variants", {})
    for name, v in variants.items():
        for key in ("step_ms", "peak_memory_gib"):
            if isinstance(v, dict) and isinstance(v.get(key), int | float):
                metrics[f"step.{name}.{key}"] = (float(v[key]), True)
    for name, layer in payload.get("layers", {}).items():
        if not isinstance(layer, dict):
            continue
        for key, lower_is_better in (("hot_backward_us", True), ("speedup_vs_bf16", False)):
            if isinstance(layer.get(key), int | float):
                metrics[f"layers.{name}.{key}"] = (float(layer[key]), lower_is_better)
    return metrics


def compare(old: dict[str, Any], new: dict[str, Any], threshold: float = REGRESSION_THRESHOLD) -> list[dict[str, Any]]:
    """One row per metric of either run: ``old``, ``new`` (None where that run lacks it), ``ratio`` new / old and
    ``regressed`` (None where a side is missing), in the new run's order, then the metrics only the old run has."""
    before, after = comparison_metrics(old), comparison_metrics(new)
    rows = []
    for metric in [*after, *(m for m in before if m not in after)]:
        old_value, lower_is_better = before.get(metric, (None, True))
        new_value, lower_is_better = after.get(metric, (None, lower_is_better))
        ratio = regressed = None
        if old_value is not None and new_value is not None and old_value > 0 and new_value > 0:
            ratio = new_value / old_value
            regressed = (ratio if lower_is_better else 1 / ratio) > 1 + threshold
        rows.append({"metric": metric, "old": old_value, "new": new_value, "ratio": ratio, "regressed": regressed})
    return rows


def previous_run(
    directory: Path, gpu: str | None, current: Path, tracked: set[Path] | None
) -> tuple[Path, dict[str, Any]] | None:
    """The run to compare with, read: the newest (by its recorded date) ``bench_<gpu slug>_*.json`` in ``directory``
    that git tracks, or, where ``tracked`` is None (no git), the newest such file other than ``current``."""
    found = []
    for path in Path(directory).glob(f"bench_{gpu_slug(gpu)}_*.json"):
        resolved = path.resolve()
        if (resolved not in tracked) if tracked is not None else resolved == Path(current).resolve():
            continue
        try:
            payload = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(payload, dict):
            date = payload.get("environment", {}).get("date") or ""
            found.append((str(date), path.stat().st_mtime, path, payload))
    if not found:
        return None
    _, _, path, payload = max(found, key=lambda item: item[:2])
    return path, payload


def settings_differences(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The settings that make two runs' numbers incomparable, where they differ: name -> (old, new)."""
    a, b = ({**SETTINGS_BEFORE_RECORDED, **run.get("settings", {})} for run in (old, new))
    return {k: (a.get(k), b.get(k)) for k in COMPARED_SETTINGS if a.get(k) != b.get(k)}


def _unsteady(payload: dict[str, Any], metric: str) -> bool:
    """Whether ``metric`` is a step time whose variant's steps spread by more than UNSTEADY_SPREAD in ``payload``."""
    kind, _, rest = metric.partition(".")
    variant, _, key = rest.rpartition(".")
    if kind != "step" or key != "step_ms":
        return False
    entry = payload.get("step", {}).get("variants", {}).get(variant)
    spread = entry.get("step_ms_spread") if isinstance(entry, dict) else None
    return isinstance(spread, int | float) and spread > UNSTEADY_SPREAD


def comparison_lines(
    rows: Iterable[dict[str, Any]], against: str, old: dict[str, Any], new: dict[str, Any]
) -> list[str]:
    """The comparison as a table: metric, old, new, new / old, and ``REGRESSED`` where it is flagged."""
    env = old.get("environment", {})
    lines = [
        f"compared with {against} (commit {env.get('git_commit') or '?'}, {env.get('date') or 'undated'}); "
        f"a metric worse by more than {REGRESSION_THRESHOLD:.0%} is marked REGRESSED"
    ]
    for name, (was, now) in settings_differences(old, new).items():
        lines.append(f"  settings differ: {name} {was!r} then, {now!r} now")
    lines.append(f"{'metric':<34} {'old':>10} {'new':>10} {'new/old':>8}")

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    for r in rows:
        flag = "not measured now" if r["new"] is None else "new" if r["old"] is None else ""
        flag = "REGRESSED" if r["regressed"] else flag
        if _unsteady(old, r["metric"]) or _unsteady(new, r["metric"]):
            flag = f"{flag} (a run UNSTEADY)".lstrip()  # its median moves with the machine: compare with care
        lines.append(
            f"{r['metric']:<34} {number(r['old']):>10} {number(r['new']):>10} {number(r['ratio']):>8}  {flag}".rstrip()
        )
    return lines


def equivalence_line(eq: dict) -> str:
    """The equivalence section in one line: each loss bound beside the difference it bounds (the first steps' and
    the whole run's), the verdict, the held-out accuracies and the code mismatches."""
    early = eq.get("max_rel_loss_diff_early")
    bounds = (
        f"max rel loss diff {early:.2e} over the first {min(eq['early_steps'], eq['steps'])} steps "
        f"(< {eq['tolerance']:g}) and {eq['max_rel_loss_diff']:.2e} over {eq['steps']} (< {eq['drift_tolerance']:g})"
        if early is not None
        else f"max rel loss diff {eq['max_rel_loss_diff']:.2e} (< {eq['tolerance']:g})"  # runs before the drift bound
    )
    verdict = "passed" if eq["passed"] else "FAILED"
    accuracy = [r["held_out_accuracy"] for r in eq["runs"]]
    return f"equivalence: {verdict}: {bounds}, accuracy {accuracy}, code mismatches {eq.get('code_mismatches')}"
