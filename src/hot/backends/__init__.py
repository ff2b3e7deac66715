"""The one dispatch point between the HOT math and where it runs.

``fake`` is the PyTorch reference (:mod:`hot.backends.reference`): integer codes held in float tensors, runs on
any device, defines the results. ``real`` (:mod:`hot.backends.real`) runs the compiled ``hot_kernels`` ops (INT4/
INT8 codes, integer or FP8 tensor-core GEMMs) and must reproduce ``fake``'s codes bit for bit. Both implement
:class:`Backend`, whose calls take the quantisers' specs (:class:`HQSpec`, :class:`HLASpec`);
:func:`hot.methods.layer_specs` builds them for a layer. :func:`create_backend` builds the backend a
:class:`hot.HOTConfig` names, with its options (``gemm``, ``fused_grad_output``, ``side_stream``).

On a CUDA device, wherever the extension is built, ``fake``'s stochastic-rounding numbers come from the kernels'
``hash_uniform`` (:func:`device_uniform`), the same numbers as the CPU definition in :mod:`hot.rounding`: a GPU
comparison of ``fake`` and ``real`` on one device therefore shares the hash, which only the GPU test against the
CPU numbers (``tests/kernels/test_kernels_gpu.py``) checks on its own.

Bad specs raise ``ValueError`` here; bad tensors raise ``ValueError`` from the backend that reads them (the
compiled ops' C++ checks for ``real``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch

from ..config import HOTConfig
from ..hla import HLA_BLOCK, HLAWindows
from ..quant import GRANULARITIES, ROUNDINGS, SUPPORTED_BITS
from ..rounding import HASHES, SPEC_HASH, StepKey

_MASK32 = 0xFFFFFFFF

# g_x from HQ's code set of g_y and its scale, then W's operand (what a WeightCodesFrom gave): what Backend.gradients
# is given.
GradientFrom = Callable[..., torch.Tensor]
# g_w from g_y's HLA codes and scale and x's: what Backend.gradients is given.
WeightGradientFrom = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# x's HLA codes and scale for g_w (what the forward kept, or quantised when asked): what layer_gradients is given.
XCodesFrom = Callable[[], tuple[torch.Tensor, torch.Tensor]]
# W's operand for g_x (its HQ codes and scale, and whatever else the backend's GradientFrom takes with them).
WeightCodesFrom = Callable[[], tuple[torch.Tensor, ...]]


def _check_key(key: object) -> None:
    if isinstance(key, StepKey):
        step = key.step
        if not isinstance(step, torch.Tensor) or step.dtype != torch.int64 or step.numel() != 1:
            raise ValueError(f"StepKey.step must be a 1-element int64 tensor, got {step!r}")
        return
    if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key <= _MASK32:
        raise ValueError(f"hash key must be an integer in [0, 2**32) or a hot.rounding.StepKey, got {key!r}")


def _check_choice(name: str, value: object, allowed: tuple) -> None:
    if value not in allowed or isinstance(value, bool):
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


@dataclass(frozen=True)
class HQSpec:
    """How the g_x path quantises: Q(HT(g_y)) with a Hadamard ``block`` along O and stochastic rounding keyed by
    ``key`` (scales per ``granularity``), and Q(HT(W)) with the same block and bits, SAWB, round-to-nearest."""

    block: int
    bits: int
    granularity: str = "per_token"
    key: int | StepKey = 0
    hash: str = SPEC_HASH  # hot.rounding.HASHES: how a code's uniform is drawn from key and index

    def __post_init__(self) -> None:
        if isinstance(self.block, bool) or not isinstance(self.block, int) or self.block < 1:
            raise ValueError(f"HQSpec.block must be a positive power of two, got {self.block!r}")
        if self.block & (self.block - 1):
            raise ValueError(f"HQSpec.block must be a power of two, got {self.block}")
        _check_choice("HQSpec.bits", self.bits, SUPPORTED_BITS)
        _check_choice("HQSpec.granularity", self.granularity, GRANULARITIES)
        _check_key(self.key)
        _check_choice("HQSpec.hash", self.hash, HASHES)


@dataclass(frozen=True)
class HLASpec:
    """How the g_w path quantises a tensor: Q(P t) along L, in the blocks ``windows`` places, rank of 16.
    ``key`` seeds stochastic rounding (None for round-to-nearest)."""

    windows: HLAWindows
    rank: int
    bits: int
    rounding: str
    granularity: str
    key: int | StepKey | None = None
    hash: str = SPEC_HASH  # hot.rounding.HASHES, for stochastic rounding

    def __post_init__(self) -> None:
        if not isinstance(self.windows, HLAWindows):
            raise ValueError(f"HLASpec.windows must be a hot.hla.HLAWindows, got {type(self.windows).__name__}")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or not 1 <= self.rank <= HLA_BLOCK:
            raise ValueError(f"HLASpec.rank must be an integer in 1..{HLA_BLOCK}, got {self.rank!r}")
        _check_choice("HLASpec.bits", self.bits, SUPPORTED_BITS)
        _check_choice("HLASpec.rounding", self.rounding, ROUNDINGS)
        _check_choice("HLASpec.granularity", self.granularity, GRANULARITIES)
        if self.rounding == "stochastic" and self.key is None:
            raise ValueError("HLASpec.key is needed for stochastic rounding")
        if self.key is not None:
            _check_key(self.key)
        _check_choice("HLASpec.hash", self.hash, HASHES)


class Backend(Protocol):
    name: str

    def hla_codes_like(self, x: torch.Tensor, spec: HLASpec) -> torch.Tensor:
        """An uninitialised int8 tensor laid out in memory as :meth:`hla_quantize`'s codes of x under ``spec``:
        what a compiler traces with."""

    def hq_quantize_grad_output(self, g_y: torch.Tensor, spec: HQSpec) -> tuple[torch.Tensor, torch.Tensor]:
        """int8 codes and float32 scales of Q(HT(g_y)): block Hadamard along O, stochastic rounding, (L, 1) or ()."""

    def hq_quantize_weight(self, weight: torch.Tensor, spec: HQSpec) -> tuple[torch.Tensor, torch.Tensor]:
        """int8 codes and per-tensor SAWB scale of Q(HT(W)): block Hadamard along O, round-to-nearest."""

    def hq_matmul(
        self,
        a_codes: torch.Tensor,
        a_scale: torch.Tensor,
        b_codes: torch.Tensor,
        b_scale: torch.Tensor,
        spec: HQSpec,
        out_dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """g_x = (a_codes @ b_codes) · a_scale · b_scale / block, (L, I), computed in float32, in ``out_dtype``."""

    def hla_quantize(self, t: torch.Tensor, spec: HLASpec) -> tuple[torch.Tensor, torch.Tensor]:
        """int8 codes and float32 scale of Q(P t) along L (:func:`hot.hla.hla_project`); scale () or (1, C)."""

    def hla_project(self, t: torch.Tensor, windows: HLAWindows, rank: int) -> torch.Tensor:
        """``P t`` in float32 (:func:`hot.hla.hla_project`, its rows and its butterflies): LBP-WHT's projection."""

    def hla_unproject(self, p: torch.Tensor, windows: HLAWindows, rank: int, length: int) -> torch.Tensor:
        """``Pᵀ p / block`` in float32, (length, C) (:func:`hot.hla.hla_unproject` with ``butterflies``)."""

    def hla_matmul(
        self, g_codes: torch.Tensor, g_scale: torch.Tensor, x_codes: torch.Tensor, x_scale: torch.Tensor, spec: HLASpec
    ) -> torch.Tensor:
        """g_w = (g_codesᵀ @ x_codes) · g_scaleᵀ · x_scale / block (``spec.windows.block``), float32 (O, I)."""

    def quantize_grad_output(
        self, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec, column_sums: bool = False
    ) -> QuantizedGradOutput:
        """Both quantisations of g_y at once (``hq_quantize_grad_output``'s then ``hla_quantize``'s results) and,
        with ``column_sums``, the layer's bias gradient: :func:`column_sums` of g_y, up to float32 rounding."""

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
        """One backward's (g_x, g_w, bias gradient or None): g_y quantised as :meth:`quantize_grad_output` does,
        ``g_x_from(hq codes, hq scale, *weight_codes_from())`` and ``g_w_from(hla codes, hla scale,
        *x_codes_from())``. While a CUDA graph is captured, the real backend queues the g_w chain on a second stream
        beside the g_x chain, and x's codes (where they are made in the backward) and W's either in the launches
        they share with g_y's quantisers (x given as :class:`InputCodes`, W as its own ``WeightCodes``) or on streams
        of their own (the same kernels' work on the same inputs: the same bits)."""

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
        """One HOT layer's backward: :meth:`gradients` with g_x from ``weight``'s HQ codes (:meth:`hq_matmul` in
        ``gx_dtype``) and g_w from x's HLA codes and scale, ``x_codes_from()`` (:meth:`hla_matmul`), as
        :func:`layer_gradients_in_parts` composes them. The real backend runs an eager one-stream backward in one
        call of its compiled ops."""


