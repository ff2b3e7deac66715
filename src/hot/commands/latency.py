"""``hot latency``: per-layer backward latency (g_x + g_w) on a GPU, HOT against cuBLAS and LBP-WHT
(:mod:`hot.bench.latency`); the appendix latency figure's data. Writes JSON and CSV; without a GPU the JSON says
``{"status": "not measured: no GPU"}`` and the command exits 0."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..bench.latency import SCALES
from ..config import GEMMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument("--out", type=Path, default=Path("results/latency/latency.json"), help="JSON path (CSV beside)")
    parser.add_argument("--scales", default=",".join(map(str, SCALES)), help="batch multiples of the paper's L")
    parser.add_argument("--reps", type=int, default=100, help="timed replays per variant (median reported)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed replays first")
    parser.add_argument("--layers", default="", help="comma-separated model/layer names (default: all 16)")
    parser.add_argument("--gemm", default="auto", choices=GEMMS, help="HOTConfig.gemm: the real backend's GEMMs")
    parser.add_argument("--no-stages", action="store_true", help="skip the per-stage breakdown of HOT")


def run(args: argparse.Namespace) -> int:
    import torch

    from ..backends import create_backend
    from ..bench.latency import measure_layer
    from ..config import HOTConfig
    from ..paper import paper_values
    from ..results import environment, write_csv_atomic, write_json_atomic, write_status

    env = environment()
    if not torch.cuda.is_available():
        write_status(args.out, "not measured: no GPU", env)
        return 0
    backend = create_backend(HOTConfig(backend="real", gemm=args.gemm))  # RuntimeError: how to build the kernels
    env["hot_kernels_gemm"] = backend.gemm_for(torch.device("cuda"))
    wanted = {name for name in args.layers.split(",") if name}
    layers = [
        r for r in paper_values()["latency_figure"]["rows"] if not wanted or f"{r['model']}/{r['layer']}" in wanted
    ]
    scales = [int(s) for s in args.scales.split(",") if s]
    rows = []
    for scale in scales:
        for row in layers:
            rows.append(measure_layer(row, scale, backend, args.reps, args.warmup, not args.no_stages))
            r = rows[-1]
            print(
                f"{r['model']:>22} {r['layer']:<14} L={r['L']:<7} fp32 {r['fp32_us']:9.1f}  tf32 {r['tf32_us']:8.1f}  "
                f"bf16 {r['bf16_us']:8.1f}  lbp {r['lbp_wht_us']:9.1f}  hot {r['hot_us']:8.1f}  "
                f"hot_bf16 {r['hot_bf16_us']:8.1f}  x fp32 {r['speedup_vs_fp32']:5.2f}  "
                f"x bf16 {r['speedup_vs_bf16']:5.2f}  |  GPU time: fp32 {r['fp32_device_us']:8.1f}  "
                f"bf16 {r['bf16_device_us']:7.1f}  hot {r['hot_device_us']:7.1f}",
                flush=True,
            )
    payload = {
        "status": "measured",
        "environment": env,
        "method": (
            "median of CUDA-event-timed CUDA-graph replays after warm-up; times in microseconds: *_us with the "
            "graph's launch inside the interval, *_device_us with it hidden behind a busy-wait (the GPU's time)"
        ),
        "reps": args.reps,
        "warmup": args.warmup,
        "rows": rows,
    }
    write_csv_atomic(args.out.with_suffix(".csv"), rows)
    write_json_atomic(args.out, payload)
    print(f"wrote {args.out} and {args.out.with_suffix('.csv')}")
    return 0
