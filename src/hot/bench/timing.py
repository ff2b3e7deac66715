"""GPU timing primitives of the benchmarks: a kernel's median time, byte counts, copy bandwidth, GEMM rates."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch

# A busy-wait queued ahead of each replay when the launch is hidden: about 0.2 ms at the H100's 1.98 GHz, longer than
# a graph launch takes on a slow host, so the replay is queued before the GPU reaches the start event.
HIDE_LAUNCH_CYCLES = 400_000


def replayable(fn: Callable[[], object]) -> tuple[Callable[[], object], str]:
    """``fn`` as something to time: a CUDA graph's replay of it ("graph"), or ``fn`` itself where capture fails
    ("eager"). ``fn`` runs a few times first (compilation, handle creation before capture)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
            with torch.cuda.graph(graph, stream=stream):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
    except RuntimeError:
        return fn, "eager"
    return graph.replay, "graph"


def time_replays(run: Callable[[], object], reps: int, warmup: int, hide_launch: bool = False) -> float:
    """Median microseconds of one call of ``run`` (:func:`replayable`'s), each call timed alone between two CUDA
    events on an idle stream, so the time includes the host's launch of the graph: on a small layer that launch,
    not the kernels, sets the number (the same ≈ 18 µs for every cuBLAS call on one H100 host). With
    ``hide_launch`` the GPU first spins (``torch.cuda._sleep``) while the host queues the call behind it, as
    triton's ``do_bench`` hides launches behind its cache flush: the time is then the GPU's, from the first kernel's
    start to the last one's end, as a queued training step sees it."""
    for _ in range(warmup):
        run()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        if hide_launch:
            torch.cuda._sleep(HIDE_LAUNCH_CYCLES)
        start.record()
        run()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e3


def time_us(fn: Callable[[], object], reps: int, warmup: int, hide_launch: bool = False) -> tuple[float, str]:
    """Median microseconds of one call of ``fn`` from a replayed CUDA graph (or eager calls where capture fails), and
    which of the two ran: :func:`replayable`, then :func:`time_replays`."""
    run, mode = replayable(fn)
    return time_replays(run, reps, warmup, hide_launch), mode


def tensor_bytes(*tensors: torch.Tensor) -> int:
    """Bytes held by the tensors' elements (a transposed view counts its elements once)."""
    return sum(t.numel() * t.element_size() for t in tensors)


def bandwidth(nbytes: int, us: float, copy_gbps: float, target: float) -> dict[str, Any]:
    """GB/s of ``nbytes`` moved in ``us`` microseconds, and its fraction of the copy bandwidth against ``target``."""
    gbps = nbytes / us / 1e3
    fraction = gbps / copy_gbps
    return {"bytes": nbytes, "gbps": gbps, "fraction_of_copy": fraction, "target": target, "met": fraction >= target}


def copy_bandwidth(gib: float, reps: int, warmup: int) -> dict[str, Any]:
    """A device-to-device copy of a random bf16 buffer by a kernel (``x * 1`` into a second buffer): GB/s of bytes
    read + written, the ceiling of any memory-bound quantiser. ``memcpy_gbps``: the same copy as a memcpy
    (``copy_``), for comparison. Captured in a CUDA graph, as :func:`time_us` times, a memcpy becomes a graph's copy
    node, which on an H200 moved 2.7 TB/s for buffers of 1 and 4 GiB where a kernel, or the memcpy run eagerly,
    moved 4.1–4.3 (level at 0.125 GiB; ``kernels/results/h200_2026-11-29_s22/copy_probe.json``): the ceiling is
    what a kernel reaches."""
    src = torch.randn(int(gib * 2**30) // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    us, mode = time_us(lambda: torch.mul(src, 1, out=dst), reps, warmup)
    memcpy_us, memcpy_mode = time_us(lambda: dst.copy_(src), reps, warmup)
    moved = 2 * tensor_bytes(src)
    return {
        "buffer_bytes": moved // 2,
        "bytes_moved": moved,
        "us": us,
        "gbps": moved / us / 1e3,
        "copied_by": "kernel (x * 1)",
        "memcpy_gbps": moved / memcpy_us / 1e3,
        "timing": mode,
        "memcpy_timing": memcpy_mode,
    }


def gemm_rates(length: int, out_f: int, in_f: int, rows: int, reps: int, warmup: int) -> dict[str, Any]:
    """FP8 ``_scaled_mm`` (the g_x GEMM's shape, row-wise scales, bf16 out) and INT8 ``_int_mm`` (g_w's shape)."""
    e4m3 = torch.float8_e4m3fn
    a = torch.randn(length, out_f, device="cuda").to(e4m3)
    b_t = torch.randn(in_f, out_f, device="cuda").to(e4m3)  # (N, K) row-major: the column-major B cuBLASLt wants
    scale_a = torch.rand(length, 1, device="cuda") + 0.5
    scale_b = torch.rand(1, in_f, device="cuda") + 0.5

    def fp8() -> torch.Tensor:
        return torch._scaled_mm(
            a, b_t.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16, use_fast_accum=False
        )

    fp8_us, fp8_mode = time_us(fp8, reps, warmup)
    g = torch.randint(-127, 128, (out_f, rows), device="cuda", dtype=torch.int8)
    x_t = torch.randint(-127, 128, (in_f, rows), device="cuda", dtype=torch.int8)
    int8_us, int8_mode = time_us(lambda: torch._int_mm(g, x_t.t()), reps, warmup)
    fp8_flops = 2.0 * length * out_f * in_f / (fp8_us * 1e-6)
    int8_ops = 2.0 * rows * out_f * in_f / (int8_us * 1e-6)
    return {
        "fp8_gemm_us": fp8_us,
        "fp8_tflops": fp8_flops / 1e12,
        "int8_gemm_us": int8_us,
        "int8_tops": int8_ops / 1e12,
        "int8_over_fp8_rate": int8_ops / fp8_flops,
        "_fp8_flops": fp8_flops,
        "_modes": {"fp8_gemm": fp8_mode, "int8_gemm": int8_mode},
    }
