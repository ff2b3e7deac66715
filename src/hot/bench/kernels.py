"""Kernel timing of ``hot bench``: ViT-B/16's linear layers at training batch size, HOT's backward and its stages
against the two bf16 cuBLAS GEMMs, the quantisers' bandwidth, and the arithmetic limit of the hardware."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from ..backends import HLASpec, HQSpec
from ..backends.real import hla_codes_pitch
from ..config import HOTConfig
from ..hla import TokenGrid, hla_windows, projected_rows
from ..methods import HOTMethod, Keys, LayerState, layer_specs
from ..rounding import SPEC_HASH
from .report import BANDWIDTH_TARGET, layer_verdict
from .timing import bandwidth, gemm_rates, tensor_bytes, time_us

VIT_B_LAYERS = ("qkv", "proj", "fc1", "fc2")
VIT_B16_GRID = TokenGrid(prefix=1, height=14, width=14)  # ViT-B/16 at 224²: the class token + 14×14 patches
TOKENS = VIT_B16_GRID.tokens


def vit_b_rows() -> list[dict[str, Any]]:
    from ..paper import paper_values

    return [r for r in paper_values()["latency_figure"]["rows"] if r["model"] == "vit_base_patch16_224"]


def one_pass_bytes(length: int, out_f: int, rows: int, gy_bytes: int = 2) -> int:
    """The bytes of one pass over g_y that writes both code sets: g_y read once, its L·O FP8 codes (g_x) and
    rows·O INT8 codes (g_w) written."""
    return length * out_f * gy_bytes + length * out_f + rows * out_f


def arithmetic_limit(
    bf16_us: float,
    length: int,
    out_f: int,
    in_f: int,
    rows: int,
    fp8_flops: float,
    copy_bytes_per_s: float,
    gy_bytes: int = 2,
) -> dict[str, float]:
    """The best bf16 / HOT ratio the hardware allows: both GEMMs at the FP8 rate, the g_y transform at copy speed.

    t_fp8 = 2·L·O·I / R_fp8 (g_x), t_int8 = 2·rows·O·I / R_fp8 (g_w over the ≈ L/2 HLA rows; an INT8 wgmma runs
    at the FP8 rate), t_transform = (g_y read once + L·O FP8 codes + rows·O INT8 codes) / copy bandwidth.
    """
    t_fp8 = 2.0 * length * out_f * in_f / fp8_flops
    t_int8 = 2.0 * rows * out_f * in_f / fp8_flops
    transform_bytes = one_pass_bytes(length, out_f, rows, gy_bytes)
    t_transform = transform_bytes / copy_bytes_per_s
    floor_us = (t_fp8 + t_int8 + t_transform) * 1e6
    return {
        "t_fp8_us": t_fp8 * 1e6,
        "t_int8_halfK_us": t_int8 * 1e6,
        "t_transform_us": t_transform * 1e6,
        "transform_bytes": transform_bytes,
        "floor_us": floor_us,
        "limit": bf16_us / floor_us,
    }


def grad_output_budget(
    bf16_us: float,
    stages_us: dict[str, float],
    length: int,
    out_f: int,
    rows: int,
    copy_bytes_per_s: float,
    gy_bytes: int = 2,
) -> dict[str, float | None]:
    """What g_y's quantisers would have to reach for this layer's backward to tie bf16: the time left to them, and
    the fraction of copy bandwidth that time asks of the bytes they must move (None where nothing is left).

    Two budgets. ``budget_us`` is what bf16 leaves beside the two GEMMs as measured; it errs towards HOT, since
    W's codes are made in the g_x chain (its statistics pass, then one launch with g_y's HQ codes), which a captured
    backward runs beside the g_w chain. ``budget_with_weight_us`` also takes the weight quantiser's time, as if
    every stage ran one after another.

    Two counts of bytes, both with the codes written once: g_y read once (:func:`one_pass_bytes`), and read twice.
    The spec's scales for P g_y may not run along the contracted L axis (per tensor, or per output channel), so no
    HLA code can be written before all of g_y has been seen: g_y is read twice, or an intermediate at least as large
    (P g_y in float32) is written and read again, unless it stays in L2 between the passes. The one-read count is
    the bound that ignores this.
    """
    gemms_us = stages_us["hq_matmul"] + stages_us["hla_matmul"]
    weight_us = stages_us["hq_quantize_weight"]
    one_read = one_pass_bytes(length, out_f, rows, gy_bytes)
    two_reads = one_read + length * out_f * gy_bytes
    budgets = {"": bf16_us - gemms_us, "_with_weight": bf16_us - gemms_us - weight_us}
    out: dict[str, float | None] = {
        "gemms_us": gemms_us,
        "weight_quantizer_us": weight_us,
        "budget_us": budgets[""],
        "budget_with_weight_us": budgets["_with_weight"],
        "bytes_one_read": one_read,
        "bytes_two_reads": two_reads,
    }
    for suffix, budget in budgets.items():
        for reads, moved in (("one_read", one_read), ("two_reads", two_reads)):
            asked = moved / (budget * 1e-6) / copy_bytes_per_s if budget > 0 else None
            out[f"fraction_of_copy_{reads}{suffix}"] = asked
    return out


def moved_grad_output_bytes(backend: Any, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec, unique: int) -> tuple[int, str]:
    """Bytes the g_y quantisers move: the backend's own account where it has one (the real backend), else the two
    passes over g_y (statistics, then quantise)."""
    counter = getattr(backend, "grad_output_bytes", None)
    if counter is not None:
        return int(counter(g_y, hq, hla)), f"{type(backend).__name__}.grad_output_bytes"
    return unique + tensor_bytes(g_y), "assumed: g_y read twice"


def measure_layer(
    name: str,
    out_f: int,
    in_f: int,
    batch: int,
    method: HOTMethod,
    sections: Iterable[str],
    copy_gbps: float,
    reps: int,
    warmup: int,
    seed: int,
    device: str = "cuda",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``layers`` and ``kernels`` entries of one ViT-B layer (an empty dict for a section not asked for)."""
    sections = set(sections)
    length = batch * TOKENS
    gen = torch.Generator(device=device).manual_seed(seed + out_f * 7 + in_f)
    g_y = torch.randn(length, out_f, device=device, generator=gen, dtype=torch.bfloat16)
    x = torch.randn(length, in_f, device=device, generator=gen, dtype=torch.bfloat16)
    # HOT's backward quantises the fp32 parameter (what autograd hands it); bf16 reads autocast's bf16 copy.
    w = torch.randn(out_f, in_f, device=device, generator=gen) * 0.02
    w_bf16 = w.bfloat16()
    keys, state = Keys(seed, 0, 0), LayerState(index=0)
    config, backend = method.config, method.backend_for(g_y.device)
    windows = hla_windows(TOKENS, config.hla_blocking, VIT_B16_GRID)
    specs = layer_specs(config, out_f, windows, keys)
    hq, hla = specs.grad_output, specs.grad_output_hla
    rows = projected_rows(length, windows, config.hla_rank)
    saved = method.pack_input(x, windows, keys)  # the ABC codes: made in forward, read by backward
    modes: dict[str, str] = {}
    us: dict[str, float] = {}

    def timed(key: str, fn: Callable[[], object]) -> float:
        if key not in us:
            us[key], modes[key] = time_us(fn, reps, warmup)
        return us[key]

    grad_output = backend.quantize_grad_output(g_y, hq, hla)
    quantise_gy = timed("quantize_grad_output", lambda: backend.quantize_grad_output(g_y, hq, hla))
    pack_us = timed("hot_forward_abc", lambda: method.pack_input(x, windows, keys))
    layer: dict[str, Any] = {}
    if "layers" in sections:
        a_codes, a_scale, g_codes, g_scale, _ = grad_output
        b_codes, b_scale = backend.hq_quantize_weight(w, hq)
        timed("bf16", lambda: (g_y @ w_bf16, g_y.t() @ x))
        timed(
            "hot_backward",
            lambda: method.backward_gemms(g_y, w, saved, windows, state, keys, gx_dtype=torch.bfloat16),
        )
        timed("hq_quantize_weight", lambda: backend.hq_quantize_weight(w, hq))
        timed(
            "hq_matmul",
            lambda: backend.hq_matmul(a_codes, a_scale, b_codes, b_scale, hq, out_dtype=torch.bfloat16),
        )
        timed("hla_matmul", lambda: backend.hla_matmul(g_codes, g_scale, *saved, hla))
        gemms = gemm_rates(length, out_f, in_f, rows, reps, warmup)
        modes.update(gemms.pop("_modes"))
        fp8_flops = gemms.pop("_fp8_flops")
        stages = {k: us[k] for k in ("quantize_grad_output", "hq_quantize_weight", "hq_matmul", "hla_matmul")}
        layer = {
            "L": length,
            "O": out_f,
            "I": in_f,
            "tokens": TOKENS,
            "hla_rows": rows,
            "bf16_us": us["bf16"],
            "hot_backward_us": us["hot_backward"],
            "hot_forward_abc_us": pack_us,
            "stages_us": stages,
            "stages_sum_us": sum(stages.values()),
            **layer_verdict(name, us["bf16"], us["hot_backward"]),
            **gemms,
            "arithmetic_limit": arithmetic_limit(us["bf16"], length, out_f, in_f, rows, fp8_flops, copy_gbps * 1e9),
            "grad_output_budget": grad_output_budget(us["bf16"], stages, length, out_f, rows, copy_gbps * 1e9),
            "timing": modes,
        }
    kernel: dict[str, Any] = {}
    if "kernels" in sections:
        unique = tensor_bytes(g_y, *grad_output[:4])  # g_y, both code sets and their scales
        moved, source = moved_grad_output_bytes(backend, g_y, hq, hla, unique)
        pack_unique = tensor_bytes(x, *saved)
        kernel = {
            "grad_output_quantizer": {
                "us": quantise_gy,
                "unique": bandwidth(unique, quantise_gy, copy_gbps, BANDWIDTH_TARGET),
                "moved": bandwidth(moved, quantise_gy, copy_gbps, BANDWIDTH_TARGET),
                "moved_bytes_source": source,
            },
            "pack_input": {
                "us": pack_us,
                "unique": bandwidth(pack_unique, pack_us, copy_gbps, BANDWIDTH_TARGET),
                "moved": bandwidth(pack_unique + tensor_bytes(x), pack_us, copy_gbps, BANDWIDTH_TARGET),
                "moved_bytes_source": "assumed: x read twice (amax pass, quantise pass)",
            },
        }
    return layer, kernel


