"""The reference backend: HOT's integer arithmetic on integer-valued float32 tensors ("fake quant").

Codes are returned as int8 (what is stored, e.g. the ABC buffer), the GEMMs run in float32 on the
integer values, as the paper's training code did.
"""

from __future__ import annotations

import torch

from ..hadamard import block_hadamard
from ..hla import HLAWindows, hla_project, hla_unproject, projected_rows
from ..quant import absmax_scale, quantize, sawb_scale
from . import (
    GradientFrom,
    HLASpec,
    HQSpec,
    QuantizedGradOutput,
    WeightCodesFrom,
    WeightGradientFrom,
    XCodesFrom,
    gradients_in_order,
    layer_gradients_in_parts,
    quantize_grad_output_separately,
)


class ReferenceBackend:
    name = "fake"

    def hla_codes_like(self, x: torch.Tensor, spec: HLASpec) -> torch.Tensor:
        return x.new_empty((projected_rows(x.shape[0], spec.windows, spec.rank), x.shape[1]), dtype=torch.int8)

    def hq_quantize_grad_output(self, g_y: torch.Tensor, spec: HQSpec) -> tuple[torch.Tensor, torch.Tensor]:
        a = block_hadamard(g_y.float(), spec.block, dim=1)
        scale = absmax_scale(a, spec.bits, spec.granularity)
        return quantize(a, scale, spec.bits, "stochastic", spec.key, spec.hash).to(torch.int8), scale

    def hq_quantize_weight(self, weight: torch.Tensor, spec: HQSpec) -> tuple[torch.Tensor, torch.Tensor]:
        b = block_hadamard(weight.float(), spec.block, dim=0)
        scale = sawb_scale(b, spec.bits)
        return quantize(b, scale, spec.bits, "nearest").to(torch.int8), scale

    def hq_matmul(
        self,
        a_codes: torch.Tensor,
        a_scale: torch.Tensor,
        b_codes: torch.Tensor,
        b_scale: torch.Tensor,
        spec: HQSpec,
        out_dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        return ((a_codes.float() @ b_codes.float()) * a_scale * (b_scale / spec.block)).to(out_dtype)

    def hla_quantize(self, t: torch.Tensor, spec: HLASpec) -> tuple[torch.Tensor, torch.Tensor]:
        p = hla_project(t.float(), spec.windows, spec.rank)
        scale = absmax_scale(p, spec.bits, spec.granularity)
        return quantize(p, scale, spec.bits, spec.rounding, spec.key, spec.hash).to(torch.int8), scale

    def hla_project(self, t: torch.Tensor, windows: HLAWindows, rank: int) -> torch.Tensor:
        return hla_project(t.float(), windows, rank)

    def hla_unproject(self, p: torch.Tensor, windows: HLAWindows, rank: int, length: int) -> torch.Tensor:
        rows = projected_rows(length, windows, rank)
        if p.shape[0] != rows:
            raise ValueError(
                f"p must have {rows} rows (the projection of L = {length} at rank {rank}), got shape {tuple(p.shape)}"
            )
        return hla_unproject(p.float(), windows, rank, butterflies=True)

    def hla_matmul(
        self, g_codes: torch.Tensor, g_scale: torch.Tensor, x_codes: torch.Tensor, x_scale: torch.Tensor, spec: HLASpec
    ) -> torch.Tensor:
        return (g_codes.float().t() @ x_codes.float()) * g_scale.t() * (x_scale / spec.windows.block)

    def quantize_grad_output(
        self, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec, column_sums: bool = False
    ) -> QuantizedGradOutput:
        return quantize_grad_output_separately(self, g_y, hq, hla, column_sums)

    def gradients(
        self,
        g_y: torch.Tensor,
        hq: HQSpec,
        hla: HLASpec,
        column_sums: bool,
        g_x_from: GradientFrom,
        g_w_from: WeightGradientFrom,
        weight_codes_from: WeightCodesFrom,
        x_codes_from: XCodesFrom,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        return gradients_in_order(self, g_y, hq, hla, column_sums, g_x_from, g_w_from, weight_codes_from, x_codes_from)

    def layer_gradients(
        self,
        g_y: torch.Tensor,
        weight: torch.Tensor,
        x_codes_from: XCodesFrom,
        hq: HQSpec,
        hla: HLASpec,
        gx_dtype: torch.dtype,
        column_sums: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        return layer_gradients_in_parts(self, g_y, weight, x_codes_from, hq, hla, gx_dtype, column_sums)
