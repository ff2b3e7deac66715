"""Backward estimators, one class per method, all on the GEMM view of a layer.

A layer is ``y = x Wᵀ + b`` with ``x`` (L, I), ``W`` (O, I), ``g_y`` (L, O); L holds samples of
``windows.tokens`` consecutive positions, and ``windows`` (:class:`hot.hla.HLAWindows`) says where HLA's
blocks read them. Each method estimates ``g_x = g_y W`` and ``g_w = g_yᵀ x``;
bias gradients and the forward pass are exact and live in :mod:`hot.functional`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from . import rounding
from .backends import Backend, HLASpec, HQSpec, InputCodes, column_sums, create_backend
from .config import HOTConfig
from .hadamard import block_hadamard, largest_block
from .hla import HLA_BLOCK, HLAWindows, hla_project_matmul, hla_unproject
from .quant import fake_quantize, quantize, quantize_luq, sawb_scale
from .rounding import Stream

Saved = tuple[torch.Tensor, ...]
# What makes ``Saved`` where a layer makes its input again in its backward: called for g_w's chain, so where the
# backend runs that chain on a second stream (in a CUDA graph) the making runs on a third, beside g_y's quantisers.
SavedFrom = Callable[[], Saved]


def resolve_saved(saved: Saved | SavedFrom) -> Saved:
    """``saved``, made first where it is a :data:`SavedFrom`."""
    return saved() if callable(saved) else saved


@dataclass
class LayerState:
    """Mutable per-layer state: hash key parts, the LQS decision and its calibration errors.

    The hash step (forwards run so far) is a counter tensor once the layer has run: on the CUDA device where the
    real kernels read it (so a captured CUDA graph advances it on every replay), else on the CPU."""

    index: int
    backend: str | None = None  # the backend of the last HOT backward ("fake" or "real"), None before the first
    gx_granularity: str | None = None
    calibrating: bool = False
    grid_warned: bool = False
    lqs_error_token: float = 0.0
    lqs_error_tensor: float = 0.0
    _host_step: int = field(default=0, repr=False)
    _counter: torch.Tensor | None = field(default=None, repr=False)

    @property
    def step(self) -> int:
        """The next forward's hash step (a synchronising read where the counter is on a GPU)."""
        return int(self._counter.item()) if self._counter is not None else self._host_step

    @step.setter
    def step(self, value: int) -> None:
        if self._counter is not None:
            self._counter.fill_(int(value))  # in place: a captured CUDA graph keeps the counter's address
        else:
            self._host_step = int(value)

    def place(self, device: torch.device) -> None:
        """Keep the counter on ``device``. Layers call this when they are made or moved, so that the counter is not
        first allocated inside a compiled region (whose CUDA-graph memory pool must not hold it)."""
        if self._counter is None:
            self._counter = torch.tensor([self._host_step], dtype=torch.int64, device=device)
        elif self._counter.device != device:
            self._counter = self._counter.to(device)

    def advance(self, device: torch.device) -> torch.Tensor:
        """The hash step of this forward, as a new 1-element int64 tensor on ``device``, the counter moved on."""
        self.place(device)
        if self._counter.is_cuda:
            from .backends.real import load_ops  # the counter is on a GPU only for the real backend

            return load_ops().advance_step(self._counter)
        saved = self._counter.clone()
        self._counter.add_(1)
        return saved


@dataclass(frozen=True)
class Keys:
    """The hash keys of one backward call (seed, layer, step, data-parallel rank; the stream picks the quantiser).
    ``step`` is an integer or the 1-element tensor the layer's forward took (:meth:`LayerState.advance`)."""

    seed: int
    layer: int
    step: int | torch.Tensor
    rank: int = 0

    def __call__(self, stream: Stream) -> int:
        """The key as an integer (for reference code; a synchronising read where the step is on a GPU)."""
        return rounding.key_value(self.spec_key(stream))

    def spec_key(self, stream: Stream) -> int | rounding.StepKey:
        """The key a backend call takes: a :class:`hot.rounding.StepKey` where the step is on a GPU (the real kernels
        read it there, with no copy to the host), else the integer."""
        if isinstance(self.step, torch.Tensor) and self.step.is_cuda:
            return rounding.StepKey(self.step, self.seed, self.layer, int(stream), self.rank)
        return rounding.hash_key(self.seed, self.layer, int(self.step), stream, self.rank)


