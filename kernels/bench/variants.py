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
from hot.bench.hopper import VIT_B16_GRID
from hot.bench.latency import environment, time_us
from hot.hla import hla_windows
from hot.lqs import write_json_atomic

LAYERS = {"qkv": (2304, 768), "proj": (768, 768), "fc1": (3072, 768), "fc2": (768, 3072)}
WINDOWS = hla_windows(VIT_B16_GRID.tokens, "spatial", VIT_B16_GRID)


def _timed(fns: dict, reps: int) -> tuple[dict[str, float | None], dict[str, str]]:
    """Median µs of each function; one that raises is recorded with its error and the rest still run."""
    times: dict[str, float | None] = {}
    errors: dict[str, str] = {}
    for key, fn in fns.items():
        try:
            times[key] = time_us(fn, reps, 10)[0]
        except Exception as err:  # a failing kernel must not lose the other measurements
            times[key], errors[key] = None, f"{type(err).__name__}: {err}"[:500]
    return times, errors


def _rate(amount: float, us: float | None) -> float | None:
    return None if us is None else amount / us


def layer_variants(backend: object, name: str, length: int, reps: int) -> dict[str, object]:
    out_f, in_f = LAYERS[name]
    gen = torch.Generator(device="cuda").manual_seed(out_f * 7 + in_f)
    g_y = torch.randn(length, out_f, device="cuda", generator=gen).bfloat16()
    x = torch.randn(length, in_f, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(out_f, in_f, device="cuda", generator=gen) * 0.02).bfloat16()
    hq = HQSpec(16, 4, "per_token", 11)
    hla = HLASpec(WINDOWS, 8, 8, "stochastic", "per_tensor", 12)
    hla_x = HLASpec(WINDOWS, 8, 8, "nearest", "per_tensor")
    hq_t = HQSpec(16, 4, "per_tensor", 11)
    # The GEMMs' operands come from the separate (proven) quantisers; the fused one is timed below.
    a_codes, a_scale = backend.hq_quantize_grad_output(g_y, 16, 4, "per_token", 11)
    g_codes, g_scale = backend.hla_quantize(g_y, hla)
    b_codes, b_scale = backend.hq_quantize_weight(w, 16, 4)
    x_codes, x_scale = backend.hla_quantize(x, hla_x)
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
        "hla_quantize_grad_output": lambda: backend.hla_quantize(g_y, hla),
        "hla_quantize_input": lambda: backend.hla_quantize(x, hla_x),
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
    times, errors = _timed(fns, reps)
    nbytes = g_y.numel() * 2
    moved = backend.grad_output_bytes(g_y, hq, hla)
    unique = moved - nbytes  # g_y once, codes and scales written
    fused = times["fused_quantize_grad_output"]
    rates = {
        "copy_g_y_GBps": _rate(2 * nbytes / 1e3, times["copy_g_y"]),
        "fused_GBps_moved": _rate(moved / 1e3, fused),
        "fused_GBps_unique": _rate(unique / 1e3, fused),
        "fp8_TFLOPs": _rate(2 * length * out_f * in_f / 1e6, times["cublas_fp8_gx"]),
        "int8_TOPs": _rate(2 * half * out_f * in_f / 1e6, times["cublas_int8_gw_half_k"]),
        "bf16_TFLOPs": _rate(2 * length * out_f * in_f / 1e6, times["cublas_bf16_gx"]),
    }
    return {**times, **rates, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("variants.json"))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    import hot_kernels

    backend = hot_kernels.KernelBackend(fused_grad_output=True)
    rows = {name: layer_variants(backend, name, args.batch * WINDOWS.tokens, args.reps) for name in LAYERS}
    write_json_atomic(args.out, {"environment": environment(), "L": args.batch * WINDOWS.tokens, "layers": rows})
    keys = [k for k in next(iter(rows.values())) if k != "errors"]
    print(f"{'µs / rate':<42}" + "".join(f"{n:>10}" for n in rows))
    for k in keys:
        print(f"{k:<42}" + "".join("      n/a " if rows[n][k] is None else f"{rows[n][k]:>10.1f}" for n in rows))
    for n, row in rows.items():
        for k, err in row["errors"].items():
            print(f"{n} {k}: {err}")


if __name__ == "__main__":
    main()