@dataclass(frozen=True, eq=False)
class InputCodes:
    """An :data:`XCodesFrom` that quantises x in the backward (``backend.hla_quantize(x, spec)``), as data: the
    real backend's captured backward can then quantise x and g_y in one launch (the same bits)."""

    backend: Backend
    x: torch.Tensor
    spec: HLASpec

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.backend.hla_quantize(self.x, self.spec)


class QuantizedGradOutput(NamedTuple):
    """What :meth:`Backend.quantize_grad_output` makes of one g_y."""

    hq_codes: torch.Tensor
    hq_scale: torch.Tensor
    hla_codes: torch.Tensor
    hla_scale: torch.Tensor
    column_sums: torch.Tensor | None  # where asked for


def column_sums(t: torch.Tensor) -> torch.Tensor:
    """``t`` (L, C) summed over its L rows in float32 (float64 for float64 ``t``): a linear layer's bias gradient
    from its g_y. The real backend adds the same values in another order inside its HLA pass over g_y."""
    return t.sum(0, dtype=torch.float64 if t.dtype == torch.float64 else torch.float32)


def quantize_grad_output_separately(
    backend: Backend, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec, sums: bool = False
) -> QuantizedGradOutput:
    """``quantize_grad_output`` as the backend's two quantisers, one after the other, and :func:`column_sums`."""
    return QuantizedGradOutput(
        *backend.hq_quantize_grad_output(g_y, hq), *backend.hla_quantize(g_y, hla), column_sums(g_y) if sums else None
    )


