"""Throwaway experiment (not committed): stream priorities in the captured HOT backward (torch instantiates graphs
with cudaGraphInstantiateFlagUseNodePriority, so a node keeps its capture stream's priority).
hot: as the library runs it; side_high: the g_w chain's side stream at high priority; capture_high: the capture
stream (the g_x chain) at high priority, the side stream normal."""

import functools
import json
import statistics
import sys

import torch

from hot.backends import real as real_module
from hot.backends.real import RealBackend
from hot.bench.latency import _cublas, _hot
from hot.bench.latency_timeline import REPLAYS, kernel_timeline
from hot.bench.timing import time_replays
from hot.paper import paper_values


def capture(fn, priority=0):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream(priority=priority)
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
        with torch.cuda.graph(graph, stream=stream):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph.replay


def side_streams_at(priority):
    @functools.cache
    def side(device, index=0):
        return torch.cuda.Stream(device, priority=priority)

    real_module._side_stream = side


out, rounds, named = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
backend = RealBackend()
torch.backends.cuda.matmul.allow_tf32 = False
lo, hi = torch.cuda.Stream.priority_range() if hasattr(torch.cuda.Stream, "priority_range") else (0, -1)
print("priority range", lo, hi, flush=True)
rows = []
original = real_module._side_stream
for row in paper_values()["latency_figure"]["rows"]:
    tokens, out_f, in_f = int(row["L"]), int(row["O"]), int(row["I"])
    gen = torch.Generator(device="cuda").manual_seed(tokens + out_f + in_f)
    g_y = torch.randn(tokens, out_f, device="cuda", generator=gen)
    x = torch.randn(tokens, in_f, device="cuda", generator=gen)
    w = torch.randn(out_f, in_f, device="cuda", generator=gen) * 0.02
    hot = _hot(backend, g_y, w, x, tokens)["hot"]
    runs = {"fp32": capture(_cublas(g_y, w, x))}
    real_module._side_stream = original
    runs["hot"] = capture(hot)
    side_streams_at(-1)
    runs["side_high"] = capture(hot)
    real_module._side_stream = original
    runs["capture_high"] = capture(hot, -1)
    times = {n: [] for n in runs}
    for _ in range(rounds):
        for n, r in runs.items():
            times[n].append(time_replays(r, 50, 5, hide_launch=True))
    res = {"model": row["model"], "layer": row["layer"], "L": tokens}
    res |= {f"{n}_device_us": statistics.median(t) for n, t in times.items()}
    res["rounds"] = times
    if row["layer"] in named:
        res["timelines"] = {n: kernel_timeline(r, REPLAYS) for n, r in runs.items()}
    rows.append(res)
    print(
        f"{row['model']:>22} {row['layer']:<15}",
        "  ".join(f"{n} {res[f'{n}_device_us']:6.1f}" for n in runs),
        flush=True,
    )
tot = {n: round(sum(r[f"{n}_device_us"] for r in rows), 1) for n in runs}
print("summed", tot)
json.dump(
    {"gpu": torch.cuda.get_device_name(), "rounds": rounds, "summed": tot, "rows": rows}, open(out, "w"), indent=1
)
