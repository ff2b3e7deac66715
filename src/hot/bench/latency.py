"""``hot latency``: per-layer backward latency (g_x + g_w) on a GPU, HOT against cuBLAS and LBP-WHT.

For each layer of the authors' latency figure (``paper_values()["latency_figure"]``, shapes (L, O, I)
per sample) at the paper's L and at L × 128, one backward's two gradient GEMMs are timed:

- ``fp32``, ``tf32``, ``bf16``: cuBLAS ``g_x = g_y W`` and ``g_w = g_yᵀ x`` in that precision;
- ``lbp_wht``: LBP-WHT (rank 8 of 16 along L on both GEMMs) in fp32 as a fused implementation runs it
  (:func:`lbp_wht_backward`): g_y and x each projected by one kernel (the backend's ``hla_project``: the
  transform in registers, only the kept rows written), one GEMM per gradient on the projected rows, and g_x's
  rows put back by one kernel (``hla_unproject``); ``lbp_wht_torch`` the training code's PyTorch ops
  (:meth:`hot.methods.LBPWHTMethod.backward_gemms`: gathers, a batched GEMM with the (8, 16) basis, scatters);
- ``hot``: the real backend (hot-kernels) from fp32 g_y, x, W: Q4(HT(g_y)) per token, Q4(HT(W)) SAWB,
  the g_x GEMM and dequantisation, and beside them on a second stream Q8(P g_y), the g_w GEMM and dequantisation,
  with Q8(P x) in one launch with Q8(P g_y) and Q4(HT(W))'s codes in one with Q4(HT(g_y))'s: the training
  backward (:meth:`hot.backends.Backend.layer_gradients`) as a captured step of a layer that kept x runs it;
  ``hot_bf16`` the same from bf16 tensors; ``hot.<stage>`` each stage alone; ``hot_multi_launch`` ``hot`` with HLA's
  one-launch path off (each HLA quantiser a memset, an amax pass and a code pass, as before that path).

Each variant is captured once in a CUDA graph (launch gaps removed; eager timing where capture fails), warmed
up, and replayed ``reps`` times, each replay timed with CUDA events; the median is reported
(:func:`hot.bench.timing.time_replays`) twice: ``<variant>_us`` with the host's launch of the graph inside the
interval (a floor of one launch, about 18 µs on an H100 host, under every small layer), and
``<variant>_device_us`` with the launch hidden behind a busy-wait, the GPU's own time (``device_speedup_vs_*``
its ratios). The command is :mod:`hot.commands.latency`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch

from ..backends import InputCodes
from ..backends.real import hla_one_launch
from ..config import HOTConfig
from ..hla import HLAWindows, hla_windows
from ..methods import Keys, LayerSpecs, LayerState, LBPWHTMethod, layer_specs
from .timing import replayable, time_replays

SCALES = (1, 128)
BASELINES = ("fp32", "tf32", "bf16", "lbp_wht")


def _cublas(g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor) -> Callable[[], object]:
    return lambda: (g_y @ w, g_y.t() @ x)


def hot_specs(out_features: int, tokens: int) -> LayerSpecs:
    """The quantisers' specs of a figure layer: the default config, HLA in 1×16 strips (the figure's rows give T,
    not a grid), keys of step 0."""
    return layer_specs(HOTConfig(hla_blocking="paper"), out_features, hla_windows(tokens, "paper"), Keys(0, 0, 0))


def _hot(backend: Any, g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor, tokens: int) -> dict[str, Callable]:
    """The full HOT backward and each of its stages (stage inputs precomputed)."""
    specs = hot_specs(w.shape[0], tokens)
    hq, gy, inp = specs.grad_output, specs.grad_output_hla, specs.input_hla

    def quant_gy() -> tuple:
        return backend.hq_quantize_grad_output(g_y, hq)

    def quant_w() -> tuple:
        return backend.hq_quantize_weight(w, hq)

    def hla_gy() -> tuple:
        return backend.hla_quantize(g_y, gy)

    hla_x = InputCodes(backend, x, inp)
    a, b, gq, xq = quant_gy(), quant_w(), hla_gy(), hla_x()

    def full() -> tuple:
        # the training backward (Backend.layer_gradients) of a layer that kept x, as a captured step runs it: x's
        # codes with g_y's HLA codes and the g_w chain on a side stream, W's codes with g_y's HQ codes in the g_x chain
        return backend.layer_gradients(g_y, w, hla_x, hq, gy, torch.float32, False)

    return {
        "hot": full,
        "hot.hq_quant_gy": quant_gy,
        "hot.hq_quant_w": quant_w,
        "hot.hq_gemm_dequant": lambda: backend.hq_matmul(*a, *b, hq),
        "hot.hla_quant_gy": hla_gy,
        "hot.hla_quant_x": hla_x,
        "hot.hla_gemm_dequant": lambda: backend.hla_matmul(*gq, *xq, gy),
    }


def lbp_wht_backward(
    backend: Any, g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor, windows: HLAWindows
) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """LBP-WHT's backward in five kernels: ``P g_y`` and ``P x`` (one each), ``g_w = (P g_y)ᵀ (P x) / block`` (one
    GEMM, the division in its alpha), ``g_x = Pᵀ ((P g_y) W) / block`` (one GEMM, one back-projection)."""
    rank, length = HOTConfig(method="lbp_wht").hla_rank, g_y.shape[0]
    unread = g_y.new_empty((), dtype=torch.float32)  # addmm's input, ignored at beta = 0

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        g_p, x_p = backend.hla_project(g_y, windows, rank), backend.hla_project(x, windows, rank)
        g_w = torch.addmm(unread, g_p.t(), x_p, beta=0, alpha=1 / windows.block)
        return backend.hla_unproject(g_p @ w.float(), windows, rank, length), g_w

    return run


def measure_layer(
    row: dict[str, Any], scale: int, backend: Any, reps: int, warmup: int, stages: bool = True
) -> dict[str, Any]:
    """One row of the figure (its model, layer, T, O, I) at L = T · ``scale``: every variant's median µs and HOT's
    speedups."""
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
        run, modes[name] = replayable(fn)  # one capture, timed with the launch and without it
        result[f"{name}_us"] = time_replays(run, reps, warmup)
        # eager timing (capture failed) can hold launch gaps longer than the busy-wait: the mode says so
        result[f"{name}_device_us"] = time_replays(run, reps, warmup, hide_launch=True)

    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        record("fp32", _cublas(g_y, w, x))
        lbp = LBPWHTMethod(HOTConfig(method="lbp_wht", hla_blocking="paper"))
        state, windows = LayerState(index=0), hla_windows(tokens, "paper")
        record("lbp_wht", lbp_wht_backward(backend, g_y, w, x, windows))
        record("lbp_wht_torch", lambda: lbp.backward_gemms(g_y, w, (x,), windows, state, None))
        torch.backends.cuda.matmul.allow_tf32 = True
        record("tf32", _cublas(g_y, w, x))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    record("bf16", _cublas(g_y.bfloat16(), w.bfloat16(), x.bfloat16()))
    for name, fn in _hot(backend, g_y, w, x, tokens).items():
        if name == "hot" or stages:
            record(name, fn)
    if hasattr(getattr(backend, "ops", None), "set_hla_one_launch"):
        with hla_one_launch(backend, False):  # the same backward with each HLA quantiser in its two passes
            record("hot_multi_launch", _hot(backend, g_y, w, x, tokens)["hot"])
    record("hot_bf16", _hot(backend, g_y.bfloat16(), w.bfloat16(), x.bfloat16(), tokens)["hot"])
    for base in BASELINES:
        result[f"speedup_vs_{base}"] = result[f"{base}_us"] / result["hot_us"]
        result[f"device_speedup_vs_{base}"] = result[f"{base}_device_us"] / result["hot_device_us"]
    result["bf16_speedup_of_hot_bf16"] = result["bf16_us"] / result["hot_bf16_us"]
    result["timing"] = "graph" if all(m == "graph" for m in modes.values()) else json.dumps(modes)
    return result
