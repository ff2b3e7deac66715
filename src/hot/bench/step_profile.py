"""The ViT-B/16 training step (batch 128, bf16 autocast, AdamW) of one configuration in a fresh process, with an
optional torch.profiler trace of 3 steps after 2: how the results under ``kernels/results/step_profile_*`` were made.

    python -m hot.bench.step_profile OUT_DIR               # bf16 and five HOT configurations, each in its own process
    python -m hot.bench.step_profile OUT_DIR hot 1 1 0 p   # one: variant, head converted, LQS, fused g_y, profile
    python -m hot.bench.step_profile OUT_DIR hot 1 1 0 m   # ... and what is allocated at the step's memory peak

A variant is ``bf16`` or ``hot``, or either with ``_compile`` (``torch.compile``, after LQS's eager first step).
Each configuration prints one JSON line (step time, peak memory, LQS decisions, kernel launches a step when
profiled); a profile (``p``) also writes ``OUT_DIR/profile_<variant>_<head><lqs><fused>.txt``, torch.profiler's tables
by CUDA time and by call count; ``m`` writes ``OUT_DIR/memory_<variant>_<head><lqs><fused>.json``, the blocks live at
the peak of two traced steps grouped by where they were allocated (:mod:`hot.bench.memory_peak`). The timing is
:func:`hot.bench.step.time_training`'s (median of 20 after 5 warm-up).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

# bf16, then HOT (real backend, ABC) with the head converted or not, LQS on or off, the fused g_y quantiser; "p":
# profiled too.
CONFIGURATIONS = (
    ("bf16", "0", "0", "0"),
    ("hot", "1", "1", "0", "p"),
    ("hot", "0", "1", "0"),
    ("hot", "0", "0", "0"),
    ("hot", "0", "0", "1", "p"),
    ("hot", "1", "1", "0"),
)
PROFILED_STEPS = 3
VARIANTS = ("bf16", "bf16_compile", "hot", "hot_compile")


def measure(
    out: Path, variant: str, head: bool, lqs: bool, fused: bool, profile: bool, memory: bool = False
) -> dict[str, Any]:
    """One configuration's step time and peak memory, and its profile and memory peak where asked."""
    import timm

    from .. import HOTConfig, convert
    from .step import time_training, train_step

    compiled = variant.endswith("_compile")
    torch.manual_seed(0)
    net = timm.create_model("vit_base_patch16_224", num_classes=100)
    if variant.startswith("hot"):
        config = HOTConfig(backend="real", abc=True, lqs=lqs, fused_grad_output=fused)
        convert(net, config, exclude=[] if head else ["head"])
    net = net.cuda().train()
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(128, 3, 224, 224, device="cuda", generator=gen)
    y = torch.randint(0, 100, (128,), device="cuda", generator=gen)
    hot = variant.startswith("hot")
    mode = "default" if compiled else None
    timed = time_training(net, x, y, steps=20, warmup=5, compile_mode=mode, calibrate_lqs=hot and lqs)
    result = {
        "variant": variant,
        "head": head,
        "lqs": lqs,
        "fused": fused,
        "step_ms": timed["step_ms"],
        "peak_gib": timed["peak_memory_gib"],
        "lqs_dec": timed.get("lqs"),
    }
    tag = f"{variant}_{int(head)}{int(lqs)}{int(fused)}"
    model = torch.compile(net) if compiled else net  # the graphs time_training compiled, from dynamo's cache
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    if memory:
        from .memory_peak import peak_allocations

        train_step(model, optimizer, x, y, True)
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(2):
            train_step(model, optimizer, x, y, True)
        torch.cuda.synchronize()
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        peak = peak_allocations(snapshot["device_traces"][torch.cuda.current_device()], base)
        peak["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        (out / f"memory_{tag}.json").write_text(json.dumps(peak, indent=1))
        result["traced_peak_gib"] = peak["peak_bytes"] / 2**30
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as profiler

        for _ in range(2):
            train_step(model, optimizer, x, y, True)
        torch.cuda.synchronize()
        with profiler(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
            for _ in range(PROFILED_STEPS):
                train_step(model, optimizer, x, y, True)
            torch.cuda.synchronize()
        kernels = [e for e in trace.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        result["kernels_per_step"] = len(kernels) / PROFILED_STEPS
        # GPU time a step against the step's time: where they differ, the GPU waited for the host
        result["kernel_ms_per_step"] = sum(e.time_range.elapsed_us() for e in kernels) / 1e3 / PROFILED_STEPS
        table = trace.key_averages()
        (out / f"profile_{tag}.txt").write_text(
            table.table(sort_by="self_cuda_time_total", row_limit=45, max_name_column_width=60)
            + "\n\nBY COUNT\n"
            + table.table(sort_by="count", row_limit=45, max_name_column_width=60)
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    flags = args[5] if len(args) == 6 else ""
    if len(args) not in (1, 5, 6) or (len(args) > 1 and args[1] not in VARIANTS) or not set(flags) <= {"p", "m"}:
        variants = "|".join(VARIANTS)
        print(f"usage: python -m hot.bench.step_profile OUT_DIR [{variants} HEAD LQS FUSED [p|m|pm]]", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("hot.bench.step_profile needs a CUDA GPU: none is visible", file=sys.stderr)
        return 2
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    if len(args) == 1:
        for configuration in CONFIGURATIONS:  # each in a fresh process: nothing of one run reaches the next
            subprocess.run([sys.executable, "-m", "hot.bench.step_profile", str(out), *configuration], check=False)
        return 0
    warnings.simplefilter("ignore")
    variant, head, lqs, fused = args[1], args[2] == "1", args[3] == "1", args[4] == "1"
    print(json.dumps(measure(out, variant, head, lqs, fused, profile="p" in flags, memory="m" in flags)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