@dataclass(frozen=True)
class LayerSpecs:
    """What one HOT layer's backward quantises, and how (the backend calls take these)."""

    grad_output: HQSpec  # Q(HT(g_y)) for g_x; its block and bits quantise W as well
    grad_output_hla: HLASpec  # Q(P g_y) for g_w
    input_hla: HLASpec  # Q(P x) for g_w (in the forward with ABC)


def gw_granularity(config: HOTConfig) -> str:
    """The g_w path's scales: per channel, else one per tensor."""
    return "per_channel" if config.gw_granularity == "per_channel" else "per_tensor"


def input_spec(config: HOTConfig, windows: HLAWindows) -> HLASpec:
    """Q(P x): HLA of the layer's input, round-to-nearest."""
    return HLASpec(windows, config.hla_rank, config.gw_bits, "nearest", gw_granularity(config))


def layer_specs(
    config: HOTConfig, out_features: int, windows: HLAWindows, keys: Keys, gx_granularity: str | None = None
) -> LayerSpecs:
    """The specs of a layer with ``out_features`` outputs whose samples ``windows`` describes, for the backward call
    ``keys`` names; ``gx_granularity`` is LQS's choice of g_x scales (default: the config's)."""
    c = config
    block = largest_block(out_features, c.hq_block)
    hq = HQSpec(
        block, c.gx_bits, gx_granularity or c.gx_granularity, keys.spec_key(Stream.GX_GRAD_OUTPUT), c.rounding_hash
    )
    gy = HLASpec(
        windows,
        c.hla_rank,
        c.gw_bits,
        c.gy_rounding,
        gw_granularity(c),
        keys.spec_key(Stream.GW_GRAD_OUTPUT),
        c.rounding_hash,
    )
    return LayerSpecs(hq, gy, input_spec(c, windows))


def at_least_fp32(t: torch.Tensor) -> torch.Tensor:
    """Exact paths compute in float32, or float64 where the inputs are."""
    return t if t.dtype == torch.float64 else t.float()


