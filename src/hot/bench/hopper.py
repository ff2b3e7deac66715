"""``hot bench``: HOT against bf16 cuBLAS and torchao float8 on one Hopper GPU, every comparison in one process.

Sections (``--sections``, default all), each a key of the one JSON written (atomically, after every section so a
run cut short keeps what it measured):

- ``copy_bandwidth`` (with ``layers`` or ``kernels``): a device-to-device copy of a large random bf16 buffer,
  GB/s of bytes read + written. The ceiling of any memory-bound quantiser.
- ``layers``: ViT-B/16's qkv, proj, fc1, fc2 at L = batch · 197, bf16 g_y, x, W. ``bf16``: the two cuBLAS
  backward GEMMs; ``hot_backward``: ``HOTMethod.backward_gemms`` of the real backend from the ABC codes made
  once beforehand (backward never reads x); ``hot_forward_abc``: ``pack_input`` alone (the forward's extra
  cost); the stages (fused g_y quantiser, weight quantiser, FP8 g_x GEMM, INT8 g_w GEMM). Also the measured
  FP8 (``torch._scaled_mm``) and INT8 (``torch._int_mm``) GEMM rates and an arithmetic limit: what bf16 / HOT
  could reach if HOT's GEMMs ran at the measured FP8 rate and its g_y transform at copy bandwidth.
- ``kernels``: the fused g_y quantiser's and ``pack_input``'s achieved bandwidth, as a fraction of the copy.
- ``step``: end-to-end ViT-B/16 training steps (AdamW, bf16 autocast): bf16 eager and compiled, torchao float8
  (tensorwise, compiled), HOT (real, ABC, LQS) eager and compiled; median step time and peak memory.
- ``equivalence``: a tiny ViT trained in fp32 with the fake and the real backend from the same weights on the
  same batches; their losses must agree to 1e-3 relative.

Kernel timings are medians of CUDA-event-timed CUDA-graph replays (:func:`hot.bench.latency.time_us`). Without a
GPU the command writes ``{"status": "not measured: no GPU", "environment": …}`` and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import importlib.metadata
import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hot.backends import HLASpec, HQSpec
from hot.bench.latency import environment, time_us
from hot.config import HOTConfig
from hot.hadamard import largest_block
from hot.hla import HLAWindows, TokenGrid, hla_windows, projected_rows
from hot.lqs import write_json_atomic
from hot.methods import HOTMethod, Keys, LayerState, create_method
from hot.rounding import Stream

SECTIONS = ("layers", "kernels", "step", "equivalence")
STEP_VARIANTS = ("bf16", "bf16_compile", "torchao_float8", "hot", "hot_compile")
STEP_BASELINE = "bf16_compile"
VIT_B_LAYERS = ("qkv", "proj", "fc1", "fc2")
LAYER_TARGETS = {"qkv": 1.6, "proj": 1.2, "fc1": 1.6, "fc2": 1.6}  # bf16_us / hot_backward_us
BANDWIDTH_TARGET = 0.8  # fraction of copy bandwidth for the memory-bound quantisers
STEP_SPEEDUP_TARGET = 1.15  # bf16_compile step time / HOT step time
STEP_MEMORY_TARGET = 0.7  # HOT peak memory / bf16_compile peak memory
EQUIVALENCE_TOLERANCE = 1e-3  # max |loss_fake - loss_real| / |loss_fake| over the steps
VIT_B16_GRID = TokenGrid(prefix=1, height=14, width=14)  # ViT-B/16 at 224²: the class token + 14×14 patches
TOKENS = VIT_B16_GRID.tokens
NOT_ZERO = (
    "the codes are the same (same seed, layer and step give the same hash keys), but the fake backend's float32 "
    "GEMMs and the real backend's FP8/INT8 GEMMs with fused dequantisation sum and scale in another order, so "
    "g_x and g_w differ by float32 rounding, which grows slowly over the training steps"
)


# --------------------------------------------------------------------------------------------- arguments


def _choices(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"no {what} given; known {what}s: {', '.join(known)}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {what}{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"known {what}s: {', '.join(known)}"
        )
    return [n for n in known if n in names]  # the canonical order, duplicates dropped


def parse_sections(text: str) -> list[str]:
    """``layers,step`` -> ["layers", "step"]; an unknown name is an error that names it."""
    return _choices(text, SECTIONS, "section")


def parse_variants(text: str) -> list[str]:
    return _choices(text, STEP_VARIANTS, "step variant")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sections", type=parse_sections, default=list(SECTIONS), help=f"comma-separated, of {','.join(SECTIONS)}"
    )
    parser.add_argument("--out", type=Path, default=Path("results/bench/hopper.json"), help="the JSON written")
    parser.add_argument("--batch", type=int, default=128, help="images per batch (layers: L = batch · 197)")
    parser.add_argument("--reps", type=int, default=50, help="timed CUDA-graph replays per kernel (median)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed replays first")
    parser.add_argument("--copy-gib", type=float, default=1.0, help="buffer of the copy-bandwidth measurement")
    parser.add_argument(
        "--step-variants",
        type=parse_variants,
        default=list(STEP_VARIANTS),
        help=f"comma-separated, of {','.join(STEP_VARIANTS)}",
    )
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per variant (median)")
    parser.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first (compilation happens here)")
    parser.add_argument("--equiv-steps", type=int, default=30, help="SGD steps of the equivalence check")
    parser.add_argument("--equiv-batch", type=int, default=64, help="images per batch of the equivalence check")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random tensors, models and data")
    parser.add_argument(
        "--fused-grad-output",
        action="store_true",
        help="let the real backend run the fused two-pass g_y quantiser (off by default until GPU-verified)",
    )
    parser.add_argument(
        "--gemm",
        default="auto",
        help="the real backend's GEMM family (hot_kernels.GEMMS): auto, cutlass, cutlass-int4, cublas, "
        "cutlass-sm90 (needs a HOT_KERNELS_SM90A=1 build), reference",
    )


# --------------------------------------------------------------------------------------------- pure functions


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
    transform_bytes = length * out_f * gy_bytes + length * out_f + rows * out_f
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


def tensor_bytes(*tensors: torch.Tensor) -> int:
    """Bytes held by the tensors' elements (a transposed view counts its elements once)."""
    return sum(t.numel() * t.element_size() for t in tensors)


