"""Block Hadamard transforms (unnormalised Sylvester matrices), by the fast Walsh-Hadamard butterfly."""

from __future__ import annotations

import torch


def is_power_of_two(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def hadamard_matrix(n: int, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> torch.Tensor:
    """Dense Sylvester ``H_n`` with ±1 entries (``H_n H_nᵀ = n I``). For tests and small projections only."""
    if not is_power_of_two(n):
        raise ValueError(f"Hadamard size must be a power of two, got n={n}")
    h = torch.ones(1, 1, dtype=dtype, device=device)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def largest_block(size: int, cap: int) -> int:
    """Largest power of two dividing ``size``, at most ``cap`` (O=100, cap 16 -> 4)."""
    n = 1
    while n < cap and size % (2 * n) == 0:
        n *= 2
    return n


def block_hadamard(x: torch.Tensor, n: int, dim: int = -1) -> torch.Tensor:
    """Multiply consecutive chunks of ``n`` elements along ``dim`` by ``H_n`` (``I ⊗ H_n``).

    The butterfly runs stages h = 1, 2, 4, ..., n/2, each replacing pairs (a, b) at distance h by
    (a + b, a - b). That fixed order of float additions is part of the definition: the CUDA kernels
    use the same order and so produce bit-identical results. Each stage writes straight into the halves
    of the next buffer (``out=``), so it is not differentiable: gradient estimators call it inside backward.
    """
    if not is_power_of_two(n):
        raise ValueError(f"Hadamard block size must be a power of two, got n={n}")
    size = x.shape[dim]
    if size % n != 0:
        raise ValueError(f"dimension {dim} of size {size} is not a multiple of the Hadamard block size {n}")
    if n == 1:
        return x
    moved = x.movedim(dim, -1)
    lead = moved.shape[:-1]
    src = moved.reshape(-1, size // n, n)
    buffers = (
        torch.empty(src.shape, dtype=x.dtype, device=x.device),
        torch.empty(src.shape, dtype=x.dtype, device=x.device),
    )
    h, stage = 1, 0
    while h < n:
        pairs = src.reshape(-1, size // n, n // (2 * h), 2, h)
        dst = buffers[stage % 2]
        halves = dst.view(-1, size // n, n // (2 * h), 2, h)
        torch.add(pairs[..., 0, :], pairs[..., 1, :], out=halves[..., 0, :])
        torch.sub(pairs[..., 0, :], pairs[..., 1, :], out=halves[..., 1, :])
        src, h, stage = dst, 2 * h, stage + 1
    return src.reshape(*lead, size).movedim(-1, dim)
