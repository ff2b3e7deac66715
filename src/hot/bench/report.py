"""The targets of ``hot bench`` (issue: HOT faster than bf16 on Hopper), the verdicts against them and the summary
table printed after a run."""

from __future__ import annotations

from typing import Any

LAYER_TARGETS = {"qkv": 1.6, "proj": 1.2, "fc1": 1.6, "fc2": 1.6}  # bf16_us / hot_backward_us
BANDWIDTH_TARGET = 0.8  # fraction of copy bandwidth for the memory-bound quantisers
STEP_BASELINE = "bf16_compile"
STEP_SPEEDUP_TARGET = 1.15  # bf16_compile step time / HOT step time
STEP_MEMORY_TARGET = 0.7  # HOT peak memory / bf16_compile peak memory


def meets(value: float | None, target: float, higher_is_better: bool = True) -> bool | None:
    """Whether ``value`` reaches ``target`` (None where nothing was measured)."""
    if value is None:
        return None
    return value >= target if higher_is_better else value <= target


def layer_verdict(name: str, bf16_us: float, hot_us: float) -> dict[str, Any]:
    speedup = bf16_us / hot_us
    target = LAYER_TARGETS[name]
    return {"speedup_vs_bf16": speedup, "target": target, "target_met": meets(speedup, target)}


def step_summary(variants: dict[str, dict[str, Any]], baseline: str = STEP_BASELINE) -> dict[str, Any]:
    """Speedup and memory ratio of every measured variant against ``baseline``, and HOT's targets."""
    base = variants.get(baseline, {})
    ratios: dict[str, dict[str, float | None]] = {}
    for name, v in variants.items():
        if "step_ms" not in v or "step_ms" not in base:
            continue
        mem, base_mem = v.get("peak_memory_gib"), base.get("peak_memory_gib")
        ratios[name] = {
            "speedup": base["step_ms"] / v["step_ms"],
            "memory_ratio": mem / base_mem if mem is not None and base_mem else None,
        }
    torchao_ms = variants.get("torchao_float8", {}).get("step_ms")
    targets: dict[str, dict[str, Any]] = {}
    for name in ("hot", "hot_compile"):
        if name not in ratios:
            continue
        ms = variants[name]["step_ms"]
        targets[name] = {
            f"speedup_ge_{STEP_SPEEDUP_TARGET}": meets(ratios[name]["speedup"], STEP_SPEEDUP_TARGET),
            "faster_than_torchao_float8": None if torchao_ms is None else ms < torchao_ms,
            f"memory_ratio_le_{STEP_MEMORY_TARGET}": meets(ratios[name]["memory_ratio"], STEP_MEMORY_TARGET, False),
        }
    return {"baseline": baseline, "ratios": ratios, "targets": targets}


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
        lines.append("layer  bf16 us  hot us  abc us  speedup  target  met    limit  fp8 TF/s  int8 TOP/s")
    for name, r in layers.items():
        if not isinstance(r, dict) or "error" in r:
            lines.append(f"{name:<6} error: {str(r.get('error') if isinstance(r, dict) else r)[:200]}")
            continue
        lines.append(
            f"{name:<6} {r['bf16_us']:7.1f} {r['hot_backward_us']:7.1f} {r['hot_forward_abc_us']:7.1f} "
            f"{r['speedup_vs_bf16']:8.2f} {r['target']:7.2f}  {f(r['target_met']):<5} "
            f"{r['arithmetic_limit']['limit']:6.2f} {r['fp8_tflops']:9.0f} {r['int8_tops']:11.0f}"
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
        lines.append("step variant     ms      GiB   speedup  mem ratio")
        ratios = step.get("ratios", {})
        for name, v in step["variants"].items():
            if "step_ms" in v:
                r = ratios.get(name, {})
                lines.append(
                    f"{name:<15} {v['step_ms']:7.1f} {f(v.get('peak_memory_gib')):>7} "
                    f"{f(r.get('speedup')):>8} {f(r.get('memory_ratio')):>9}"
                )
            else:
                lines.append(f"{name:<15} {str(v.get('skipped') or v.get('error'))[:100]}")
        for name, t in step.get("targets", {}).items():
            lines.append(f"targets {name}: {t}")
    eq = payload.get("equivalence")
    if eq:
        if "error" in eq:
            lines.append(f"equivalence: error {eq['error'][:200]}")
        else:
            lines.append(
                f"equivalence: max rel loss diff {eq['max_rel_loss_diff']:.2e} (< {eq['tolerance']:g}: "
                f"{eq['passed']}), accuracy {[r['held_out_accuracy'] for r in eq['runs']]}, "
                f"code mismatches {eq.get('code_mismatches')}"
            )
    return lines
