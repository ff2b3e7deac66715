"""Times the pieces of HOT's real-quant backward one by one on the GPU (for kernels/bench/NOTES.md).

For the ViT-B/16 layer shapes at L = 128·197 with bf16 tensors: the fused g_y quantiser against the two
separate ones, each quantiser alone, the weight quantiser, the two GEMMs as the backend calls them, the raw
cuBLAS GEMMs (bf16, fp8 ``_scaled_mm``, int8 ``_int_mm``) and a device copy of g_y. Median µs of CUDA-graph
replays (``hot.bench.latency.time_us``); achieved GB/s where a byte count makes sense.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from hot.backends import HLASpec, HQSpec
from hot.bench.latency import environment, time_us
from hot.lqs import write_json_atomic

LAYERS = {"qkv": (2304, 768), "proj": (768, 768), "fc1": (3072, 768), "fc2": (768, 3072)}
TOKENS = 197


def layer_variants(backend: object, name: str, length: int, reps: int) -> dict[str, float]:
    out_f, in_f = LAYERS[name]
    gen = torch.Generator(device="cuda").manual_seed(out_f * 7 + in_f)
    g_y = torch.randn(length, out_f, device="cuda", generator=gen).bfloat16()
    x = torch.randn(length, in_f, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(out_f, in_f, device="cuda", generator=gen) * 0.02).bfloat16()
    hq = HQSpec(16, 4, "per_token", 11)
    hla = HLASpec(TOKENS, 8, "paper", 8, "stochastic", "per_tensor", 12)
    hq_t = HQSpec(16, 4, "per_tensor", 11)
    a_codes, a_scale, g_codes, g_scale = backend.quantize_grad_output(g_y, hq, hla)
    b_codes, b_scale = backend.hq_quantize_weight(w, 16, 4)
    x_codes, x_scale = backend.hla_quantize(x, TOKENS, 8, "paper", 8, "nearest", "per_tensor", None)
    half = g_codes.shape[0]
    e4 = torch.float8_e4m3fn
    a8 = torch.randint(-8, 8, (length, out_f), device="cuda").to(e4)
    b8 = torch.randint(-8, 8, (in_f, out_f), device="cuda").to(e4)
    row, col = torch.rand(length, 1, device="cuda"), torch.rand(1, in_f, device="cuda")
    gi = torch.randint(-127, 128, (out_f, half), device="cuda", dtype=torch.int8)
    xi = torch.randint(-127, 128, (half, in_f), device="cuda", dtype=torch.int8)
    wb = w.clone()
    fns = {
        "copy_g_y": lambda: g_y.clone(),
        "fused_quantize_grad_output": lambda: backend.quantize_grad_output(g_y, hq, hla),
        "fused_quantize_grad_output_hq_per_tensor": lambda: backend.quantize_grad_output(g_y, hq_t, hla),
        "hq_quantize_grad_output": lambda: backend.hq_quantize_grad_output(g_y, 16, 4, "per_token", 11),
        "hla_quantize_grad_output": lambda: backend.hla_quantize(
            g_y, TOKENS, 8, "paper", 8, "stochastic", "per_tensor", 12
        ),
        "hla_quantize_input": lambda: backend.hla_quantize(x, TOKENS, 8, "paper", 8, "nearest", "per_tensor", None),
        "hq_quantize_weight": lambda: backend.hq_quantize_weight(w, 16, 4),
        "hq_matmul_bf16_out": lambda: backend.hq_matmul(a_codes, a_scale, b_codes, b_scale, 16, torch.bfloat16),
        "hq_matmul_fp32_out": lambda: backend.hq_matmul(a_codes, a_scale, b_codes, b_scale, 16),
        "hla_matmul": lambda: backend.hla_matmul(g_codes, g_scale, x_codes, x_scale, 16),
        "cublas_bf16_gx": lambda: g_y @ wb,
        "cublas_bf16_gw": lambda: g_y.t() @ x,
        "cublas_fp8_gx": lambda: torch._scaled_mm(
            a8, b8.t(), scale_a=row, scale_b=col, out_dtype=torch.bfloat16, use_fast_accum=False
        ),
        "cublas_int8_gw_half_k": lambda: torch._int_mm(gi, xi),
    }
    times = {k: time_us(fn, reps, 10)[0] for k, fn in fns.items()}
    nbytes = g_y.numel() * 2
    times["copy_g_y_GBps"] = 2 * nbytes / times["copy_g_y"] / 1e3
    moved = backend.grad_output_bytes(g_y, hq, hla)
    times["fused_GBps_moved"] = moved / times["fused_quantize_grad_output"] / 1e3
    unique = moved - nbytes  # g_y once, codes and scales written
    times["fused_GBps_unique"] = unique / times["fused_quantize_grad_output"] / 1e3
    times["fp8_TFLOPs"] = 2 * length * out_f * in_f / times["cublas_fp8_gx"] / 1e6
    times["int8_TOPs"] = 2 * half * out_f * in_f / times["cublas_int8_gw_half_k"] / 1e6
    times["bf16_TFLOPs"] = 2 * length * out_f * in_f / times["cublas_bf16_gx"] / 1e6
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("variants.json"))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    import hot_kernels

    backend = hot_kernels.KernelBackend(fused_grad_output=True)
    rows = {name: layer_variants(backend, name, args.batch * TOKENS, args.reps) for name in LAYERS}
    write_json_atomic(args.out, {"environment": environment(), "L": args.batch * TOKENS, "layers": rows})
    keys = list(next(iter(rows.values())))
    print(f"{'µs / ratio':<42}" + "".join(f"{n:>10}" for n in rows))
    for k in keys:
        print(f"{k:<42}" + "".join(f"{rows[n][k]:>10.1f}" for n in rows))


if __name__ == "__main__":
    main()
