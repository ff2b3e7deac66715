"""The one dispatch point between the HOT math and where it runs.

``fake`` is the PyTorch reference: integer codes held in float tensors, runs on any device, defines the
results. ``real`` is the compiled hot-kernels extension (INT4/INT8 codes, integer or FP8 tensor-core
GEMMs); it must reproduce ``fake``'s codes bit for bit. Both implement :class:`Backend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..hla import HLAWindows


@dataclass(frozen=True)
class HQSpec:
    """How g_y is quantised for g_x: Q(HT(g_y)) with a Hadamard block along O, stochastic rounding."""

    block: int
    bits: int
    granularity: str
    key: int


@dataclass(frozen=True)
class HLASpec:
    """How a tensor is quantised for g_w: Q(P t) along L, in the blocks ``windows`` places, rank of 16.
    ``key`` seeds stochastic rounding (None for round-to-nearest)."""

    windows: HLAWindows
    rank: int
    bits: int
    rounding: str
    granularity: str
    key: int | None = None


class Backend(Protocol):
    name: str
    codes_transposed: bool  # HLA codes come back as the transpose of a (C, rows) tensor (K-major for the GEMM)

    def hq_quantize_grad_output(
        self, g_y: torch.Tensor, block: int, bits: int, granularity: str, key: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """int8 codes and float32 scales of Q(HT(g_y)): block Hadamard along O, stochastic rounding, (L, 1) or ()."""

    def hq_quantize_weight(self, weight: torch.Tensor, block: int, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
        """int8 codes and per-tensor SAWB scale of Q(HT(W)): block Hadamard along O, round-to-nearest."""

    def hq_matmul(
        self,
        a_codes: torch.Tensor,
        a_scale: torch.Tensor,
        b_codes: torch.Tensor,
        b_scale: torch.Tensor,
        block: int,
        out_dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """g_x = (a_codes @ b_codes) · a_scale · b_scale / block, (L, I), computed in float32, in ``out_dtype``."""

    def hla_quantize(self, t: torch.Tensor, spec: HLASpec) -> tuple[torch.Tensor, torch.Tensor]:
        """int8 codes and float32 scale of Q(P t) along L (:func:`hot.hla.hla_project`); scale () or (1, C)."""

    def hla_matmul(
        self, g_codes: torch.Tensor, g_scale: torch.Tensor, x_codes: torch.Tensor, x_scale: torch.Tensor, block: int
    ) -> torch.Tensor:
        """g_w = (g_codesᵀ @ x_codes) · g_scaleᵀ · x_scale / block, float32 (O, I)."""

    def quantize_grad_output(
        self, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Both quantisations of g_y at once: ``hq_quantize_grad_output`` then ``hla_quantize``'s results."""


def quantize_grad_output_separately(
    backend: Backend, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``quantize_grad_output`` as the backend's two quantisers, one after the other."""
    a = backend.hq_quantize_grad_output(g_y, hq.block, hq.bits, hq.granularity, hq.key)
    g = backend.hla_quantize(g_y, hla)
    return (*a, *g)


_REGISTRY: dict[str, Backend] = {}


def register_backend(name: str, backend: Backend) -> None:
    """Serve ``backend`` as ``name`` (``fake`` or ``real``) to layers created from now on (e.g. a
    ``hot_kernels.KernelBackend`` with non-default options)."""
    if name not in ("fake", "real"):
        raise ValueError(f"backend must be 'fake' or 'real', got {name!r}")
    _REGISTRY[name] = backend


def get_backend(name: str) -> Backend:
    """The backend called ``name`` (``fake`` or ``real``), loaded on first use."""
    if name not in _REGISTRY:
        if name == "fake":
            from .reference import ReferenceBackend

            _REGISTRY[name] = ReferenceBackend()
        elif name == "real":
            from .kernels import load_kernel_backend

            _REGISTRY[name] = load_kernel_backend()
        else:
            raise ValueError(f"backend must be 'fake' or 'real', got {name!r}")
    return _REGISTRY[name]
