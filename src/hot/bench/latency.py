"""``hot latency``: per-layer backward latency (g_x + g_w) on a GPU, HOT against cuBLAS and LBP-WHT.

For each layer of the authors' latency figure (``paper_values()["latency_figure"]``, shapes (L, O, I)
per sample) at the paper's L and at L × 128, one backward's two gradient GEMMs are timed:

- ``fp32``, ``tf32``, ``bf16``: cuBLAS ``g_x = g_y W`` and ``g_w = g_yᵀ x`` in that precision;
- ``lbp_wht``: LBP-WHT (rank 8 of 16 along L on both GEMMs), the reference PyTorch ops in fp32;
- ``hot``: the real backend (hot-kernels) from fp32 g_y, x, W: Q4(HT(g_y)) per token, Q4(HT(W)) SAWB,
  the g_x GEMM and dequantisation, Q8(P g_y), Q8(P x), the g_w GEMM and dequantisation; ``hot_bf16``
  the same from bf16 tensors; ``hot.<stage>`` each stage alone.

Each variant is captured in a CUDA graph (launch gaps removed; eager timing where capture fails), warmed
up, and replayed ``--reps`` times, each replay timed with CUDA events; the median is reported. Without
a GPU the command writes ``{"status": "not measured: no GPU"}`` and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from hot.backends import HLASpec
from hot.config import HOTConfig
from hot.hadamard import largest_block
from hot.hla import hla_windows
from hot.methods import LayerState, LBPWHTMethod
from hot.paper import paper_values
from hot.rounding import Stream, hash_key

SCALES = (1, 128)
BASELINES = ("fp32", "tf32", "bf16", "lbp_wht")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("results/latency/latency.json"), help="JSON path (CSV beside)")
    parser.add_argument("--scales", default=",".join(map(str, SCALES)), help="batch multiples of the paper's L")
    parser.add_argument("--reps", type=int, default=100, help="timed replays per variant (median reported)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed replays first")
    parser.add_argument("--layers", default="", help="comma-separated model/layer names (default: all 16)")
    parser.add_argument("--gemm", default="auto", help="hot-kernels GEMM family: auto, cutlass, cublas, reference")
    parser.add_argument("--no-stages", action="store_true", help="skip the per-stage breakdown of HOT")


def environment() -> dict[str, Any]:
    """GPU, driver, CUDA and torch versions for the results file."""
    env: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        env["capability"] = f"{major}.{minor}"
        try:
            query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"]
            env["driver"] = subprocess.run(query, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            env["driver"] = None
    return env


def time_us(fn: Callable[[], object], reps: int, warmup: int) -> tuple[float, str]:
    """Median microseconds of one call, from a replayed CUDA graph (or eager calls where capture fails)."""
    for _ in range(3):  # compile/handle creation before capture
        fn()
    torch.cuda.synchronize()
    run: Callable[[], object] = fn
    mode = "graph"
    try:
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
            with torch.cuda.graph(graph, stream=stream):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        run = graph.replay
    except RuntimeError:
        mode = "eager"
    for _ in range(warmup):
        run()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        run()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e3, mode


def _cublas(g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor) -> Callable[[], object]:
    return lambda: (g_y @ w, g_y.t() @ x)


def _hot(backend: Any, g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor, tokens: int) -> dict[str, Callable]:
    """The full HOT backward and each of its stages (stage inputs precomputed)."""
    c = HOTConfig()
    block = largest_block(w.shape[0], c.hq_block)
    kx, kw = hash_key(0, 0, 0, Stream.GX_GRAD_OUTPUT), hash_key(0, 0, 0, Stream.GW_GRAD_OUTPUT)
    windows = hla_windows(tokens, "paper")  # the figure's rows give T, not a grid: 1×16 strips

    def quant_gy() -> tuple:
        return backend.hq_quantize_grad_output(g_y, block, c.gx_bits, c.gx_granularity, kx)

    def quant_w() -> tuple:
        return backend.hq_quantize_weight(w, block, c.gx_bits)

    def hla_gy() -> tuple:
        return backend.hla_quantize(g_y, HLASpec(windows, c.hla_rank, c.gw_bits, "stochastic", "per_tensor", kw))

    def hla_x() -> tuple:
        return backend.hla_quantize(x, HLASpec(windows, c.hla_rank, c.gw_bits, "nearest", "per_tensor"))

    a, b, gq, xq = quant_gy(), quant_w(), hla_gy(), hla_x()

    def full() -> tuple:
        g_x = backend.hq_matmul(*quant_gy(), *quant_w(), block)
        g_w = backend.hla_matmul(*hla_gy(), *hla_x(), 16)
        return g_x, g_w

    return {
        "hot": full,
        "hot.hq_quant_gy": quant_gy,
        "hot.hq_quant_w": quant_w,
        "hot.hq_gemm_dequant": lambda: backend.hq_matmul(*a, *b, block),
        "hot.hla_quant_gy": hla_gy,
        "hot.hla_quant_x": hla_x,
        "hot.hla_gemm_dequant": lambda: backend.hla_matmul(*gq, *xq, 16),
    }


def measure_layer(row: dict[str, Any], scale: int, backend: Any, args: argparse.Namespace) -> dict[str, Any]:
    tokens, out_f, in_f = int(row["L"]), int(row["O"]), int(row["I"])
    length = tokens * scale
    gen = torch.Generator(device="cuda").manual_seed(length + out_f + in_f)
    g_y = torch.randn(length, out_f, device="cuda", generator=gen)
    x = torch.randn(length, in_f, device="cuda", generator=gen)
    w = torch.randn(out_f, in_f, device="cuda", generator=gen) * 0.02
    result: dict[str, Any] = {"model": row["model"], "layer": row["layer"], "L": length, "O": out_f, "I": in_f}
    result["scale"], result["tokens"] = scale, tokens
    modes: dict[str, str] = {}

    def record(name: str, fn: Callable[[], object]) -> None:
        result[f"{name}_us"], modes[name] = time_us(fn, args.reps, args.warmup)

    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        record("fp32", _cublas(g_y, w, x))
        lbp = LBPWHTMethod(HOTConfig(method="lbp_wht", hla_blocking="paper"))
        state, windows = LayerState(index=0), hla_windows(tokens, "paper")
        record(
            "lbp_wht",
            lambda: (lbp.grad_input(g_y, w, windows, state, None), lbp.grad_weight(g_y, (x,), windows, None)),
        )
        torch.backends.cuda.matmul.allow_tf32 = True
        record("tf32", _cublas(g_y, w, x))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    record("bf16", _cublas(g_y.bfloat16(), w.bfloat16(), x.bfloat16()))
    for name, fn in _hot(backend, g_y, w, x, tokens).items():
        if name == "hot" or not args.no_stages:
            record(name, fn)
    record("hot_bf16", _hot(backend, g_y.bfloat16(), w.bfloat16(), x.bfloat16(), tokens)["hot"])
    for base in BASELINES:
        result[f"speedup_vs_{base}"] = result[f"{base}_us"] / result["hot_us"]
    result["bf16_speedup_of_hot_bf16"] = result["bf16_us"] / result["hot_bf16_us"]
    result["timing"] = "graph" if all(m == "graph" for m in modes.values()) else json.dumps(modes)
    return result


def _write(out: Path, payload: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n")
    rows = payload.get("rows", [])
    if rows:
        with out.with_suffix(".csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def run(args: argparse.Namespace) -> int:
    env = environment()
    if not torch.cuda.is_available():
        _write(args.out, {"status": "not measured: no GPU", "environment": env})
        print(f"not measured: no GPU; wrote {args.out}")
        return 0
    import hot_kernels  # the real backend; an ImportError here says the extension is not built

    backend = hot_kernels.KernelBackend(gemm=args.gemm)
    env["hot_kernels_gemm"] = backend.gemm_for(torch.device("cuda"))
    wanted = {name for name in args.layers.split(",") if name}
    layers = [
        r for r in paper_values()["latency_figure"]["rows"] if not wanted or f"{r['model']}/{r['layer']}" in wanted
    ]
    scales = [int(s) for s in args.scales.split(",") if s]
    rows = []
    for scale in scales:
        for row in layers:
            rows.append(measure_layer(row, scale, backend, args))
            r = rows[-1]
            print(
                f"{r['model']:>22} {r['layer']:<14} L={r['L']:<7} fp32 {r['fp32_us']:9.1f}  tf32 {r['tf32_us']:8.1f}  "
                f"bf16 {r['bf16_us']:8.1f}  lbp {r['lbp_wht_us']:9.1f}  hot {r['hot_us']:8.1f}  "
                f"hot_bf16 {r['hot_bf16_us']:8.1f}  x fp32 {r['speedup_vs_fp32']:5.2f}  "
                f"x bf16 {r['speedup_vs_bf16']:5.2f}",
                flush=True,
            )
    payload = {
        "status": "measured",
        "environment": env,
        "method": "median of CUDA-event-timed CUDA-graph replays after warm-up; times in microseconds",
        "reps": args.reps,
        "warmup": args.warmup,
        "rows": rows,
    }
    _write(args.out, payload)
    print(f"wrote {args.out} and {args.out.with_suffix('.csv')}")
    return 0