class Method:
    """Exact backward; subclasses replace one or both GEMMs."""

    uses_hla = False  # whether the estimate depends on where HLA's windows sit

    def __init__(self, config: HOTConfig) -> None:
        self.config = config

    def pack_input(self, x: torch.Tensor, windows: HLAWindows, keys: Keys) -> Saved:
        """What the forward keeps of x for g_w (ABC overrides this)."""
        return (x,)

    def backend_name(self, device: torch.device) -> str:
        """The backend that runs this method's calls on ``device``: baselines are PyTorch reference code."""
        return "fake"

    def step_device(self, device: torch.device) -> torch.device:
        """Where a layer on ``device`` keeps its hash step: on a GPU whose real kernels read it there, else the CPU
        (reference code reads it on the host)."""
        return device if device.type == "cuda" and self.backend_name(device) == "real" else torch.device("cpu")

    def grad_input(
        self, g_y: torch.Tensor, weight: torch.Tensor, windows: HLAWindows, state: LayerState, keys: Keys
    ) -> torch.Tensor:
        return at_least_fp32(g_y) @ at_least_fp32(weight)

    def grad_weight(self, g_y: torch.Tensor, saved: Saved, windows: HLAWindows, keys: Keys) -> torch.Tensor:
        return at_least_fp32(g_y).t() @ at_least_fp32(saved[0])

    def backward_gemms(
        self,
        g_y: torch.Tensor,
        weight: torch.Tensor | None,
        saved: Saved | SavedFrom,
        windows: HLAWindows,
        state: LayerState,
        keys: Keys,
        gx_dtype: torch.dtype = torch.float32,
        bias: bool = False,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """One backward's g_x (in ``gx_dtype``; None without ``weight``), g_w (float32; None without ``saved``) and
        with ``bias`` the bias gradient (:func:`hot.backends.column_sums` of g_y; else None)."""
        saved = resolve_saved(saved)
        state.backend = self.backend_name(g_y.device)
        g_x = None if weight is None else self.grad_input(g_y, weight, windows, state, keys).to(gx_dtype)
        g_w = self.grad_weight(g_y, saved, windows, keys) if saved else None
        return g_x, g_w, column_sums(g_y) if bias else None


class HOTMethod(Method):
    """HQ (INT4, Hadamard along O) on g_x and HLA (INT8, rank r along L) on g_w."""

    uses_hla = True

    def __init__(self, config: HOTConfig) -> None:
        super().__init__(config)
        if config.backend == "real":
            create_backend(config)  # a missing extension fails here, at convert time, saying how to build it

    def backend_for(self, device: torch.device) -> Backend:
        """The backend that runs calls on ``device`` (``auto`` resolves per call)."""
        return create_backend(self.config, device)

    def backend_name(self, device: torch.device) -> str:
        return self.backend_for(device).name

    def pack_input(self, x: torch.Tensor, windows: HLAWindows, keys: Keys) -> Saved:
        if not self.config.abc:
            return (x,)
        return self.backend_for(x.device).hla_quantize(x, input_spec(self.config, windows))

    def packed_input_like(self, x: torch.Tensor, windows: HLAWindows) -> Saved:
        """Uninitialised tensors laid out as :meth:`pack_input`'s codes and scale (what the compiler traces with)."""
        c = self.config
        codes = self.backend_for(x.device).hla_codes_like(x, input_spec(c, windows))
        per_channel = gw_granularity(c) == "per_channel"
        return codes, x.new_empty((1, x.shape[1]) if per_channel else (), dtype=torch.float32)

    def _specs(
        self, g_y: torch.Tensor, weight_rows: int, windows: HLAWindows, state: LayerState, keys: Keys
    ) -> LayerSpecs:
        c = self.config
        if state.calibrating:
            record_lqs_errors(g_y, largest_block(weight_rows, c.hq_block), c.gx_bits, state)
        return layer_specs(c, weight_rows, windows, keys, state.gx_granularity)

    def _hq_matmul(self, a: tuple, weight: torch.Tensor, hq: HQSpec, out_dtype: torch.dtype) -> torch.Tensor:
        backend = self.backend_for(weight.device)
        b_codes, b_scale = backend.hq_quantize_weight(weight, hq)
        return backend.hq_matmul(*a, b_codes, b_scale, hq, out_dtype=out_dtype)

    def _hla_matmul(self, g: tuple, saved: Saved, specs: LayerSpecs) -> torch.Tensor:
        backend = self.backend_for(saved[0].device)
        x_codes, x_scale = saved if self.config.abc else backend.hla_quantize(saved[0], specs.input_hla)
        return backend.hla_matmul(*g, x_codes, x_scale, specs.grad_output_hla)

    def grad_input(
        self, g_y: torch.Tensor, weight: torch.Tensor, windows: HLAWindows, state: LayerState, keys: Keys
    ) -> torch.Tensor:
        hq = self._specs(g_y, weight.shape[0], windows, state, keys).grad_output
        a = self.backend_for(g_y.device).hq_quantize_grad_output(g_y, hq)
        return self._hq_matmul(a, weight, hq, torch.float32)

    def grad_weight(self, g_y: torch.Tensor, saved: Saved, windows: HLAWindows, keys: Keys) -> torch.Tensor:
        specs = layer_specs(self.config, g_y.shape[1], windows, keys)
        g = self.backend_for(g_y.device).hla_quantize(g_y, specs.grad_output_hla)
        return self._hla_matmul(g, saved, specs)

    def backward_gemms(
        self,
        g_y: torch.Tensor,
        weight: torch.Tensor | None,
        saved: Saved | SavedFrom,
        windows: HLAWindows,
        state: LayerState,
        keys: Keys,
        gx_dtype: torch.dtype = torch.float32,
        bias: bool = False,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """Both GEMMs (and the bias gradient) through :meth:`hot.backends.Backend.layer_gradients`: the real backend
        runs them in one call of its compiled ops on one stream (eagerly, or captured with ``side_stream=False``),
        and in a captured CUDA graph with the g_w chain on a second stream beside the g_x chain; it adds the bias
        gradient up from its HLA pass over g_y."""
        if weight is None or not saved:
            return super().backward_gemms(g_y, weight, saved, windows, state, keys, gx_dtype, bias)
        backend = self.backend_for(g_y.device)
        state.backend = backend.name
        specs = self._specs(g_y, weight.shape[0], windows, state, keys)

        def x_codes() -> tuple[torch.Tensor, torch.Tensor]:
            packed = resolve_saved(saved)  # made here: in a CUDA graph, on x's codes' stream
            return packed if self.config.abc else backend.hla_quantize(packed[0], specs.input_hla)

        # x kept as it was read: quantised in the backward, where the real backend may pair it with g_y's quantiser
        kept = not self.config.abc and not callable(saved)
        x_codes_from = InputCodes(backend, saved[0], specs.input_hla) if kept else x_codes
        return backend.layer_gradients(
            g_y, weight, x_codes_from, specs.grad_output, specs.grad_output_hla, gx_dtype, bias
        )


def record_lqs_errors(g_y: torch.Tensor, block: int, bits: int, state: LayerState) -> None:
    """Accumulate the round-to-nearest error of per-token and per-tensor scales on A = HT(g_y)."""
    a = block_hadamard(g_y.float(), block, dim=1)
    for granularity in ("per_token", "per_tensor"):
        err = torch.linalg.vector_norm(a - fake_quantize(a, bits, granularity, "nearest")).item()
        if granularity == "per_token":
            state.lqs_error_token += err
        else:
            state.lqs_error_tensor += err


class Int4Method(Method):
    """Both GEMMs on plain per-tensor INT4 operands, all stochastically rounded, no transform."""

    def grad_input(
        self, g_y: torch.Tensor, weight: torch.Tensor, windows: HLAWindows, state: LayerState, keys: Keys
    ) -> torch.Tensor:
        bits = self.config.gx_bits
        g = fake_quantize(g_y, bits, "per_tensor", "stochastic", keys(Stream.GX_GRAD_OUTPUT))
        w = fake_quantize(weight, bits, "per_tensor", "stochastic", keys(Stream.GX_WEIGHT))
        return g @ w

    def grad_weight(self, g_y: torch.Tensor, saved: Saved, windows: HLAWindows, keys: Keys) -> torch.Tensor:
        bits = self.config.gx_bits
        g = fake_quantize(g_y, bits, "per_tensor", "stochastic", keys(Stream.GW_GRAD_OUTPUT))
        x = fake_quantize(saved[0], bits, "per_tensor", "stochastic", keys(Stream.GW_INPUT))
        return g.t() @ x


class LUQMethod(Method):
    """LUQ: logarithmic unbiased g_y, SAWB round-to-nearest INT4 weights and activations."""

    def _sawb(self, t: torch.Tensor) -> torch.Tensor:
        bits = self.config.gx_bits
        scale = sawb_scale(t, bits)
        return quantize(t, scale, bits, "nearest") * scale

    def grad_input(
        self, g_y: torch.Tensor, weight: torch.Tensor, windows: HLAWindows, state: LayerState, keys: Keys
    ) -> torch.Tensor:
        return quantize_luq(g_y, self.config.gx_bits, keys(Stream.GX_GRAD_OUTPUT)) @ self._sawb(weight)

    def grad_weight(self, g_y: torch.Tensor, saved: Saved, windows: HLAWindows, keys: Keys) -> torch.Tensor:
        return quantize_luq(g_y, self.config.gx_bits, keys(Stream.GW_GRAD_OUTPUT)).t() @ self._sawb(saved[0])


def float_projection(t: torch.Tensor, windows: HLAWindows, rank: int) -> torch.Tensor:
    """``P t`` in floating point (at least float32): the float methods' HLA."""
    return hla_project_matmul(at_least_fp32(t), windows, rank)


def hla_grad_weight(g_projected: torch.Tensor, x: torch.Tensor, windows: HLAWindows, rank: int) -> torch.Tensor:
    """``(P g_y)ᵀ (P x) / block`` from g_y's :func:`float_projection`: HLA on the g_w path without quantisation."""
    return g_projected.t() @ float_projection(x, windows, rank) / windows.block


class LBPWHTMethod(Method):
    """LBP-WHT: the same rank-r Walsh-Hadamard projection along L on both GEMMs, in floating point."""

    uses_hla = True

    def grad_input(
        self, g_y: torch.Tensor, weight: torch.Tensor, windows: HLAWindows, state: LayerState, keys: Keys
    ) -> torch.Tensor:
        return self._grad_input(float_projection(g_y, windows, self.config.hla_rank), weight, windows)

    def _grad_input(self, g_projected: torch.Tensor, weight: torch.Tensor, windows: HLAWindows) -> torch.Tensor:
        # Pᵀ ((P g_y) W) / block: the GEMM on the kept rows only, as an implementation of LBP-WHT runs it
        return hla_unproject(g_projected @ at_least_fp32(weight), windows, self.config.hla_rank)

    def grad_weight(self, g_y: torch.Tensor, saved: Saved, windows: HLAWindows, keys: Keys) -> torch.Tensor:
        rank = self.config.hla_rank
        return hla_grad_weight(float_projection(g_y, windows, rank), saved[0], windows, rank)

    def backward_gemms(
        self,
        g_y: torch.Tensor,
        weight: torch.Tensor | None,
        saved: Saved | SavedFrom,
        windows: HLAWindows,
        state: LayerState,
        keys: Keys,
        gx_dtype: torch.dtype = torch.float32,
        bias: bool = False,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """Both GEMMs from one projection of g_y."""
        saved = resolve_saved(saved)
        state.backend = self.backend_name(g_y.device)
        rank = self.config.hla_rank
        g_projected = float_projection(g_y, windows, rank)
        g_x = None if weight is None else self._grad_input(g_projected, weight, windows).to(gx_dtype)
        g_w = hla_grad_weight(g_projected, saved[0], windows, rank) if saved else None
        return g_x, g_w, column_sums(g_y) if bias else None


class HLAFilterMethod(Method):
    """The follow-up's gradient filter: exact g_x, HLA on g_w in floating point at rank round(16·keep)."""

    uses_hla = True

    def grad_weight(self, g_y: torch.Tensor, saved: Saved, windows: HLAWindows, keys: Keys) -> torch.Tensor:
        rank = max(1, round(HLA_BLOCK * self.config.keep_ratio))
        return hla_grad_weight(float_projection(g_y, windows, rank), saved[0], windows, rank)


class GradDropoutMethod(Method):
    """The filter's control: exact g_x, g_w from g_y with elements dropped at random (kept ones scaled by 1/keep)."""

    def grad_weight(self, g_y: torch.Tensor, saved: Saved, windows: HLAWindows, keys: Keys) -> torch.Tensor:
        keep = self.config.keep_ratio
        mask = rounding.uniform(g_y.shape, keys(Stream.DROPOUT), g_y.device) < keep
        return (g_y.float() * mask / keep).t() @ saved[0].float()


METHOD_REGISTRY: dict[str, type[Method]] = {
    "fp": Method,
    "hot": HOTMethod,
    "int4": Int4Method,
    "luq": LUQMethod,
    "lbp_wht": LBPWHTMethod,
    "hla_filter": HLAFilterMethod,
    "grad_dropout": GradDropoutMethod,
}


def create_method(config: HOTConfig) -> Method:
    return METHOD_REGISTRY[config.method](config)
