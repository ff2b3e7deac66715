"""Training-step time of every method on the small models the gpu preset trains, and the device waits in a step.

    python -m hot.bench.method_steps OUT.json [--device cuda] [--steps 20] [--batch-size 128]

Each (model, method) is built as the preset builds it (timm model, ``hot.convert`` with the head left exact), then
AdamW steps on a fixed batch: 5 warm-up steps, then the median of ``--steps`` single steps, each ended by a device
synchronisation. On CUDA one more step runs with ``torch.cuda.set_sync_debug_mode("warn")``: the number of
operations that made the host wait for the device (``syncs_per_step``), the cost that grows when several runs share
one GPU. HOT uses the real backend where hot-kernels is built for this GPU, else the fake one (``backend`` says
which). One process, one machine: the ratios to ``fp`` compare like with like.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import HOTConfig
from ..convert import convert
from ..results import environment, write_json_atomic
from ..train.models import create_model
from .step import train_step

MODELS = ("vit_tiny_fmnist", "resnet_tiny_fmnist")
METHODS = ("fp", "hot", "lbp_wht", "hla_filter", "grad_dropout")
WARMUP = 5


def build(model_name: str, method: str, device: str) -> tuple[nn.Module, str]:
    """The model with ``method`` (keep ratio 0.5 for the filters, as the preset), and the backend HOT layers use."""
    torch.manual_seed(0)
    model = create_model(model_name, num_classes=10, in_chans=1).to(device)
    if method == "fp":
        return model, "none"
    keep = {"keep_ratio": 0.5} if method in ("hla_filter", "grad_dropout") else {}
    convert(model, HOTConfig(method=method, backend="auto", **keep), exclude=["head", "fc"])
    layer = next(m for m in model.modules() if hasattr(m, "hot_method"))
    return model, layer.hot_method.backend_name(torch.device(device))


def measure(model_name: str, method: str, device: str, steps: int, batch_size: int) -> dict[str, Any]:
    model, backend = build(model_name, method, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(batch_size, 1, 28, 28, generator=gen).to(device)
    y = torch.randint(0, 10, (batch_size,), generator=gen).to(device)

    def step() -> None:
        train_step(model, opt, x, y, amp=False)

    def synchronize() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    for _ in range(WARMUP):
        step()
    times = []
    for _ in range(steps):
        synchronize()
        started = time.perf_counter()
        step()
        synchronize()
        times.append((time.perf_counter() - started) * 1e3)
    row: dict[str, Any] = {"model": model_name, "method": method, "backend": backend}
    row["step_ms"] = statistics.median(times)
    row["syncs_per_step"] = _syncs_in_one_step(step) if device.startswith("cuda") else None
    return row


def _syncs_in_one_step(step: Any) -> int:
    torch.cuda.synchronize()
    before = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(before)
    return sum("synchroniz" in str(w.message) for w in caught)


USAGE = (
    "usage: python -m hot.bench.method_steps OUT.json [--device cuda|cpu] [--steps N] [--batch-size N] "
    "[--models A,B] [--methods A,B]"
)


def _options(argv: Sequence[str]) -> tuple[list[str], dict[str, str]] | None:
    """Positional arguments and ``--name value`` options; None where an option is unknown or has no value."""
    known = ("--device", "--steps", "--batch-size", "--models", "--methods")
    positional, options, items = [], {}, list(argv)
    while items:
        arg = items.pop(0)
        if arg.startswith("--"):
            if arg not in known or not items:
                return None
            options[arg[2:]] = items.pop(0)
        else:
            positional.append(arg)
    return positional, options


def main(argv: Sequence[str]) -> int:
    parsed = _options(argv)
    if parsed is None or len(parsed[0]) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    (out,), options = parsed
    device = options.get("device", "cuda" if torch.cuda.is_available() else "cpu")
    steps, batch_size = int(options.get("steps", 20)), int(options.get("batch-size", 128))
    rows = []
    for model_name in options.get("models", ",".join(MODELS)).split(","):
        for method in options.get("methods", ",".join(METHODS)).split(","):
            row = measure(model_name, method, device, steps, batch_size)
            rows.append(row)
            print(
                f"{model_name:20s} {method:13s} {row['backend']:5s} {row['step_ms']:7.1f} ms/step"
                f"  syncs/step {row['syncs_per_step']}",
                flush=True,
            )
    fp_ms = {r["model"]: r["step_ms"] for r in rows if r["method"] == "fp"}
    for row in rows:
        row["vs_fp"] = row["step_ms"] / fp_ms[row["model"]] if row["model"] in fp_ms else None
    write_json_atomic(
        Path(out),
        {
            "benchmark": "method_steps",
            "how": f"AdamW steps at batch {batch_size}, median of {steps} after {WARMUP} warm-up, alone",
            "environment": environment(),
            "rows": rows,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
