"""``hot plan``: what a preset's training costs, in GPU-hours per table, before any of it is spent.

    snakemake --cores 4 --config preset=smoke              # measures: every run, a few steps, on the GPU
    snakemake --cores 1 results/plan.json                  # the full preset's planned runs (trains nothing)
    hot plan --plan results/plan.json --measured results/smoke

``--plan`` is the workflow's ``plan.json`` (every run's key, ``hot train`` settings and table roles), a file and not
an import of ``workflow/``: ``hot`` stays free of the workflow, and the plan read is the one the workflow resolved
(presets, schema defaults, deduplicated runs). ``--measured`` is a results directory of a smoke run of the same
experiments: its ``<stage>/<name>/metrics.json`` give each run's median training-step time and its uncapped steps
per epoch (what ``synthetic: true`` data of the dataset's real size makes). A run is priced as epochs x steps per
epoch (``max_train_batches`` applied) x step time x GPUs. Its step time is its own run's where the smoke run timed
it as planned (*measured*); otherwise it is *derived*, and says from which run: a run of the same model, method,
dataset and batch size, else the nearest measured run of the same model (the same method family first: HOT's
presets, the g_w filters and the LoRA combinations are families, a baseline is its own; then quantising or not, the
same input size, method, dataset and batch size), its step time scaled by the batch-size ratio and, across input
sizes, by the pixel ratio, its steps per epoch those of the run priced (measured for its dataset and batch size,
else computed from the dataset's size). A run is left unpriced only where no run of its model was measured (the CPU
smoke preset's small stand-in models, say), and the report says so. Training steps only: evaluation, data loading
and start-up are not counted.
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


def method_family(method: str) -> str:
    """Methods whose training steps cost alike: HOT's presets, the g_w filters, the LoRA combinations; a baseline
    (and FP) is a family of its own."""
    from ..train.config import FILTER_METHODS, HOT_METHODS, LORA_METHODS

    for family, members in (("hot", HOT_METHODS), ("filter", FILTER_METHODS), ("lora", tuple(LORA_METHODS))):
        if method in members:
            return family
    return method


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
        "view": _view(cfg),
        "side": _side(cfg),
    }


def _like(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two runs' steps cost the same: model, method, dataset (its input size) and batch size."""
    return tuple(settings.get(k) for k in ("model", "method", "dataset", "batch_size"))


def _view(settings: Mapping[str, Any]) -> tuple[Any, ...]:
    """What sets the steps of an epoch: the dataset, its class and sample subsets, the batch size."""
    classes = settings.get("classes")
    return (settings.get("dataset"), tuple(classes) if classes else None, settings.get("train_subset"),
            settings.get("batch_size"))  # fmt: skip


def _side(settings: Mapping[str, Any]) -> int | None:
    from ..train.data import SHAPES

    shape = SHAPES.get(str(settings.get("dataset")))
    return settings.get("image_size") or (shape.side if shape else None)