# --------------------------------------------------------------------------------------------- stage breakdown

WINDOWS = hla_windows(TOKENS, "spatial", VIT_B16_GRID)


def _timed(fns: dict, reps: int, warmup: int) -> tuple[dict[str, float | None], dict[str, str]]:
    """Median µs of each function; one that raises is recorded with its error and the rest still run."""
    times: dict[str, float | None] = {}
    errors: dict[str, str] = {}
    for key, fn in fns.items():
        try:
            times[key] = time_us(fn, reps, warmup)[0]
        except Exception as err:  # a failing kernel must not lose the other measurements
            times[key], errors[key] = None, f"{type(err).__name__}: {err}"[:500]
    return times, errors


def _rate(amount: float, us: float | None) -> float | None:
    return None if us is None else amount / us


def stage_breakdown(
    backend: Any, out_f: int, in_f: int, length: int, reps: int, warmup: int, rounding_hash: str = SPEC_HASH
) -> dict[str, Any]:
    """The pieces of the real backend's backward one by one at a ViT-B layer's shape (L = ``length``, bf16):
    the fused g_y quantiser against the two separate ones, each quantiser, the weight quantiser, the two GEMMs as
    the backend calls them, the raw cuBLAS GEMMs (bf16, FP8 ``_scaled_mm``, INT8 ``_int_mm``) and a copy of g_y;
    median µs, and GB/s or TOP/s where a byte or operation count makes sense."""
    gen = torch.Generator(device="cuda").manual_seed(out_f * 7 + in_f)
    g_y = torch.randn(length, out_f, device="cuda", generator=gen).bfloat16()
    x = torch.randn(length, in_f, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(out_f, in_f, device="cuda", generator=gen) * 0.02).bfloat16()
    specs = layer_specs(HOTConfig(rounding_hash=rounding_hash), out_f, WINDOWS, Keys(0, 0, 0))
    hq, hla, hla_x = specs.grad_output, specs.grad_output_hla, specs.input_hla
    hq_t = HQSpec(hq.block, hq.bits, "per_tensor", hq.key, hq.hash)
    # The GEMMs' operands come from the separate quantisers; the fused one is timed below.
    a_codes, a_scale = backend.hq_quantize_grad_output(g_y, hq)
    g_codes, g_scale = backend.hla_quantize(g_y, hla)
    b_codes, b_scale = backend.hq_quantize_weight(w, hq)
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
        "copy_g_y": lambda: torch.mul(g_y, 1),  # a kernel: a captured memcpy runs slower (timing.copy_bandwidth)
        "fused_quantize_grad_output": lambda: backend.quantize_grad_output(g_y, hq, hla),
        "fused_quantize_grad_output_hq_per_tensor": lambda: backend.quantize_grad_output(g_y, hq_t, hla),
        "hq_quantize_grad_output": lambda: backend.hq_quantize_grad_output(g_y, hq),
        "hla_quantize_grad_output": lambda: backend.hla_quantize(g_y, hla),
        "hla_quantize_input": lambda: backend.hla_quantize(x, hla_x),
        "hq_quantize_weight": lambda: backend.hq_quantize_weight(w, hq),
        "hq_matmul_bf16_out": lambda: backend.hq_matmul(a_codes, a_scale, b_codes, b_scale, hq, torch.bfloat16),
        "hq_matmul_fp32_out": lambda: backend.hq_matmul(a_codes, a_scale, b_codes, b_scale, hq),
        "hla_matmul": lambda: backend.hla_matmul(g_codes, g_scale, x_codes, x_scale, hla),
        "cublas_bf16_gx": lambda: g_y @ wb,
        "cublas_bf16_gw": lambda: g_y.t() @ x,
        "cublas_fp8_gx": lambda: torch._scaled_mm(
            a8, b8.t(), scale_a=row, scale_b=col, out_dtype=torch.bfloat16, use_fast_accum=False
        ),
        "cublas_int8_gw_half_k": lambda: torch._int_mm(gi, xi),
    }
    times, errors = _timed(fns, reps, warmup)
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