def bandwidth(nbytes: int, us: float, copy_gbps: float, target: float = BANDWIDTH_TARGET) -> dict[str, Any]:
    """GB/s of ``nbytes`` moved in ``us`` microseconds, and its fraction of the copy bandwidth against ``target``."""
    gbps = nbytes / us / 1e3
    fraction = gbps / copy_gbps
    return {"bytes": nbytes, "gbps": gbps, "fraction_of_copy": fraction, "target": target, "met": fraction >= target}


def meets(value: float | None, target: float, higher_is_better: bool = True) -> bool | None:
    """Whether ``value`` reaches ``target`` (None where nothing was measured)."""
    if value is None:
        return None
    return value >= target if higher_is_better else value <= target


def layer_verdict(name: str, bf16_us: float, hot_us: float) -> dict[str, Any]:
    speedup = bf16_us / hot_us
    target = LAYER_TARGETS[name]
    return {"speedup_vs_bf16": speedup, "target": target, "target_met": meets(speedup, target)}


def step_summary(variants: dict[str, dict[str, Any]], baseline: str = STEP_BASELINE) -> dict[str, Any]:
    """Speedup and memory ratio of every measured variant against ``baseline``, and HOT's targets."""
    base = variants.get(baseline, {})
    ratios: dict[str, dict[str, float | None]] = {}
    for name, v in variants.items():
        if "step_ms" not in v or "step_ms" not in base:
            continue
        mem, base_mem = v.get("peak_memory_gib"), base.get("peak_memory_gib")
        ratios[name] = {
            "speedup": base["step_ms"] / v["step_ms"],
            "memory_ratio": mem / base_mem if mem is not None and base_mem else None,
        }
    torchao_ms = variants.get("torchao_float8", {}).get("step_ms")
    targets: dict[str, dict[str, Any]] = {}
    for name in ("hot", "hot_compile"):
        if name not in ratios:
            continue
        ms = variants[name]["step_ms"]
        targets[name] = {
            f"speedup_ge_{STEP_SPEEDUP_TARGET}": meets(ratios[name]["speedup"], STEP_SPEEDUP_TARGET),
            "faster_than_torchao_float8": None if torchao_ms is None else ms < torchao_ms,
            f"memory_ratio_le_{STEP_MEMORY_TARGET}": meets(ratios[name]["memory_ratio"], STEP_MEMORY_TARGET, False),
        }
    return {"baseline": baseline, "ratios": ratios, "targets": targets}