def _computed_steps(settings: Mapping[str, Any]) -> int | None:
    """Steps per epoch from the dataset's size (where no run of its dataset and batch size was measured)."""
    from ..train.data import SHAPES

    shape = SHAPES.get(str(settings.get("dataset")))
    if shape is None:
        return None
    classes = settings.get("classes")
    samples = settings.get("train_subset") or (shape.train * len(classes) // shape.classes if classes else shape.train)
    return math.ceil(samples / int(settings["batch_size"]))


def _nearest(settings: Mapping[str, Any], found: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The measured run of the same model nearest to ``settings``: same method family, quantising or not (FP), input
    size, method, dataset, batch size, in that order of weight (ties: the first key)."""
    model, method, dataset, batch = _like(settings)
    side = _side(settings)
    candidates = [m for m in found.values() if m["like"][0] == model]
    if not candidates:
        return None

    def score(m: dict[str, Any]) -> tuple[bool, ...]:
        _, m_method, m_dataset, m_batch = m["like"]
        same_family = method_family(str(m_method)) == method_family(str(method))
        both_quantise = (m_method == "fp") == (method == "fp")  # INT4 costs like HOT's fake quantisers, not like FP
        return (same_family, both_quantise, m["side"] == side, m_method == method, m_dataset == dataset,
                m_batch == batch)  # fmt: skip

    return max(sorted(candidates, key=lambda m: m["from"]), key=score)


def _derived_step(m: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[float, list[str]]:
    """A measured step time carried over to ``settings``: scaled by the batch-size and the pixel ratio; and how."""
    step, scaled = m["step_time_s"], []
    _, method, _, batch = m["like"]
    if method_family(str(method)) != method_family(str(settings.get("method"))):
        scaled.append(f"another method family ({method})")
    if batch != settings.get("batch_size") and batch:
        step *= settings["batch_size"] / batch
        scaled.append(f"batch {settings['batch_size']}/{batch}")
    side = _side(settings)
    if side and m["side"] and side != m["side"]:
        step *= (side / m["side"]) ** 2
        scaled.append(f"input {side}²/{m['side']}²")
    return step, scaled


def estimate_plan(plan: Mapping[str, Any], measured: Path, gpus: int = 1) -> dict[str, Any]:
    """Each run's GPU-hours, measured or derived (None: no run of its model was measured, ``why`` says so), each
    table's sum over its distinct runs, and each method's sum over its runs."""
    from ..train.config import TrainConfig

    runs: dict[str, dict[str, Any]] = {}
    found: dict[str, dict[str, Any]] = {}
    resolved: dict[str, dict[str, Any]] = {}
    for key, entry in plan["runs"].items():
        resolved[key] = TrainConfig.from_dict({k: v for k, v in entry["settings"].items() if k != "init"}).to_dict()
        m = _measurement(measured / key / "metrics.json")
        if m is not None:
            found[key] = {**m, "from": key}
    by_like = {m["like"]: m for m in sorted(found.values(), key=lambda m: m["from"], reverse=True)}
    per_epoch = {m["view"]: m["batches_per_epoch"] for m in found.values()}
    for key, settings in resolved.items():
        like = _like(settings)
        # its own run, timed as planned (a smoke run of other models or batch sizes times something else), else a like
        m = found[key] if key in found and found[key]["like"] == like else by_like.get(like)
        scaled: list[str] = []
        if m is not None:
            step, full_epoch = m["step_time_s"], m["batches_per_epoch"]
        else:
            m = _nearest(settings, found)
            if m is None:
                why = f"no run of model {settings['model']} was measured"
                runs[key] = {"gpu_hours": None, "epochs": settings["epochs"], "why": why}
                continue
            step, scaled = _derived_step(m, settings)
            full_epoch = per_epoch.get(_view(settings)) or _computed_steps(settings)
            if full_epoch is None:
                why = f"the steps of an epoch of dataset {settings['dataset']} are unknown"
                runs[key] = {"gpu_hours": None, "epochs": settings["epochs"], "why": why}
                continue
            if _view(settings) not in per_epoch:
                scaled.append("steps per epoch from the dataset's size")
        steps = min(full_epoch, settings["max_train_batches"] or full_epoch)
        hours = settings["epochs"] * steps * step * gpus / 3600
        runs[key] = {
            "gpu_hours": hours,
            "epochs": settings["epochs"],
            "steps_per_epoch": steps,
            **{k: v for k, v in m.items() if k not in ("view", "side")},
            "step_time_s": step,
            "priced": "measured" if m["from"] == key and m["like"] == like else "derived",
            "scaled": scaled,
            "like": list(like),
        }
    tables = {}
    for table, roles in plan["tables"].items():
        keys = sorted(set(roles.values()))
        hours = [runs[k]["gpu_hours"] for k in keys]
        tables[table] = {
            "runs": len(keys),
            "gpu_hours": math.fsum(h for h in hours if h is not None),
            "derived": [k for k in keys if runs[k].get("priced") == "derived"],
            "unmeasured": [k for k in keys if runs[k]["gpu_hours"] is None],
        }
    by_method: dict[str, list[float | None]] = {}
    for key, r in runs.items():
        by_method.setdefault(str(resolved[key]["method"]), []).append(r["gpu_hours"])
    methods = {
        method: {
            "runs": len(hours),
            "gpu_hours": math.fsum(h for h in hours if h is not None),
            "unpriced": sum(h is None for h in hours),
        }
        for method, hours in by_method.items()
    }
    devices = sorted({r["device"] for r in runs.values() if "device" in r})
    return {"preset": plan.get("preset"), "measured_on": devices, "runs": runs, "tables": tables, "methods": methods}


def report(estimate: Mapping[str, Any]) -> str:
    """The estimate as text: one line a table, then a total over the distinct runs, the hours per method, the
    derived prices and where they come from, and what has no price."""
    runs, tables = estimate["runs"], estimate["tables"]
    devices = estimate["measured_on"]
    lines = [
        f"preset {estimate['preset']}: GPU-hours of training steps, step times measured on "
        + (", ".join(devices) if devices else "nothing"),
    ]
    if "CPU" in devices:
        lines.append("warning: some step times were measured on the CPU: those estimates say nothing about a GPU")
    lines.append(f"{'table':<18} {'runs':>5} {'GPU-hours':>11} {'derived':>8}  unpriced")
    for table, t in tables.items():
        missing = len(t["unmeasured"])
        lines.append(f"{table:<18} {t['runs']:>5} {t['gpu_hours']:>11.1f} {len(t['derived']):>8}  {missing or ''}")
    total = math.fsum(r["gpu_hours"] for r in runs.values() if r["gpu_hours"] is not None)
    derived = sorted(k for k, r in runs.items() if r.get("priced") == "derived")
    unmeasured = sorted(k for k, r in runs.items() if r["gpu_hours"] is None)
    lines.append(
        f"{'all (distinct runs)':<18} {len(runs):>5} {total:>11.1f} {len(derived):>8}  {len(unmeasured) or ''}"
    )
    # where the hours go: one baseline's slow steps can outweigh everything else
    lines += ["", f"{'method':<20} {'runs':>5} {'GPU-hours':>11} {'share':>6}  unpriced"]
    for method, m in sorted(estimate["methods"].items(), key=lambda item: -item[1]["gpu_hours"]):
        share = f"{m['gpu_hours'] / total:.0%}" if total else "-"
        lines.append(f"{method:<20} {m['runs']:>5} {m['gpu_hours']:>11.1f} {share:>6}  {m['unpriced'] or ''}")
    if derived:
        lines += ["", f"derived (no measurement of their own; {len(derived)} runs, in the sums above):"]
        for key in derived:
            how = "; ".join(runs[key]["scaled"]) or "timed alike"
            lines.append(f"  {key} <- {runs[key]['from']} ({how})")
    if unmeasured:
        lines += ["", f"no measurement ({len(unmeasured)} runs, not in the sums above):"]
        lines += [f"  {key}: {runs[key]['why']}" for key in unmeasured]
    return "\n".join(lines)