# --------------------------------------------------------------------------------------------- the sm_90a GEMM

# (M, N, K) of D = A · Bᵀ: g_w of ViT-B qkv, proj, fc1, fc2 (M = O, N = I, K = the HLA-projected tokens).
SM90_SHAPES = [(2304, 768, 12608), (768, 768, 12608), (3072, 768, 12608), (768, 3072, 12608)]


def latency_figure_gw_shapes(pad: int = 16) -> list[tuple[int, int, int]]:
    """(M, N, K) of the g_w GEMM of every layer of the latency figure at the paper's L (``hot latency``'s rows at
    scale 1): M = O, N = I, K = the HLA-projected rows (1×16 strips, rank 8) padded to a multiple of ``pad`` (the
    sm_90a GEMM's 16; 1: as the backward has them)."""
    from ..hla import hla_windows, projected_rows
    from ..paper import paper_values

    shapes = []
    for row in paper_values()["latency_figure"]["rows"]:
        tokens = int(row["L"])
        k = projected_rows(tokens, hla_windows(tokens, "paper"), 8)
        shapes.append((int(row["O"]), int(row["I"]), -(-k // pad) * pad))
    return sorted(set(shapes))


def gw_route_times(ops: Any, reps: int, warmup: int) -> list[dict[str, Any]]:
    """The g_w product as the backward runs it (``int_matmul``: K padded where the route needs it, the integer GEMM,
    the dequantisation) by each route, at the latency figure's shapes with K as the backward has it and the codes'
    rows at the HLA quantisers' pitch (:func:`hot.backends.real.hla_codes_pitch`): cuBLASLt (``int8_lt``, where K is
    a multiple of 8) against the sm_90a GEMM with the scales in its epilogue (``int8_sm90``). ``exact``: bit for bit
    the exact integer product dequantised by ``dequantize``."""
    results = []
    for m, n, k in latency_figure_gw_shapes(pad=1):
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        pitch = hla_codes_pitch(k)
        a = torch.randint(-127, 128, (m, pitch), device="cuda", dtype=torch.int8, generator=gen)[:, :k]
        b = torch.randint(-127, 128, (n, pitch), device="cuda", dtype=torch.int8, generator=gen)[:, :k]
        rows, col = torch.rand(m, device="cuda") + 0.5, torch.rand((), device="cuda") + 0.5
        routes = ["int8_sm90"] + (["int8_lt"] if k % 8 == 0 else [])
        # every partial sum is below 2^53: the float64 product is the exact one
        want = ops.dequantize((a.double() @ b.double().t()).int(), rows, col, 16.0)
        for route in routes:
            args = (a, b, rows, col, 16.0, route)
            us, mode = time_us(lambda args=args: ops.int_matmul(*args), reps, warmup, hide_launch=True)
            row = {"m": m, "n": n, "k": k, "kernel": f"route_{route}", "us": us, "tops": 2.0 * m * n * k / us / 1e6}
            results.append({**row, "mode": mode, "exact": torch.equal(ops.int_matmul(*args), want)})
    return results


# name -> (variant, decomposition, splits)
SM90_CONFIGS = {
    "coop128_heuristic": (0, 0, 1),
    "coop128_data_parallel": (0, 1, 1),
    "coop128_stream_k": (0, 2, 1),
    "coop128_split_k2": (0, 3, 2),
    "coop128_split_k3": (0, 3, 3),
    "pingpong64": (1, 0, 1),
}

# name -> variant, for the GEMM followed by `dequantize` against the dequantising epilogue
DEQUANT_VARIANTS = {name: SM90_CONFIGS[name][0] for name in ("coop128_heuristic", "pingpong64")}


def sm90_gemm_variants(ops: Any, reps: int, warmup: int) -> list[dict[str, Any]]:
    """The CUTLASS sm_90a INT8 GEMM (every variant and K decomposition) against cuBLASLt INT8 (``_int_mm``) and FP8
    (``_scaled_mm``) on HOT's g_w shapes, each result checked equal to ``_int_mm``'s; and g_w dequantised to float32
    as the backward needs it: each GEMM followed by ``dequantize``, against the sm_90a GEMM with the scales in its
    epilogue (checked bit for bit). Operands stay L2-resident between replays. ``ops``: the compiled ops
    (``hot.backends.real.load_ops()``), built with the sm_90a GEMM."""
    if not ops.cutlass_sm90_available():
        raise RuntimeError(
            "the extension holds no sm_90a GEMM for this device (a build for 9.0 with CUDA 12+, or HOT_KERNELS_SM90A=1)"
        )
    results = []
    for m, n, k in SM90_SHAPES + latency_figure_gw_shapes():
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
        for name, (variant, decomposition, splits) in SM90_CONFIGS.items():
            fns[name] = lambda a=a, b=b, v=variant, d=decomposition, s=splits: ops.cutlass_gemm_s8_sm90(a, b, v, d, s)
        # g_w as the backward needs it, float32 and dequantised: the GEMM then `dequantize`, or the scales in the
        # sm_90a GEMM's epilogue (checked bit for bit against the former)
        rows, cols = torch.rand(m, device="cuda") + 0.5, torch.rand(n, device="cuda") + 0.5
        ref_dequantized = ops.dequantize(ref, rows, cols, 16.0)
        fns["cublas_int_mm+dequantize"] = lambda a=a, b=b, r=rows, c=cols: ops.dequantize(
            torch._int_mm(a, b.t()), r, c, 16.0
        )
        for name, variant in DEQUANT_VARIANTS.items():
            fns[f"{name}+dequantize"] = lambda a=a, b=b, r=rows, c=cols, v=variant: ops.dequantize(
                ops.cutlass_gemm_s8_sm90(a, b, v), r, c, 16.0
            )
            fns[f"{name}_dequant_epilogue"] = lambda a=a, b=b, r=rows, c=cols, v=variant: (
                ops.cutlass_gemm_s8_sm90_dequant(a, b, r, c, 16.0, v)
            )
        count = 2.0 * m * n * k
        for name, fn in fns.items():
            want = ref_dequantized if "dequant" in name else ref
            exact = None if name.startswith("cublas") else bool(torch.equal(fn(), want))
            # GPU time (the launch hidden): at the latency figure's shapes the host's launch alone is about 17 µs
            us, mode = time_us(fn, reps, warmup, hide_launch=True)
            row = {"m": m, "n": n, "k": k, "kernel": name, "us": us, "tops": count / us / 1e6, "mode": mode}
            results.append({**row, "exact": exact})
    return results