def gradients_in_order(
    backend: Backend,
    g_y: torch.Tensor,
    hq: HQSpec,
    hla: HLASpec,
    column_sums: bool,
    g_x_from: GradientFrom,
    g_w_from: WeightGradientFrom,
    weight_codes_from: WeightCodesFrom,
    x_codes_from: XCodesFrom,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """:meth:`Backend.gradients` on one stream: both quantisations of g_y, then the g_x chain, then the g_w chain."""
    q = backend.quantize_grad_output(g_y, hq, hla, column_sums=column_sums)
    g_x = g_x_from(q.hq_codes, q.hq_scale, *weight_codes_from())
    return g_x, g_w_from(q.hla_codes, q.hla_scale, *x_codes_from()), q.column_sums


def layer_gradients_in_parts(
    backend: Backend,
    g_y: torch.Tensor,
    weight: torch.Tensor,
    x_codes_from: XCodesFrom,
    hq: HQSpec,
    hla: HLASpec,
    gx_dtype: torch.dtype,
    column_sums: bool,
    weight_codes_from: WeightCodesFrom | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """:meth:`Backend.layer_gradients` through the backend's own calls: :meth:`Backend.gradients` with W quantised
    (``weight_codes_from``, by default :meth:`Backend.hq_quantize_weight`; what it gives after W's codes and scale
    goes on to ``hq_matmul``) and multiplied in the g_x chain, x's codes got and multiplied in the g_w chain."""

    def g_x(codes: torch.Tensor, scale: torch.Tensor, *w_operand: torch.Tensor) -> torch.Tensor:
        w_codes, w_scale, *extra = w_operand
        return backend.hq_matmul(codes, scale, w_codes, w_scale, hq, gx_dtype, *extra)

    return backend.gradients(
        g_y,
        hq,
        hla,
        column_sums,
        g_x,
        lambda codes, scale, x_codes, x_scale: backend.hla_matmul(codes, scale, x_codes, x_scale, hla),
        weight_codes_from or (lambda: backend.hq_quantize_weight(weight, hq)),
        x_codes_from,
    )


def create_backend(config: HOTConfig, device: torch.device | None = None) -> Backend:
    """The backend that runs ``config``'s calls on ``device``, with the config's backend options. ``auto``: ``real``
    where ``device`` is a CUDA device and the hot-kernels extension loads, else ``fake`` (also without a device).
    Layers of equal options share one instance. ``real`` raises ``RuntimeError`` (saying how to build it) where the
    extension is not installed."""
    name = config.backend
    if name == "auto":
        name = "real" if device is not None and device.type == "cuda" and real_available() else "fake"
    if name == "fake":
        return _backend("fake", "auto", False)
    return _backend(name, config.gemm, config.fused_grad_output, config.side_stream)


@functools.cache
def real_available() -> bool:
    """Whether the hot-kernels extension loads (looked up once per process)."""
    from .real import load_ops

    try:
        load_ops()
    except RuntimeError:
        return False
    return True


def device_uniform(numel: int, key: int | StepKey, device: torch.device, hash: str = SPEC_HASH) -> torch.Tensor | None:
    """:func:`hot.rounding.uniform`'s numbers (flat, float32) made on a CUDA ``device`` by the hot-kernels extension
    in one kernel, or None where ``device`` is not CUDA or the loaded extension has no such kernel (not built, or
    built before it existed): the caller then computes the same numbers with torch ops."""
    if device.type != "cuda" or not real_available():
        return None
    from .real import hash_uniform, hash_uniform_built

    return hash_uniform(numel, key, device, hash) if hash_uniform_built() else None


def _backend(name: str, gemm: str, fused_grad_output: bool, side_stream: bool = True) -> Backend:
    """The shared backend of these options (also what a pickled real backend rebuilds through, from before
    ``side_stream`` existed too)."""
    return _shared_backend(name, gemm, fused_grad_output, side_stream)


@functools.cache
def _shared_backend(name: str, gemm: str, fused_grad_output: bool, side_stream: bool) -> Backend:
    if name == "fake":
        from .reference import ReferenceBackend

        return ReferenceBackend()
    from .real import RealBackend

    return RealBackend(gemm=gemm, fused_grad_output=fused_grad_output, side_stream=side_stream)
