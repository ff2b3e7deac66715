"""Where an eager ViT-B/16 training step (batch 128, bf16 autocast, AdamW) spends its host time: how the
``hostprof_*.txt`` files under ``kernels/results/layer_gradients_h100_2026-11-27/`` were made. On a GPU machine:

    python -m hot.bench.host_profile OUT_DIR hot|bf16

After 4 warm-up steps, 10 steps are timed twice over: ``host_ms`` from the step's call to its return on the host,
``wall_ms`` between CUDA events around it. Where they agree the host bounds the step; where ``host_ms`` is lower the
GPU does. Then cProfile over 5 more steps writes ``OUT_DIR/hostprof_<variant>.txt`` (Python functions and the C++
calls they make, by own time and by cumulative time; cProfile's own cost inflates the Python share). The HOT variant
is the step bench's (real backend, ABC, head converted) without LQS, whose first step is a calibration.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

VARIANTS = ("hot", "bf16")


def profile(out: Path, variant: str) -> dict[str, object]:
    import timm

    from ..config import HOTConfig
    from .step import STEP_CLASSES, STEP_MODEL, _convert_hot, train_step

    torch.manual_seed(0)
    net = timm.create_model(STEP_MODEL, num_classes=STEP_CLASSES)
    if variant == "hot":
        _convert_hot(net, HOTConfig(backend="real", abc=True, lqs=False, seed=0), keep_head=False)
    net = net.cuda().train()
    x = torch.randn(128, 3, 224, 224, device="cuda")
    y = torch.randint(0, STEP_CLASSES, (128,), device="cuda")
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    for _ in range(4):
        train_step(net, optimizer, x, y, True)
    torch.cuda.synchronize()
    host, wall = [], []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        began = time.perf_counter()
        start.record()
        train_step(net, optimizer, x, y, True)
        end.record()
        host.append((time.perf_counter() - began) * 1e3)
        end.synchronize()
        wall.append(start.elapsed_time(end))
    profiler = cProfile.Profile()
    torch.cuda.synchronize()
    profiler.enable()
    for _ in range(5):
        train_step(net, optimizer, x, y, True)
    profiler.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(70)
    stats.sort_stats("cumulative").print_stats(90)
    (out / f"hostprof_{variant}.txt").write_text(text.getvalue())
    return {"variant": variant, "host_ms": sorted(host), "wall_ms": sorted(wall)}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[1] not in VARIANTS:
        print(f"usage: python -m hot.bench.host_profile OUT_DIR {'|'.join(VARIANTS)}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("hot.bench.host_profile needs a CUDA GPU: none is visible", file=sys.stderr)
        return 2
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")
    print(json.dumps(profile(out, args[1])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
