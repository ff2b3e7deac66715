"""The counter-based hash behind every stochastic rounding in HOT: the one definition.

A uniform number ``u`` in [0, 1) is a pure function of (seed, layer, step, stream, rank, index):

    key = fmix32(fmix32(fmix32(fmix32(seed) ^ layer) ^ step) ^ stream)   on rank 0
    key = fmix32(key_of_rank_0 ^ rank)                                   on rank > 0
    h   = fmix32(fmix32(index) ^ key)                                    hash "fmix32x2" (the default)
    h   = fmix32(index ^ key)                                            hash "fmix32"
    u   = (h >> 8) * 2**-24

``fmix32`` is the MurmurHash3 32-bit finaliser (xor-shift 16, multiply 0x85EBCA6B, xor-shift 13,
multiply 0xC2B2AE35, xor-shift 16, all modulo 2**32). ``index`` is the element's row-major offset in
the tensor being quantised, modulo 2**32. ``stream`` separates the quantisers of one layer's
backward (see :class:`Stream`). ``u`` has 24 random bits, so it is exact in float32.

The hash (:data:`HASHES`, ``HOTConfig.rounding_hash``) is the spec's two finalisers a number by default. ``"fmix32"``
keeps one: the key is already a finaliser's output, and one finaliser of ``index ^ key`` mixes every index bit into
every output bit, at half the instructions. The kernels' stochastic code passes are bound by instruction issue, and
the spec's hash is about a third of their instructions a code; ``"fmix32"`` draws other numbers, so its training is
its own (measured against the default, never assumed equal).

``rank`` is the process's data-parallel rank (:func:`rounding_rank`): ``torch.distributed``'s rank where
a process group is initialised, else 0, unless :func:`set_rounding_rank` says otherwise. Data-parallel
processes thus draw independent dither, whose noise averages out in the gradient all-reduce instead of
adding up; rank 0, and every process without a process group, keeps the key of (seed, layer, step, stream)
alone, so single-process results do not depend on whether the rank is part of the key.

The CUDA kernels (``kernels/``) compute the same ``u`` for the same element, which is what lets
real-quant results be checked bit for bit against this reference. No RNG state is involved. A HOT layer's step
lives on its device (:class:`StepKey`): the kernels derive the key from it, so a captured CUDA graph, whose
replays run no Python, still draws each step's own numbers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

MASK32 = 0xFFFFFFFF
SPEC_HASH = "fmix32x2"  # the spec's per-number hash, two finalisers: the default
HASHES = (SPEC_HASH, "fmix32")  # the per-number hashes: the spec's, or one finaliser
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


def hash_key(seed: int, layer: int, step: int, stream: int, rank: int = 0) -> int:
    """The 32-bit key of one quantiser call on data-parallel rank ``rank``."""
    key = fmix32_int(seed)
    key = fmix32_int(key ^ (layer & MASK32))
    key = fmix32_int(key ^ (step & MASK32))
    key = fmix32_int(key ^ (stream & MASK32))
    return key if rank == 0 else fmix32_int(key ^ (rank & MASK32))


@dataclass(frozen=True, eq=False)
class StepKey:
    """``hash_key(seed, layer, step, stream, rank)`` with ``step`` held in a 1-element int64 tensor, a HOT layer's
    counter on its device. The CUDA kernels read the step where they round; :meth:`value` reads it on the host
    (a synchronising copy, which no CUDA graph may hold)."""

    step: torch.Tensor
    seed: int
    layer: int
    stream: int
    rank: int = 0

    def parts(self) -> list[int]:
        """[seed, layer, stream, rank], each modulo 2**32 (what the key reads of them)."""
        return [self.seed & MASK32, self.layer & MASK32, self.stream & MASK32, self.rank & MASK32]

    def value(self) -> int:
        """The key as an integer, for code that computes it on the host side."""
        if self.step.is_cuda and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "a CUDA graph is being captured around a stochastic rounding that reads the hash step on the host "
                "(a replay would reuse one step's dither): use torch.compile's default mode instead of "
                "mode='reduce-overhead'"
            )
        return hash_key(self.seed, self.layer, int(self.step.item()), self.stream, self.rank)


def key_value(key: int | StepKey) -> int:
    """An integer key as it is, a :class:`StepKey`'s value."""
    return key.value() if isinstance(key, StepKey) else key


