"""Bit-operations (BOPs) of training, one counting rule (docs/gbops.md), for supplement Tables 2 and 5 and the
authors' compute figure.

Every nn.Linear / nn.Conv2d is traced with a forward hook into its GEMM view per image (L positions, O, I; a conv's
I is C_in/groups·k_h·k_w). BOPs = operations × bits_a × bits_b, a GEMM counting one operation per multiply-add (MAC)
and an element-wise step one per element:

- forward, every layer: L·O·I at FP32 × FP32;
- FP backward: g_x and g_w, 2·L·O·I at FP32 × FP32;
- HOT backward of a converted layer: g_x L·O·I at INT4 × INT4, g_w (L·r/16)·O·I at INT8 × INT8, and the FP32 × FP32
  element-wise work of Table 5 (transforms, quantisation, dequantisation), each Table 5 term halved (Table 5 counts 2
  FLOPs per operation, as its vanilla 4·L·I·O counts 2 per MAC); layers HOT leaves exact count as FP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..hla import HLA_BLOCK
from ..modules import conv_supported
from ..paper import paper_values
from ..train.models import create_model, default_image_size

FP32 = 32 * 32
INT4 = 4 * 4
INT8 = 8 * 8
GBOP = 1e9
COUNTS = ("backward", "step")  # what is counted: the backward pass, or a training step (forward + backward)
METHODS = ("hot", "fp")


@dataclass(frozen=True)
class LayerShape:
    """One layer's GEMM view per image; ``converted``: HOT replaces its backward (grouped convs stay exact)."""

    name: str
    kind: str
    L: int
    O: int  # noqa: E741
    I: int  # noqa: E741 (the paper's (L, O, I))
    converted: bool


def trace_shapes(model: nn.Module, image_size: int) -> list[LayerShape]:
    """(L, O, I) of every Linear / Conv2d in one forward of a single image on the meta device."""
    shapes: list[LayerShape] = []

    def hook(name: str) -> Any:
        def record(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
            x = args[0]
            if isinstance(module, nn.Conv2d):
                kh, kw = module.kernel_size
                fan_in = module.in_channels // module.groups * kh * kw
                converted = conv_supported(module) is None
                positions = output.shape[-2] * output.shape[-1]
                shapes.append(LayerShape(name, "conv", positions, module.out_channels, fan_in, converted))
            else:
                positions = x.numel() // x.shape[-1] // x.shape[0]
                shapes.append(LayerShape(name, "linear", positions, module.out_features, module.in_features, True))

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if type(m) in (nn.Linear, nn.Conv2d)]
    try:
        with torch.no_grad():
            model(torch.empty(1, 3, image_size, image_size, device="meta"))
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def model_shapes(
    model_name: str, image_size: int | None = None, num_classes: int = 100
) -> tuple[list[LayerShape], int]:
    model = create_model(model_name, num_classes, 3, device="meta").eval()
    size = image_size or default_image_size(model)
    try:
        return trace_shapes(model, size), size
    except RuntimeError as err:
        raise ValueError(f"{model_name} does not run at image size {size}: {err}") from err


def table5_flops(L: float, O: int, I: int, n: int = HLA_BLOCK, r: int = 8) -> dict[str, float]:  # noqa: E741
    """Supplement Table 5 for one layer: vanilla BP and the extra FLOPs of each HOT path (log base 2)."""
    log_n = math.log2(n)
    kept = L * r / n
    return {
        "vanilla_bp": 4 * L * I * O,
        "g_x": 2 * L * O * log_n + 2 * I * O * log_n + 2 * L * O + 2 * I * O,
        "g_w": 2 * L * I * log_n + 2 * L * O * log_n + 2 * I * kept + 2 * O * kept,
        "dequant": 2 * I * O + 2 * L * I,
    }


def layer_bops(shape: LayerShape, method: str, rank: int, batch_size: int = 1) -> dict[str, float]:
    """BOPs of one layer for ``batch_size`` images: ``forward``, ``g_x``, ``g_w`` and HOT's FP32 ``overhead``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    L, O, I = shape.L * batch_size, shape.O, shape.I  # noqa: E741
    macs = L * O * I
    parts = {"forward": macs * FP32, "g_x": macs * FP32, "g_w": macs * FP32, "overhead": 0.0}
    if method == "hot" and shape.converted:
        extra = table5_flops(L, O, I, HLA_BLOCK, rank)
        parts["g_x"] = macs * INT4
        parts["g_w"] = L * rank / HLA_BLOCK * O * I * INT8
        parts["overhead"] = (extra["g_x"] + extra["g_w"] + extra["dequant"]) / 2 * FP32
    return parts


def count_gbops(
    shapes: list[LayerShape], method: str, rank: int, batch_size: int = 1, count: str = "backward"
) -> dict[str, float]:
    """GBOPs (10^9 BOPs) of all layers, per part and ``total``; ``count``: "backward" or "step" (with the forward)."""
    if count not in COUNTS:
        raise ValueError(f"count must be one of {COUNTS}, got {count!r}")
    parts = {"forward": 0.0, "g_x": 0.0, "g_w": 0.0, "overhead": 0.0}
    for shape in shapes:
        for key, value in layer_bops(shape, method, rank, batch_size).items():
            parts[key] += value / GBOP
    if count == "backward":
        parts["forward"] = 0.0
    parts["total"] = sum(parts.values())
    return parts


def appendix_d() -> dict[str, Any]:
    """The Appendix D example (EfficientFormer-L1 stages.3.fc2): Table 5 against the published MFLOPs."""
    example = paper_values()["table5"]["example"]
    shape = example["shape"]
    readings = {}
    for label, L in (("L as stated", shape["L"]), ("L padded to 16-blocks", math.ceil(shape["L"] / 16) * 16)):
        flops = table5_flops(L, shape["O"], shape["I"])
        readings[label] = {
            "L": L,
            "vanilla_bp_mflops": flops["vanilla_bp"] / 1e6,
            "hot_overhead_mflops": (flops["g_x"] + flops["g_w"] + flops["dequant"]) / 1e6,
            **{f"{k}_mflops": v / 1e6 for k, v in flops.items() if k != "vanilla_bp"},
        }
    return {
        "layer": example["layer"],
        "shape": shape,
        "published": {"vanilla_bp_mflops": example["vanilla_bp_mflops"], "hot_mflops": example["hot_mflops"]},
        "computed": readings,
    }
