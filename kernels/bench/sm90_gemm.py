"""Times the CUTLASS sm_90a INT8 GEMM (`_C.cutlass_gemm_s8_sm90`, every variant and K decomposition) against
cuBLASLt INT8 (`torch._int_mm`) and FP8 (`torch._scaled_mm`) on HOT's weight-gradient shapes, and checks that
each result equals `_int_mm`'s. Median µs of CUDA-graph replays (`hot.bench.latency.time_us`); operands stay
L2-resident between replays. Usage: python kernels/bench/sm90_gemm.py [--reps 50] [--out sm90.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from hot.bench.latency import time_us

# (M, N, K) of D = A · Bᵀ: g_w of ViT-B qkv, proj, fc1, fc2 (M = O, N = I, K = the HLA-projected tokens).
SHAPES = [(2304, 768, 12608), (768, 768, 12608), (3072, 768, 12608), (768, 3072, 12608)]
# name -> (variant, decomposition, splits)
CONFIGS = {
    "coop128_heuristic": (0, 0, 1),
    "coop128_data_parallel": (0, 1, 1),
    "coop128_stream_k": (0, 2, 1),
    "coop128_split_k2": (0, 3, 2),
    "coop128_split_k3": (0, 3, 3),
    "pingpong64": (1, 0, 1),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from hot_kernels import _C

    assert _C.cutlass_sm90_available(), "the extension holds no sm_90a GEMM for this device"
    results = []
    for m, n, k in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randint(-127, 128, (m, k), device="cuda", dtype=torch.int8, generator=gen)
        b = torch.randint(-127, 128, (n, k), device="cuda", dtype=torch.int8, generator=gen)
        a8, b8 = a.clamp(-8, 7).to(torch.float8_e4m3fn), b.clamp(-8, 7).to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        ref = torch._int_mm(a, b.t())
        fns = {
            "cublas_int_mm": lambda a=a, b=b: torch._int_mm(a, b.t()),
            "cublas_fp8_scaled_mm": lambda a8=a8, b8=b8, one=one: torch._scaled_mm(
                a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.float32
            ),
        }
        for name, (variant, decomposition, splits) in CONFIGS.items():
            fns[name] = lambda a=a, b=b, v=variant, d=decomposition, s=splits: _C.cutlass_gemm_s8_sm90(a, b, v, d, s)
        ops = 2.0 * m * n * k
        for name, fn in fns.items():
            exact = None
            if name not in ("cublas_int_mm", "cublas_fp8_scaled_mm"):
                exact = bool(torch.equal(fn(), ref))
            us, mode = time_us(fn, args.reps, args.warmup)
            row = {"m": m, "n": n, "k": k, "kernel": name, "us": round(us, 2), "tops": round(ops / us / 1e6, 1)}
            row |= {"mode": mode, "exact": exact}
            results.append(row)
            print(f"{m:5d} {n:5d} {k:6d} {name:24s} {us:9.2f} us {row['tops']:7.1f} TOP/s  exact={exact} ({mode})")
    if args.out:
        env = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda}
        args.out.write_text(json.dumps({"environment": env, "results": results}, indent=1))


if __name__ == "__main__":
    main()
