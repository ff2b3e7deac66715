"""Symmetric integer quantisers held in float tensors ("fake quant"): codes are integers, scales float32.

``b``-bit levels are {-(2^(b-1)-1) … 2^(b-1)-1}: ±7 for INT4, ±127 for INT8. A value ``v`` with scale
``s`` becomes ``round(v / s)`` (round half to even) or ``floor(v / s + u)`` with ``u`` from
:mod:`hot.rounding`; every operation is one float32 IEEE operation, so the CUDA kernels reproduce the
codes bit for bit.
"""

from __future__ import annotations

import torch

from . import rounding

GRANULARITIES = ("per_tensor", "per_token", "per_channel")
ROUNDINGS = ("nearest", "stochastic")
SUPPORTED_BITS = (4, 8)
# SAWB clipping coefficients for 4-bit weights: clip = 12.1·sqrt(E[w²]) − 12.2·E|w|.
SAWB_4BIT = (12.1, 12.2)


def qmax(bits: int) -> int:
    if bits not in SUPPORTED_BITS:
        raise ValueError(f"bits must be one of {SUPPORTED_BITS}, got {bits}")
    return 2 ** (bits - 1) - 1


def _over_qmax(t: torch.Tensor, bits: int) -> torch.Tensor:
    # A tensor divisor: torch divides a CUDA tensor by a Python number through its reciprocal, which can differ from
    # the division in the last bit; by a tensor it divides on every device, so scales are the same everywhere.
    return t / torch.full_like(t, float(qmax(bits)))


def absmax_scale(t: torch.Tensor, bits: int, granularity: str = "per_tensor") -> torch.Tensor:
    """float32 scale ``max|t| / qmax`` per tensor (shape ()), per row (L, 1) or per column (1, C).

    An all-zero group gets scale 1 so that every code is 0 and nothing divides by zero. A group holding a NaN
    or an infinity gets a non-finite scale (its codes are then meaningless), so the dequantised product, and the
    gradient it is part of, is non-finite too: a NaN in g_y is never masked.
    """
    t = t.float()
    if granularity == "per_tensor":
        amax = t.abs().amax()
    elif granularity == "per_token":
        amax = t.abs().amax(dim=1, keepdim=True)
    elif granularity == "per_channel":
        amax = t.abs().amax(dim=0, keepdim=True)
    else:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    scale = _over_qmax(amax, bits)
    return torch.where(amax == 0, torch.ones_like(scale), scale)


def sawb_scale(w: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """Per-tensor SAWB scale. At 4 bits clip = 12.1·sqrt(mean w²) − 12.2·mean|w| (max|w| if that is ≤ 0).

    SAWB's coefficients are fitted for 4 bits; at 8 bits the clip is max|w|.
    """
    w = w.float()
    amax = w.abs().amax()
    if bits == 4:
        c1, c2 = SAWB_4BIT
        clip = c1 * w.square().mean().sqrt() - c2 * w.abs().mean()
        clip = torch.where(clip > 0, clip, amax)
    else:
        clip = amax
    scale = _over_qmax(clip, bits)
    return torch.where(clip > 0, scale, torch.ones_like(scale))


def quantize(
    t: torch.Tensor,
    scale: torch.Tensor,
    bits: int,
    rounding_mode: str = "nearest",
    key: int | rounding.StepKey | None = None,
    hash: str = rounding.SPEC_HASH,
) -> torch.Tensor:
    """Integer codes (in float32) of ``t`` at ``scale``, clamped to ±qmax.

    Stochastic rounding needs the hash ``key`` (:func:`hot.rounding.hash_key`); the uniform for element
    ``e`` is drawn at ``e``'s row-major index in ``t`` by ``hash`` (:data:`hot.rounding.HASHES`).
    """
    limit = qmax(bits)
    v = t.float() / scale
    if rounding_mode == "nearest":
        q = torch.round(v)
    elif rounding_mode == "stochastic":
        if key is None:
            raise ValueError("stochastic rounding needs a hash key")
        q = torch.floor(v + rounding.uniform(v.shape, key, v.device, hash))
    else:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding_mode!r}")
    return q.clamp_(-limit, limit)


def fake_quantize(
    t: torch.Tensor, bits: int, granularity: str = "per_tensor", rounding_mode: str = "nearest", key: int | None = None
) -> torch.Tensor:
    """Quantise and dequantise in one step (absmax scale): the value the integer GEMM would see."""
    scale = absmax_scale(t, bits, granularity)
    return quantize(t, scale, bits, rounding_mode, key) * scale


def quantize_luq(t: torch.Tensor, bits: int, key: int) -> torch.Tensor:
    """LUQ (Chmiel et al., ICLR 2023): unbiased logarithmic quantisation, returned dequantised.

    Magnitudes are rounded stochastically to {0} ∪ {α·2^-k : k = 0 … 2^(b-1)-2}, α = max|t|: between two
    powers of two with probability proportional to the distance, and below the smallest level to 0 or
    that level, both unbiased.
    """
    t = t.float()
    alpha = t.abs().amax()
    if alpha == 0:
        return torch.zeros_like(t)
    smallest = alpha * 2.0 ** -(2 ** (bits - 1) - 2)
    u = rounding.uniform(t.shape, key, t.device)
    mag = t.abs()
    # below the smallest level: 0 or `smallest`, with probability mag / smallest
    under = torch.where(u < mag / smallest, smallest, torch.zeros_like(mag))
    lower = torch.exp2(torch.floor(torch.log2(mag.clamp_min(smallest) / alpha))) * alpha
    over = torch.where(u < (mag - lower) / lower, 2 * lower, lower).clamp_max(alpha)
    return torch.sign(t) * torch.where(mag < smallest, under, over)
