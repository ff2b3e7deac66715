"""The counter-based hash behind every stochastic rounding in HOT: the one definition.

A uniform number ``u`` in [0, 1) is a pure function of (seed, layer, step, stream, index):

    key = fmix32(fmix32(fmix32(fmix32(seed) ^ layer) ^ step) ^ stream)
    h   = fmix32(fmix32(index) ^ key)
    u   = (h >> 8) * 2**-24

``fmix32`` is the MurmurHash3 32-bit finaliser (xor-shift 16, multiply 0x85EBCA6B, xor-shift 13,
multiply 0xC2B2AE35, xor-shift 16, all modulo 2**32). ``index`` is the element's row-major offset in
the tensor being quantised, modulo 2**32. ``stream`` separates the quantisers of one layer's
backward (see :class:`Stream`). ``u`` has 24 random bits, so it is exact in float32.

The CUDA kernels (``kernels/``) compute the same ``u`` for the same element, which is what lets
real-quant results be checked bit for bit against this reference. No RNG state is involved.
"""

from __future__ import annotations

import enum

import numpy as np
import torch

MASK32 = 0xFFFFFFFF
FMIX_C1 = 0x85EBCA6B
FMIX_C2 = 0xC2B2AE35


class Stream(enum.IntEnum):
    """Which quantiser of a layer's backward draws the numbers (part of the hash key)."""

    GX_GRAD_OUTPUT = 0  # Q4(HT(g_y)) on the g_x path
    GW_GRAD_OUTPUT = 1  # Q8(P g_y) on the g_w path
    GX_WEIGHT = 2  # baselines that round the weight stochastically
    GW_INPUT = 3  # baselines that round the activation stochastically
    DROPOUT = 4  # the gradient-dropout control's mask


def _mul32(h: torch.Tensor, c: int) -> torch.Tensor:
    # (h * c) mod 2**32 without int64 overflow: split c into 16-bit halves.
    lo = (h * (c & 0xFFFF)) & MASK32
    hi = ((h * (c >> 16)) & 0xFFFF) << 16
    return (lo + hi) & MASK32


def fmix32(h: torch.Tensor) -> torch.Tensor:
    """MurmurHash3's 32-bit finaliser on an int64 tensor holding values in [0, 2**32)."""
    h = h ^ (h >> 16)
    h = _mul32(h, FMIX_C1)
    h = h ^ (h >> 13)
    h = _mul32(h, FMIX_C2)
    return h ^ (h >> 16)


def fmix32_int(h: int) -> int:
    """``fmix32`` on a Python int (for keys)."""
    h &= MASK32
    h ^= h >> 16
    h = (h * FMIX_C1) & MASK32
    h ^= h >> 13
    h = (h * FMIX_C2) & MASK32
    return h ^ (h >> 16)


def hash_key(seed: int, layer: int, step: int, stream: int) -> int:
    """The 32-bit key of one quantiser call."""
    key = fmix32_int(seed)
    key = fmix32_int(key ^ (layer & MASK32))
    key = fmix32_int(key ^ (step & MASK32))
    return fmix32_int(key ^ (stream & MASK32))


def _fmix32_numpy(h: np.ndarray) -> np.ndarray:
    # uint32 arithmetic wraps modulo 2**32 natively: the same function as fmix32, about 12x faster on a CPU
    h ^= h >> np.uint32(16)
    h *= np.uint32(FMIX_C1)
    h ^= h >> np.uint32(13)
    h *= np.uint32(FMIX_C2)
    h ^= h >> np.uint32(16)
    return h


def uniform(shape: torch.Size | tuple[int, ...], key: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """float32 uniforms in [0, 1) for every element of a tensor of ``shape`` (row-major indices)."""
    numel = 1
    for s in shape:
        numel *= int(s)
    if torch.device(device).type == "cpu":
        h = _fmix32_numpy(_fmix32_numpy(np.arange(numel, dtype=np.uint32)) ^ np.uint32(key))
        return torch.from_numpy(h >> np.uint32(8)).to(torch.float32).mul_(2.0**-24).reshape(shape)
    index = torch.arange(numel, dtype=torch.int64, device=device) & MASK32
    h = fmix32(fmix32(index) ^ key)
    return ((h >> 8).to(torch.float32) * (2.0**-24)).reshape(shape)
