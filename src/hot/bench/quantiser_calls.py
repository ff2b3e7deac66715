"""Each quantiser of the real backend called once at a ViT-B/16 layer's shape, after one warm-up call: a short,
fixed sequence of kernels for a profiler to read (``ncu``), with no CUDA graphs or timing loops in the way.

    ncu --clock-control none --profile-from-start off -k regex:'hla|grad_output|weight|sawb' \\
        --section SpeedOfLight --section InstructionStats --section ComputeWorkloadAnalysis \\
        python -m hot.bench.quantiser_calls fc1

Calls, in order, per layer named (qkv, proj, fc1, fc2; default fc1): the HLA quantiser of x (ABC, nearest); g_y's
two quantisers as a training step calls them (the HQ per-token one, then the HLA one, stochastic, adding up the bias
gradient); the HQ quantiser with a per-tensor scale (LQS's other choice); the weight quantiser; then the fused g_y
quantiser (both code sets).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence

import torch

from ..backends import create_backend
from ..config import HOTConfig
from ..methods import Keys, layer_specs
from .kernels import TOKENS, VIT_B_LAYERS, WINDOWS, vit_b_rows


def call_quantisers(name: str, batch: int = 128, device: str = "cuda", backend: str = "real") -> int:
    """One warm-up and one profiled call of each quantiser at layer ``name``'s shape (bf16 g_y and x) on ``backend``;
    returns how many quantisers were called. On CUDA the profiled calls lie between cudaProfilerStart and Stop."""
    rows = {r["layer"]: r for r in vit_b_rows()}
    out_f, in_f = int(rows[name]["O"]), int(rows[name]["I"])
    length = batch * TOKENS
    where = torch.device(device)
    gen = torch.Generator(device=where).manual_seed(out_f * 7 + in_f)
    g_y = torch.randn(length, out_f, device=where, generator=gen).bfloat16()
    x = torch.randn(length, in_f, device=where, generator=gen).bfloat16()
    w = torch.randn(out_f, in_f, device=where, generator=gen) * 0.02
    separate = create_backend(HOTConfig(backend=backend), where)
    # the fused two-pass g_y kernel is the real backend's (the fake one quantises g_y for each path separately)
    fused = create_backend(HOTConfig(backend=backend, fused_grad_output=backend == "real"), where)
    specs = layer_specs(HOTConfig(), out_f, WINDOWS, Keys(0, 0, 0))
    per_tensor = dataclasses.replace(specs.grad_output, granularity="per_tensor")
    calls = (
        lambda: separate.hla_quantize(x, specs.input_hla),
        lambda: separate.quantize_grad_output(g_y, specs.grad_output, specs.grad_output_hla, column_sums=True),
        lambda: separate.hq_quantize_grad_output(g_y, per_tensor),
        lambda: separate.hq_quantize_weight(w, specs.grad_output),
        lambda: fused.quantize_grad_output(g_y, specs.grad_output, specs.grad_output_hla),
    )
    for call in calls:
        call()
    cuda = where.type == "cuda"
    if cuda:
        torch.cuda.synchronize(where)
        torch.cuda.cudart().cudaProfilerStart()
    for call in calls:
        call()
    if cuda:
        torch.cuda.synchronize(where)
        torch.cuda.cudart().cudaProfilerStop()
    return len(calls)


def main(argv: Sequence[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or ["fc1"]
    unknown = [n for n in names if n not in VIT_B_LAYERS]
    if unknown:
        print(f"unknown layer {', '.join(unknown)}; known: {', '.join(VIT_B_LAYERS)}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to profile", file=sys.stderr)
        return 2
    for name in names:
        call_quantisers(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
