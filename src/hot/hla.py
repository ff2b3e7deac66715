"""Hadamard low-rank approximation (HLA) along the token axis: the LP_L1 basis and the projection.

A block of 16 consecutive positions is read as a 4×4 patch. Its basis is the 16 vectors
``v_ij = kron(w_i, w_j)`` with ``w_0..w_3`` the 4-point Walsh functions in sequency order; they are
the rows of ``H_16`` in another order. LP_L1 sorts (i, j) by (i + j, max(i, j), i) and rank r keeps
the first r. With ``P`` (r×16) those rows, one block contributes ``(P g_y)ᵀ (P x) / 16`` to g_w.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from .hadamard import block_hadamard, hadamard_matrix, is_power_of_two

HLA_BLOCK = 16
BLOCKINGS = ("paper", "official")


@functools.cache
def sequency_order(n: int) -> tuple[int, ...]:
    """Row indices of Sylvester ``H_n`` sorted by sequency (number of sign changes).

    Plain integers, no tensors: ``H_n[i, j] = (-1)^popcount(i & j)``, so tracing (torch.compile's fake
    tensors) never has to read tensor data here.
    """
    if not is_power_of_two(n):
        raise ValueError(f"Hadamard size must be a power of two, got n={n}")

    def negative(i: int, j: int) -> bool:
        return bin(i & j).count("1") % 2 == 1

    changes = [sum(negative(i, j) != negative(i, j + 1) for j in range(n - 1)) for i in range(n)]
    return tuple(sorted(range(n), key=changes.__getitem__))


@functools.cache
def lp_l1_pairs() -> tuple[tuple[int, int], ...]:
    """All 16 (i, j) in LP_L1 order: by (i + j, max(i, j), i)."""
    pairs = [(i, j) for i in range(4) for j in range(4)]
    return tuple(sorted(pairs, key=lambda p: (p[0] + p[1], max(p), p[0])))


@functools.cache
def lp_l1_rows(rank: int) -> tuple[int, ...]:
    """Rows of ``H_16`` that ``v_ij`` of the first ``rank`` LP_L1 pairs are, in that order."""
    if not 1 <= rank <= HLA_BLOCK:
        raise ValueError(f"HLA rank must be in 1..16, got {rank}")
    walsh = sequency_order(4)  # w_i is row walsh[i] of H_4, and kron(H_4[a], H_4[b]) = H_16[4a + b]
    return tuple(4 * walsh[i] + walsh[j] for i, j in lp_l1_pairs()[:rank])


def hla_basis(rank: int, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> torch.Tensor:
    """The explicit projection ``P`` (rank × 16), ±1 entries. Tests and documentation use it; the hot path does not."""
    return hadamard_matrix(HLA_BLOCK, dtype, device)[list(lp_l1_rows(rank))]


def official_block(tokens: int) -> int:
    """The authors' HLA block: the largest power of two dividing T, with no cap (1 for T = 197)."""
    return tokens & -tokens


def block_rows(block: int, rank: int) -> tuple[int, ...]:
    """Rows of ``H_block`` kept: LP_L1 for 16, else the lowest-sequency ``round(rank·block/16)`` (at least 1)."""
    if block == HLA_BLOCK:
        return lp_l1_rows(rank)
    keep = max(1, round(rank * block / HLA_BLOCK))
    return tuple(sequency_order(block)[:keep])


def hla_block(tokens: int, blocking: str) -> int:
    if blocking == "paper":
        return HLA_BLOCK
    if blocking == "official":
        return official_block(tokens)
    raise ValueError(f"hla_blocking must be one of {BLOCKINGS}, got {blocking!r}")


def projected_rows(length: int, tokens: int, rank: int, blocking: str = "paper") -> int:
    """Rows of :func:`hla_project` of an (L, C) tensor: per sample, ceil(T / block) blocks × the kept rows (≈ L/2)."""
    block = hla_block(tokens, blocking)
    return (length // tokens) * -(-tokens // block) * len(block_rows(block, rank))


def hla_project(t: torch.Tensor, tokens: int, rank: int, blocking: str = "paper") -> torch.Tensor:
    """Project a (L, C) tensor along L, per sample of ``tokens`` positions, onto the kept Hadamard rows.

    Each sample is zero-padded to a multiple of the block (zero rows add nothing to g_w, so padding is
    exact). Returns (samples · blocks · kept, C) with row ``(sample · blocks + block) · kept + basis``:
    ``hla_project(g_y)ᵀ hla_project(x) / block`` approximates ``g_yᵀ x``.
    """
    if t.dim() != 2:
        raise ValueError(f"hla_project expects a 2-D (L, C) tensor, got shape {tuple(t.shape)}")
    length, channels = t.shape
    if tokens < 1 or length % tokens != 0:
        raise ValueError(f"L = {length} is not a whole number of samples of T = {tokens} positions")
    block = hla_block(tokens, blocking)
    rows = block_rows(block, rank)
    x = t.reshape(length // tokens, tokens, channels)
    pad = (-tokens) % block
    if pad:
        x = F.pad(x, (0, 0, 0, pad))
    x = block_hadamard(x, block, dim=1)
    x = x.reshape(x.shape[0], -1, block, channels)[:, :, list(rows)]
    return x.reshape(-1, channels)