def max_relative_difference(reference: Sequence[float], other: Sequence[float]) -> float:
    """max over steps of |a - b| / |a|."""
    if len(reference) != len(other) or not reference:
        raise ValueError(f"need two equally long, non-empty loss lists, got {len(reference)} and {len(other)}")
    return max(abs(a - b) / abs(a) if a else abs(b) for a, b in zip(reference, other, strict=True))


# --------------------------------------------------------------------------------------------- device-agnostic training


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, amp: bool) -> Any:
    """One step: forward (bf16 autocast when ``amp``), cross entropy, backward, optimiser step. Returns the loss."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
        loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def time_training(
    net: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    steps: int,
    warmup: int,
    compile: bool = False,
    calibrate_lqs: bool = False,
    amp: bool = True,
    lr: float = 1e-4,
) -> dict[str, Any]:
    """Median step time (ms) and peak memory of training ``net`` (already on the images' device) with AdamW.

    With ``calibrate_lqs`` the first step runs eagerly inside :func:`hot.lqs.calibrate`, as the training loop
    does on its first batch; compilation (``compile``) comes after it, so the compiled graph sees the decisions.
    CUDA steps are timed with CUDA events (peak memory: ``max_memory_allocated`` over the timed steps), CPU
    steps with ``perf_counter`` (no peak memory).
    """
    from hot import lqs

    device = images.device
    cuda = device.type == "cuda"
    optimizer = torch.optim.AdamW(net.parameters(), lr=lr)
    result: dict[str, Any] = {}
    if calibrate_lqs:
        with lqs.calibrate(net):
            train_step(net, optimizer, images, labels, amp)
        choices = list(lqs.decisions(net).values())
        result["lqs"] = {str(c).lower(): choices.count(c) for c in ("per_token", "per_tensor", None)}
    model: nn.Module = torch.compile(net) if compile else net
    started = time.perf_counter()
    for _ in range(warmup):
        train_step(model, optimizer, images, labels, amp)
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    result["warmup_s"] = time.perf_counter() - started
    times: list[float] = []
    events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    loss: Any = None
    for _ in range(steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = train_step(model, optimizer, images, labels, amp)
            end.record()
            events.append((start, end))
        else:
            t0 = time.perf_counter()
            loss = train_step(model, optimizer, images, labels, amp)
            times.append((time.perf_counter() - t0) * 1e3)
    if cuda:
        torch.cuda.synchronize(device)
        times = [s.elapsed_time(e) for s, e in events]
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    else:
        result["peak_memory_gib"] = None
    result.update(
        step_ms=statistics.median(times),
        step_ms_all=times,
        images_per_s=len(images) / (statistics.median(times) / 1e3),
        final_loss=float(loss.item()) if loss is not None else None,
    )
    return result


def equivalence(
    device: torch.device | str,
    steps: int,
    batch: int,
    *,
    backends: tuple[str, str] = ("fake", "real"),
    seed: int = 0,
    lr: float = 0.05,
    model_name: str = "vit_tiny_fmnist",
) -> dict[str, Any]:
    """Train one tiny ViT twice, with ``backends[0]`` and ``backends[1]`` (HOT + ABC), from the same weights on the
    same batches in float32, and compare the losses step by step and the held-out accuracy.

    The labels come from a fixed random linear teacher of the pixels, so the held-out accuracy moves above
    chance and compares two learnt models, not noise.
    """
    from hot.convert import convert
    from hot.train.models import create_model

    device = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    shape = (1, 28, 28)  # vit_tiny_fmnist: grey 28², patch 4, 50 tokens
    teacher = torch.randn(math.prod(shape), 10, generator=gen)

    def data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, *shape, generator=gen)
        return x.to(device), (x.flatten(1) @ teacher).argmax(1).to(device)

    batches = [data(batch) for _ in range(4)]  # cycled: a fixed, learnable stream
    held_x, held_y = data(256)
    torch.manual_seed(seed)
    initial = create_model(model_name, 10, 1).state_dict()
    runs = []
    for backend in backends:
        net = create_model(model_name, 10, 1)
        net.load_state_dict(initial)
        convert(net, HOTConfig(backend=backend, abc=True, seed=seed))
        net.to(device).train()
        optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
        losses = []
        for step in range(steps):
            x, y = batches[step % len(batches)]
            losses.append(float(train_step(net, optimizer, x, y, amp=False).item()))
        net.eval()
        with torch.no_grad():
            accuracy = (net(held_x).argmax(1) == held_y).float().mean().item()
        runs.append({"backend": backend, "losses": losses, "held_out_accuracy": accuracy})
        del net, optimizer
    worst = max_relative_difference(runs[0]["losses"], runs[1]["losses"])
    return {
        "model": model_name,
        "device": str(device),
        "steps": steps,
        "batch": batch,
        "optimizer": f"SGD(lr={lr}, momentum=0.9), float32, no autocast",
        "hot_config": "HOTConfig(abc=True)",
        "runs": runs,
        "max_rel_loss_diff": worst,
        "accuracy_diff": runs[1]["held_out_accuracy"] - runs[0]["held_out_accuracy"],
        "tolerance": EQUIVALENCE_TOLERANCE,
        "passed": worst < EQUIVALENCE_TOLERANCE,
        "why_not_zero": NOT_ZERO,
    }


def code_mismatches(
    device: torch.device | str,
    length: int,
    out_f: int,
    in_f: int,
    tokens: int,
    seed: int = 0,
    backends: tuple[str, str] = ("fake", "real"),
    grid: TokenGrid | None = None,
) -> dict[str, int]:
    """Codes of two backends on the same random g_y and x: elements that differ, per quantiser."""
    from hot.backends import get_backend

    gen = torch.Generator().manual_seed(seed)
    g_y = torch.randn(length, out_f, generator=gen).to(device)
    x = torch.randn(length, in_f, generator=gen).to(device)
    config = HOTConfig(abc=True, seed=seed)
    keys = Keys(seed, 0, 0)
    windows = hla_windows(tokens, config.hla_blocking, grid)
    hq, hla = _specs(config, out_f, windows, keys)
    codes = []
    for name in backends:
        a, _, g, _ = get_backend(name).quantize_grad_output(g_y, hq, hla)
        p, _ = create_method(config.replace(backend=name)).pack_input(x, windows, keys)
        codes.append([t.float().to(torch.int8).contiguous() for t in (a, g, p)])  # e4m3 codes hold integers
    names = ("hq_grad_output", "hla_grad_output", "hla_input")
    found = {n: int((f != r).sum().item()) for n, f, r in zip(names, *codes, strict=True)}
    found["elements"] = sum(t.numel() for t in codes[0])
    return found


# --------------------------------------------------------------------------------------------- GPU measurements


def _specs(config: HOTConfig, out_f: int, windows: HLAWindows, keys: Keys) -> tuple[HQSpec, HLASpec]:
    # The specs HOTMethod.backward_gemms builds for a layer without LQS (its g_x scale is config.gx_granularity).
    hq = HQSpec(
        largest_block(out_f, config.hq_block), config.gx_bits, config.gx_granularity, keys(Stream.GX_GRAD_OUTPUT)
    )
    gw = "per_channel" if config.gw_granularity == "per_channel" else "per_tensor"
    hla = HLASpec(windows, config.hla_rank, config.gw_bits, config.gy_rounding, gw, keys(Stream.GW_GRAD_OUTPUT))
    return hq, hla


def copy_bandwidth(gib: float, reps: int, warmup: int) -> dict[str, Any]:
    """Device-to-device copy of a random bf16 buffer: GB/s of bytes read + written."""
    src = torch.randn(int(gib * 2**30) // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    us, mode = time_us(lambda: dst.copy_(src), reps, warmup)
    moved = 2 * tensor_bytes(src)
    return {"buffer_bytes": moved // 2, "bytes_moved": moved, "us": us, "gbps": moved / us / 1e3, "timing": mode}


def _gemm_rates(length: int, out_f: int, in_f: int, rows: int, reps: int, warmup: int) -> dict[str, Any]:
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


def _moved_grad_output_bytes(backend: Any, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec, unique: int) -> tuple[int, str]:
    # The kernels' own account of their traffic where the extension offers one (a backend method, or a
    # module-level hot_kernels.grad_output_bytes); else the two passes over g_y (statistics, then quantise).
    counter = getattr(backend, "grad_output_bytes", None)
    source = f"{type(backend).__name__}.grad_output_bytes"
    if counter is None:
        try:
            counter = getattr(importlib.import_module("hot_kernels"), "grad_output_bytes", None)
        except ImportError:
            counter = None
        source = "hot_kernels.grad_output_bytes"
    if counter is not None:
        return int(counter(g_y, hq, hla)), source
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
    config, backend = method.config, method.backend
    windows = hla_windows(TOKENS, config.hla_blocking, VIT_B16_GRID)
    hq, hla = _specs(config, out_f, windows, keys)
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
        a_codes, a_scale, g_codes, g_scale = grad_output
        b_codes, b_scale = backend.hq_quantize_weight(w, hq.block, config.gx_bits)
        block_l = windows.block
        timed("bf16", lambda: (g_y @ w_bf16, g_y.t() @ x))
        timed(
            "hot_backward",
            lambda: method.backward_gemms(g_y, w, saved, windows, state, keys, gx_dtype=torch.bfloat16),
        )
        timed("hq_quantize_weight", lambda: backend.hq_quantize_weight(w, hq.block, config.gx_bits))
        timed(
            "hq_matmul",
            lambda: backend.hq_matmul(a_codes, a_scale, b_codes, b_scale, hq.block, out_dtype=torch.bfloat16),
        )
        timed("hla_matmul", lambda: backend.hla_matmul(g_codes, g_scale, *saved, block_l))
        gemms = _gemm_rates(length, out_f, in_f, rows, reps, warmup)
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
            "timing": modes,
        }
    kernel: dict[str, Any] = {}
    if "kernels" in sections:
        unique = tensor_bytes(g_y, *grad_output)
        moved, source = _moved_grad_output_bytes(backend, g_y, hq, hla, unique)
        pack_unique = tensor_bytes(x, *saved)
        kernel = {
            "grad_output_quantizer": {
                "us": quantise_gy,
                "unique": bandwidth(unique, quantise_gy, copy_gbps),
                "moved": bandwidth(moved, quantise_gy, copy_gbps),
                "moved_bytes_source": source,
            },
            "pack_input": {
                "us": pack_us,
                "unique": bandwidth(pack_unique, pack_us, copy_gbps),
                "moved": bandwidth(pack_unique + tensor_bytes(x), pack_us, copy_gbps),
                "moved_bytes_source": "assumed: x read twice (amax pass, quantise pass)",
            },
        }
    return layer, kernel


def _free() -> None:
    gc.collect()
    with contextlib.suppress(Exception):  # compiled graphs and their guards hold on to the models
        torch._dynamo.reset()
    gc.collect()
    if torch.cuda.is_available():
        with contextlib.suppress(RuntimeError):  # a sticky CUDA error is reported by the next measurement
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def _torchao_filter(module: nn.Module, fqn: str) -> bool:
    # The classifier (100 classes) stays bf16; torchao's float8 GEMMs need both dims multiples of 16.
    if fqn == "head" or fqn.startswith("head."):
        return False
    return not isinstance(module, nn.Linear) or (module.in_features % 16 == 0 and module.out_features % 16 == 0)


def step_variant(variant: str, batch: int, steps: int, warmup: int, seed: int) -> dict[str, Any]:
    """One end-to-end ViT-B/16 variant from a fresh model (same seed), timed on the GPU."""
    import timm

    with contextlib.suppress(Exception):
        torch._dynamo.utils.counters.clear()
    torch.manual_seed(seed)
    net = timm.create_model("vit_base_patch16_224", num_classes=100)
    compile_, lqs_ = variant.endswith("_compile") or variant == "torchao_float8", False
    if variant == "torchao_float8":
        try:
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        except ImportError as err:
            return {"skipped": f"torchao is not importable: {err}"}
        recipe = getattr(Float8LinearConfig, "from_recipe_name", None)
        config = recipe("tensorwise") if recipe is not None else Float8LinearConfig()
        convert_to_float8_training(net, module_filter_fn=_torchao_filter, config=config)
    elif variant.startswith("hot"):
        from hot.convert import convert

        convert(net, HOTConfig(backend="real", abc=True, lqs=True, seed=seed))
        lqs_ = True
    net = net.cuda().train()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    images = torch.randn(batch, 3, 224, 224, device="cuda", generator=gen)
    labels = torch.randint(0, 100, (batch,), device="cuda", generator=gen)
    result = time_training(net, images, labels, steps=steps, warmup=warmup, compile=compile_, calibrate_lqs=lqs_)
    result["compiled"] = compile_
    if compile_:
        with contextlib.suppress(Exception):  # graphs and graph breaks say whether torch.compile kept one graph
            counters = torch._dynamo.utils.counters
            result["dynamo"] = {
                **{k: int(v) for k, v in counters["stats"].items()},
                "graph_breaks": int(sum(counters["graph_break"].values())),
                "graph_break_reasons": [str(k)[:300] for k in list(counters["graph_break"])[:10]],
            }
    return result


# --------------------------------------------------------------------------------------------- the command


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for dist in ("timm", "torchao", "hot-kernels"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = None
    return found


def bench_environment() -> dict[str, Any]:
    env = {**environment(), **_versions()}
    if torch.cuda.is_available():
        env["device_name"] = torch.cuda.get_device_name(torch.cuda.current_device())
        env["allow_tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    return env


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:2000]


def _layers_and_kernels(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    payload["copy_bandwidth"] = copy_bandwidth(args.copy_gib, args.reps, args.warmup)
    copy_gbps = payload["copy_bandwidth"]["gbps"]
    print(f"copy bandwidth {copy_gbps:.0f} GB/s", flush=True)
    method = create_method(HOTConfig(backend="real", abc=True, seed=args.seed))
    if not isinstance(method, HOTMethod):
        raise TypeError(f"expected the HOT method, got {type(method).__name__}")
    gemm_for = getattr(method.backend, "gemm_for", None)
    payload["environment"]["hot_kernels_gemm"] = gemm_for(torch.device("cuda")) if gemm_for else None
    rows = {r["layer"]: r for r in _vit_b_rows()}
    for name in VIT_B_LAYERS:
        try:
            layer, kernel = measure_layer(
                name,
                int(rows[name]["O"]),
                int(rows[name]["I"]),
                args.batch,
                method,
                args.sections,
                copy_gbps,
                args.reps,
                args.warmup,
                args.seed,
            )
        except Exception as err:  # one layer failing (a kernel's shape limit, OOM) must not lose the others
            layer = kernel = {"error": _error(err)}
        if "layers" in args.sections:
            payload.setdefault("layers", {})[name] = layer
            if "error" in layer:
                print(f"layer {name}: {layer['error'][:300]}", flush=True)
            else:
                print(
                    f"layer {name}: bf16 {layer['bf16_us']:.1f} us, hot {layer['hot_backward_us']:.1f} us "
                    f"(x{layer['speedup_vs_bf16']:.2f}, limit x{layer['arithmetic_limit']['limit']:.2f})",
                    flush=True,
                )
        if "kernels" in args.sections:
            payload.setdefault("kernels", {"target_fraction_of_copy": BANDWIDTH_TARGET})[name] = kernel
        _free()
        save()


def _steps(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    step: dict[str, Any] = {
        "model": "vit_base_patch16_224",
        "num_classes": 100,
        "batch": args.batch,
        "image_size": 224,
        "optimizer": "AdamW(lr=1e-4)",
        "autocast": "bfloat16",
        "warmup_steps": args.warmup_steps,
        "steps": args.steps,
        "variants": {},
    }
    payload["step"] = step
    for variant in args.step_variants:
        try:
            step["variants"][variant] = step_variant(variant, args.batch, args.steps, args.warmup_steps, args.seed)
        except Exception as err:  # one variant failing (compile, OOM) must not lose the others
            step["variants"][variant] = {"error": _error(err)}
        _free()
        v = step["variants"][variant]
        print(f"step {variant}: " + (f"{v['step_ms']:.1f} ms" if "step_ms" in v else str(v)[:300]), flush=True)
        step.update(step_summary(step["variants"]))
        save()


def _equivalence(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    try:
        result = equivalence("cuda", args.equiv_steps, args.equiv_batch, seed=args.seed)
        # Tells a code difference from an accumulation-order one: the fake backend on CUDA may round a code
        # differently (division by a scalar through its reciprocal). Shapes: vit_tiny_fmnist's fc1.
        result["code_mismatches"] = code_mismatches(
            "cuda", args.equiv_batch * 50, 128, 64, 50, args.seed, grid=TokenGrid(prefix=1, height=7, width=7)
        )
    except Exception as err:
        result = {"error": _error(err), "passed": False}
    payload["equivalence"] = result
    print(f"equivalence: {'passed' if result['passed'] else 'FAILED'}", flush=True)
    _free()
    save()


def _run_sections(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    if {"layers", "kernels"} & set(args.sections):
        try:
            _layers_and_kernels(args, payload, save)
        except Exception as err:  # the copy, or the real backend not loading: record it, go on to the rest
            for section in {"layers", "kernels"} & set(args.sections):
                payload.setdefault(section, {})["error"] = _error(err)
            print(f"layers/kernels: {_error(err)[:300]}", flush=True)
            _free()
            save()
    if "step" in args.sections:
        _steps(args, payload, save)
    if "equivalence" in args.sections:
        _equivalence(args, payload, save)


def _vit_b_rows() -> list[dict[str, Any]]:
    from hot.paper import paper_values

    return [r for r in paper_values()["latency_figure"]["rows"] if r["model"] == "vit_base_patch16_224"]


def summary_lines(payload: dict[str, Any]) -> list[str]:
    """A short human table of the JSON's results."""

    def f(value: Any, fmt: str = ".2f") -> str:
        if value is None or isinstance(value, bool):
            return {None: "-", True: "yes", False: "no"}[value]
        return format(value, fmt) if isinstance(value, int | float) else str(value)

    lines = [f"hot bench: {payload.get('status')} on {payload.get('environment', {}).get('gpu')}"]
    if "copy_bandwidth" in payload:
        lines.append(f"copy bandwidth: {payload['copy_bandwidth']['gbps']:.0f} GB/s")
    layers = payload.get("layers", {})
    if layers:
        lines.append("layer  bf16 us  hot us  abc us  speedup  target  met    limit  fp8 TF/s  int8 TOP/s")
    for name, r in layers.items():
        if not isinstance(r, dict) or "error" in r:
            lines.append(f"{name:<6} error: {str(r.get('error') if isinstance(r, dict) else r)[:200]}")
            continue
        lines.append(
            f"{name:<6} {r['bf16_us']:7.1f} {r['hot_backward_us']:7.1f} {r['hot_forward_abc_us']:7.1f} "
            f"{r['speedup_vs_bf16']:8.2f} {r['target']:7.2f}  {f(r['target_met']):<5} "
            f"{r['arithmetic_limit']['limit']:6.2f} {r['fp8_tflops']:9.0f} {r['int8_tops']:11.0f}"
        )
    kernels = payload.get("kernels", {})
    if kernels:
        lines.append("kernel (fraction of copy)   g_y unique  g_y moved  pack unique  pack moved")
    for name, k in kernels.items():
        if name == "target_fraction_of_copy":
            continue
        if not isinstance(k, dict) or "error" in k:
            lines.append(f"{name:<27} error: {str(k.get('error') if isinstance(k, dict) else k)[:200]}")
            continue
        g, p = k["grad_output_quantizer"], k["pack_input"]
        lines.append(
            f"{name:<27} {g['unique']['fraction_of_copy']:10.2f} {g['moved']['fraction_of_copy']:10.2f} "
            f"{p['unique']['fraction_of_copy']:12.2f} {p['moved']['fraction_of_copy']:11.2f}"
        )
    step = payload.get("step")
    if step:
        lines.append("step variant     ms      GiB   speedup  mem ratio")
        ratios = step.get("ratios", {})
        for name, v in step["variants"].items():
            if "step_ms" in v:
                r = ratios.get(name, {})
                lines.append(
                    f"{name:<15} {v['step_ms']:7.1f} {f(v.get('peak_memory_gib')):>7} "
                    f"{f(r.get('speedup')):>8} {f(r.get('memory_ratio')):>9}"
                )
            else:
                lines.append(f"{name:<15} {str(v.get('skipped') or v.get('error'))[:100]}")
        for name, t in step.get("targets", {}).items():
            lines.append(f"targets {name}: {t}")
    eq = payload.get("equivalence")
    if eq:
        if "error" in eq:
            lines.append(f"equivalence: error {eq['error'][:200]}")
        else:
            lines.append(
                f"equivalence: max rel loss diff {eq['max_rel_loss_diff']:.2e} (< {eq['tolerance']:g}: "
                f"{eq['passed']}), accuracy {[r['held_out_accuracy'] for r in eq['runs']]}, "
                f"code mismatches {eq.get('code_mismatches')}"
            )
    return lines


def run(args: argparse.Namespace) -> int:
    env = bench_environment()
    if not torch.cuda.is_available():
        write_json_atomic(args.out, {"status": "not measured: no GPU", "environment": env})
        print(f"not measured: no GPU; wrote {args.out}")
        return 0
    torch.manual_seed(args.seed)
    if args.fused_grad_output or args.gemm != "auto":
        from hot_kernels import KernelBackend  # validates the GEMM family

        from hot.backends import register_backend

        register_backend("real", KernelBackend(gemm=args.gemm, fused_grad_output=args.fused_grad_output))
    payload: dict[str, Any] = {
        "status": "partial",
        "environment": env,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"},
        "method": (
            "kernels: median of CUDA-event-timed CUDA-graph replays after warm-up, microseconds; "
            "steps: median of CUDA-event-timed training steps, milliseconds"
        ),
    }

    def save() -> None:
        write_json_atomic(args.out, payload)

    save()
    _run_sections(args, payload, save)
    payload["status"] = "measured"
    save()
    print("\n".join(summary_lines(payload)))
    print(f"wrote {args.out}")
    return 0
