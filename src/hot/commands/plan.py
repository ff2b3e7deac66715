"""``hot plan``: what a preset's training costs, in GPU-hours per table, before any of it is spent.

    snakemake --cores 4 --config preset=smoke              # measures: every run, a few steps, on the GPU
    snakemake --cores 1 results/plan.json                  # the full preset's planned runs (trains nothing)
    hot plan --plan results/plan.json --measured results/smoke

``--plan`` is the workflow's ``plan.json`` (every run's key, ``hot train`` settings and table roles), a file and not
an import of ``workflow/``: ``hot`` stays free of the workflow, and the plan read is the one the workflow resolved
(presets, schema defaults, deduplicated runs). ``--measured`` is a results directory of a smoke run of the same
experiments: its ``<stage>/<name>/metrics.json`` give each run's median training-step time and its uncapped steps
per epoch (what ``synthetic: true`` data of the dataset's real size makes). A run is estimated as
epochs x steps per epoch (``max_train_batches`` applied) x step time x GPUs from a measurement of the same model,
method, dataset and batch size (its own run's, else another's); a run with none is named as unmeasured, as are all
where the smoke run timed other models or batch sizes (the CPU smoke preset). Training
steps only: evaluation, data loading and start-up are not counted.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plan", type=Path, required=True, help="the workflow's plan.json (results/plan.json)")
    parser.add_argument("--measured", type=Path, required=True, help="a smoke run's results directory (results/smoke)")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs each run trains on (the train rule's gpu)")
    parser.add_argument("--json", type=Path, help="also write the estimate here as JSON")


def run(args: argparse.Namespace) -> int:
    from ..results import load_json, write_json_atomic

    plan = load_json(args.plan)
    if not isinstance(plan, dict) or not isinstance(plan.get("runs"), dict) or not isinstance(plan.get("tables"), dict):
        raise ValueError(f"{args.plan}: not a workflow plan (a JSON object with 'runs' and 'tables')")
    if not args.measured.is_dir():
        raise ValueError(f"--measured {args.measured}: not a directory (a smoke run's results, e.g. results/smoke)")
    estimate = estimate_plan(plan, args.measured, args.gpus)
    print(report(estimate))
    if args.json is not None:
        write_json_atomic(args.json, estimate, sort_keys=True)
    return 0


def _measurement(path: Path) -> dict[str, Any] | None:
    """Step time, steps per epoch, the GPU and what was timed of one smoke run's metrics, or None where it has none."""
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    epochs = [e for e in metrics.get("epochs") or [] if e.get("step_time_s") and e.get("batches_per_epoch")]
    if not epochs:
        return None
    gpu = (metrics.get("environment") or {}).get("gpu")
    on_gpu = str(metrics.get("device", "")).startswith("cuda")
    cfg = metrics.get("config") or {}
    return {
        "step_time_s": float(epochs[-1]["step_time_s"]),
        "batches_per_epoch": int(epochs[-1]["batches_per_epoch"]),
        "device": gpu if on_gpu and gpu else "CPU",
        "backend": (cfg.get("hot") or {}).get("backend", "fake"),
        "like": _like(cfg),
    }


def _like(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two runs' steps cost the same: model, method, dataset (its input size) and batch size."""
    return tuple(settings.get(k) for k in ("model", "method", "dataset", "batch_size"))


def estimate_plan(plan: Mapping[str, Any], measured: Path, gpus: int = 1) -> dict[str, Any]:
    """Each run's GPU-hours (None: no measurement) and each table's sum over its distinct runs."""
    from ..train.config import TrainConfig

    runs: dict[str, dict[str, Any]] = {}
    found: dict[str, dict[str, Any]] = {}
    resolved: dict[str, TrainConfig] = {}
    for key, entry in plan["runs"].items():
        resolved[key] = TrainConfig.from_dict({k: v for k, v in entry["settings"].items() if k != "init"})
        m = _measurement(measured / key / "metrics.json")
        if m is not None:
            found[key] = {**m, "from": key}
    by_like = {m["like"]: m for m in found.values()}
    for key, config in resolved.items():
        like = _like(config.to_dict())
        # its own run, timed as planned (a smoke run of other models or batch sizes times something else), else a like
        m = found[key] if key in found and found[key]["like"] == like else by_like.get(like)
        if m is None:
            runs[key] = {"gpu_hours": None, "epochs": config.epochs}
            continue
        steps = min(m["batches_per_epoch"], config.max_train_batches or m["batches_per_epoch"])
        hours = config.epochs * steps * m["step_time_s"] * gpus / 3600
        runs[key] = {"gpu_hours": hours, "epochs": config.epochs, "steps_per_epoch": steps, **m, "like": list(like)}
    tables = {}
    for table, roles in plan["tables"].items():
        keys = sorted(set(roles.values()))
        hours = [runs[k]["gpu_hours"] for k in keys]
        tables[table] = {
            "runs": len(keys),
            "gpu_hours": math.fsum(h for h in hours if h is not None),
            "unmeasured": [k for k in keys if runs[k]["gpu_hours"] is None],
        }
    devices = sorted({r["device"] for r in runs.values() if "device" in r})
    return {"preset": plan.get("preset"), "measured_on": devices, "runs": runs, "tables": tables}


def report(estimate: Mapping[str, Any]) -> str:
    """The estimate as text: one line a table, then a total over the distinct runs, and what has no measurement."""
    runs, tables = estimate["runs"], estimate["tables"]
    devices = estimate["measured_on"]
    lines = [
        f"preset {estimate['preset']}: GPU-hours of training steps, step times measured on "
        + (", ".join(devices) if devices else "nothing"),
    ]
    if "CPU" in devices:
        lines.append("warning: some step times were measured on the CPU: those estimates say nothing about a GPU")
    lines.append(f"{'table':<18} {'runs':>5} {'GPU-hours':>11}  unmeasured")
    for table, t in tables.items():
        missing = len(t["unmeasured"])
        lines.append(f"{table:<18} {t['runs']:>5} {t['gpu_hours']:>11.1f}  {missing or ''}")
    total = math.fsum(r["gpu_hours"] for r in runs.values() if r["gpu_hours"] is not None)
    unmeasured = sorted(k for k, r in runs.items() if r["gpu_hours"] is None)
    lines.append(f"{'all (distinct runs)':<18} {len(runs):>5} {total:>11.1f}  {len(unmeasured) or ''}")
    if unmeasured:
        lines += ["", f"no measurement ({len(unmeasured)} runs, not in the sums above):"]
        lines += [f"  {key}" for key in unmeasured]
    return "\n".join(lines)