_rank_override: int | None = None


def set_rounding_rank(rank: int | None) -> None:
    """Draw this process's stochastic rounding as data-parallel rank ``rank``; None (the default) reads
    ``torch.distributed``'s rank. For process groups where the data-parallel rank is not the global one, or to
    reproduce one rank's numbers in a single process."""
    global _rank_override
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
        raise ValueError(f"the rounding rank must be None or a non-negative integer, got {rank!r}")
    _rank_override = rank


def rounding_rank() -> int:
    """The rank in this process's hash keys: :func:`set_rounding_rank`'s, else ``torch.distributed.get_rank()``
    where a process group is initialised, else 0."""
    if _rank_override is not None:
        return _rank_override
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0


def hash_rounds(hash: str) -> int:
    """How many finalisers ``hash`` (one of :data:`HASHES`) applies to a number's index: 2 or 1."""
    if hash not in HASHES:
        raise ValueError(f"rounding_hash must be one of {list(HASHES)}, got {hash!r}")
    return 2 if hash == SPEC_HASH else 1


def _fmix32_numpy(h: np.ndarray) -> np.ndarray:
    # uint32 arithmetic wraps modulo 2**32 natively: the same function as fmix32, about 12x faster on a CPU
    h ^= h >> np.uint32(16)
    h *= np.uint32(FMIX_C1)
    h ^= h >> np.uint32(13)
    h *= np.uint32(FMIX_C2)
    h ^= h >> np.uint32(16)
    return h


def _uniform_of_indices(index: np.ndarray, key: int | StepKey, hash: str) -> torch.Tensor:
    # index: uint32, owned by the caller of this function (the hash works on it in place)
    h = _fmix32_numpy((_fmix32_numpy(index) if hash_rounds(hash) == 2 else index) ^ np.uint32(key_value(key)))
    return torch.from_numpy(h >> np.uint32(8)).to(torch.float32).mul_(2.0**-24)


def uniform_at(index: np.ndarray, key: int | StepKey, hash: str = SPEC_HASH) -> torch.Tensor:
    """float32 uniforms on the CPU at the given element indices (integers, taken mod 2**32): :func:`uniform`'s
    numbers element by element, for indices too far apart to draw a whole tensor. ``index`` is left as it was."""
    low = (np.asarray(index).astype(np.uint64) & np.uint64(MASK32)).astype(np.uint32)
    return _uniform_of_indices(low, key, hash)


def uniform(
    shape: torch.Size | tuple[int, ...],
    key: int | StepKey,
    device: torch.device | str = "cpu",
    hash: str = SPEC_HASH,
) -> torch.Tensor:
    """float32 uniforms in [0, 1) for every element of a tensor of ``shape`` (row-major indices), drawn by ``hash``
    (:data:`HASHES`). A :class:`StepKey` on a GPU is read there by the hot-kernels extension's kernel, without a copy
    to the host."""
    rounds = hash_rounds(hash)
    numel = 1
    for s in shape:
        numel *= int(s)
    device = torch.device(device)
    if device.type == "cpu":
        return _uniform_of_indices(np.arange(numel, dtype=np.uint32), key, hash).reshape(shape)
    from .backends import device_uniform  # here, not at the top: the backends import this module

    made = device_uniform(numel, key, device, hash)  # one kernel, where the extension is built (the same numbers)
    if made is not None:
        return made.reshape(shape)
    index = torch.arange(numel, dtype=torch.int64, device=device) & MASK32
    h = fmix32((fmix32(index) if rounds == 2 else index) ^ key_value(key))
    return ((h >> 8).to(torch.float32) * (2.0**-24)).reshape(shape)
