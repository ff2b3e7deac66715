"""Where the time of one captured backward goes: each kernel's start and end inside a replayed CUDA graph.

For each row of the latency figure at the paper's L, ``fp32`` (cuBLAS), ``hot`` (``Backend.layer_gradients``, as
``hot latency`` captures it) and ``streams`` (:mod:`hot.bench.latency_ab`'s) are captured once and replayed under
torch.profiler, each replay behind a busy-wait so it starts on an idle GPU. Per replay, every kernel's start and end
are taken relative to the replay's first kernel start; the medians over replays are reported beside the graph's GPU
time from CUDA events (``hot latency``'s ``*_device_us``). The event time less the kernels' span is what the graph
costs outside its kernels (its launch on the GPU, its end); gaps between a kernel's end and the start of the one
that waits for it are the dependency's cost.

    python -m hot.bench.latency_timeline OUT.json [LAYER ...]
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from ..backends.real import RealBackend
from ..paper import paper_values
from ..results import write_json_atomic
from .latency import _cublas, _hot
from .latency_ab import _compositions
from .timing import HIDE_LAUNCH_CYCLES, replayable, time_replays

REPLAYS = 20
SPIN = "spin"  # torch.cuda._sleep's kernel: the separator between replays


def kernel_timeline(run: Callable[[], object], replays: int) -> list[dict[str, Any]]:
    """Each kernel of one replay of ``run``: its name and median start, end and duration (µs) relative to the
    replay's first kernel start, in order of start."""
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            torch.cuda._sleep(HIDE_LAUNCH_CYCLES)
            run()
        torch.cuda.synchronize()
    events = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0),
        key=lambda e: e.time_range.start,
    )
    groups: list[list[Any]] = []
    for event in events:
        if SPIN in event.name:
            groups.append([])
        elif groups:
            groups[-1].append(event)
    counts = [len(g) for g in groups if g]
    if not counts:
        raise RuntimeError("the profiler recorded no kernels between the busy-waits")
    groups = [g for g in groups if len(g) == statistics.mode(counts)]  # a replay the profiler cut short is left out
    # A kernel is known by its name and its place among the replay's kernels of that name: branches of a graph do
    # not start in the same order on every replay.
    keyed: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for group in groups:
        seen: dict[str, int] = {}
        first = min(e.time_range.start for e in group)
        for e in group:
            n = seen[e.name] = seen.get(e.name, -1) + 1
            keyed.setdefault((e.name, n), []).append((e.time_range.start - first, e.time_range.end - first))
    rows = [
        {
            "kernel": name[:100],
            "start_us": statistics.median(s for s, _ in times),
            "end_us": statistics.median(e for _, e in times),
            "duration_us": statistics.median(e - s for s, e in times),
            "first_in": sum(s == 0 for s, _ in times) / len(times),  # the replays it started
        }
        for (name, _), times in keyed.items()
    ]
    return sorted(rows, key=lambda r: r["start_us"])


def main(out: str, layers: list[str]) -> None:
    if not torch.cuda.is_available():
        raise SystemExit("python -m hot.bench.latency_timeline profiles CUDA graphs: it needs a CUDA GPU")
    backend = RealBackend()
    torch.backends.cuda.matmul.allow_tf32 = False
    results = []
    for row in paper_values()["latency_figure"]["rows"]:
        if layers and row["layer"] not in layers:
            continue
        tokens, out_f, in_f = int(row["L"]), int(row["O"]), int(row["I"])
        gen = torch.Generator(device="cuda").manual_seed(tokens + out_f + in_f)
        g_y = torch.randn(tokens, out_f, device="cuda", generator=gen)
        x = torch.randn(tokens, in_f, device="cuda", generator=gen)
        w = torch.randn(out_f, in_f, device="cuda", generator=gen) * 0.02
        variants = {"fp32": _cublas(g_y, w, x), "hot": _hot(backend, g_y, w, x, tokens)["hot"]}
        variants["streams"] = _compositions(backend, g_y, w, x, tokens)["streams"]
        for name, fn in variants.items():
            run, mode = replayable(fn)
            kernels = kernel_timeline(run, REPLAYS)
            device_us = time_replays(run, 50, 5, hide_launch=True)
            span = max(k["end_us"] for k in kernels)
            results.append(
                {"model": row["model"], "layer": row["layer"], "L": tokens, "O": out_f, "I": in_f, "variant": name}
                | {"mode": mode, "device_us": device_us, "span_us": span, "kernels": kernels}
            )
            print(f"== {row['model']} {row['layer']} {name}: events {device_us:.1f} us, kernels' span {span:.1f} us")
            for k in kernels:
                print(
                    f"   {k['start_us']:6.2f} .. {k['end_us']:6.2f}  ({k['duration_us']:5.2f}, first in "
                    f"{k['first_in']:4.0%})  {k['kernel'][:80]}"
                )
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    write_json_atomic(out, {"environment": env, "replays": REPLAYS, "rows": results})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
