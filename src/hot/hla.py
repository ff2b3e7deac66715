"""Hadamard low-rank approximation (HLA) along the token axis: where its blocks sit, the basis, the projection.

A block is 16 positions read as a 4×4 window. Its basis is the 16 vectors ``v_ij = kron(w_i, w_j)`` with
``w_0..w_3`` the 4-point Walsh functions in sequency order, ``i`` along the window's rows and ``j`` along its
columns; they are the rows of ``H_16`` in another order. LP_L1 sorts (i, j) by (i + j, max(i, j), i) and
rank r keeps the first r. With ``P`` (r×16) those rows, one block contributes ``(P g_y)ᵀ (P x) / 16`` to g_w.

Which positions form a block (:class:`HLAWindows`, built by :func:`hla_windows`):

- ``spatial`` (the default): a sample is its prefix tokens (class, register, distillation) and then an
  H×W grid in raster order (a ViT's patches, a convolution's output pixels). The grid is zero-padded to
  multiples of 4 and cut into 4×4 windows. Prefix tokens are not projected: each is a row of its own,
  scaled by 4 = √16 so that the GEMM's division by 16 leaves its term ``g_yᵀ x`` exact.
- ``paper``: 16 consecutive positions (a 1×16 strip of a raster-ordered grid), samples zero-padded.
- ``official``: the authors' code, one strip of ``T & -T`` positions (the largest power of two dividing T).

Sequences without a known grid use ``paper``'s strips (the caller warns; see :mod:`hot.functional`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .hadamard import block_hadamard, hadamard_matrix, is_power_of_two

HLA_BLOCK = 16
HLA_WINDOW = 4  # side of a spatial window: 4 x 4 = HLA_BLOCK positions
PREFIX_SCALE = 4.0  # sqrt(HLA_BLOCK): a prefix row's (4 g)(4 x) / 16 is g x, exactly (powers of two)
BLOCKINGS = ("spatial", "paper", "official")


@dataclass(frozen=True)
class TokenGrid:
    """A sample's positions: ``prefix`` tokens, then a ``height`` × ``width`` grid in raster order."""

    prefix: int
    height: int
    width: int

    def __post_init__(self) -> None:
        for name in ("prefix", "height", "width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"TokenGrid.{name} must be an integer, got {value!r}")
        if self.prefix < 0 or self.height < 1 or self.width < 1:
            raise ValueError(f"a token grid needs prefix >= 0 and a grid of at least 1x1, got {self}")

    @property
    def tokens(self) -> int:
        return self.prefix + self.height * self.width

    def describe(self) -> str:
        return f"{self.prefix} prefix + {self.height}x{self.width} grid = {self.tokens} tokens"


@dataclass(frozen=True)
class HLAWindows:
    """Where HLA's blocks read one sample's positions: ``prefix`` exact rows, then an ``height`` × ``width``
    raster grid cut into ``window_h`` × ``window_w`` windows (the grid zero-padded to whole windows).
    ``paper`` and ``official`` are 1-row grids of 1 × block windows."""

    prefix: int
    height: int
    width: int
    window_h: int
    window_w: int

    def __post_init__(self) -> None:
        if not is_power_of_two(self.block):
            raise ValueError(f"HLA window {self.window_h}x{self.window_w} is not a power-of-two block")

    @property
    def tokens(self) -> int:
        """Positions per sample (T)."""
        return self.prefix + self.height * self.width

    @property
    def block(self) -> int:
        """Positions per window (the Hadamard size along L)."""
        return self.window_h * self.window_w

    @property
    def grid_windows(self) -> tuple[int, int]:
        """Windows along the grid's rows and columns (after zero padding)."""
        return -(-self.height // self.window_h), -(-self.width // self.window_w)

    @property
    def windows(self) -> int:
        """Windows per sample."""
        rows, cols = self.grid_windows
        return rows * cols

    def rows_per_sample(self, rank: int) -> int:
        """Projected rows per sample: the kept basis rows of every window, and one row per prefix token."""
        return self.windows * len(block_rows(self.block, rank)) + self.prefix

    @functools.cached_property
    def index_map(self) -> torch.Tensor:
        """(windows, block) int64: the sample position each window slot reads, -1 where it is padding.
        Slot ``k`` of a window is its row ``k // window_w``, column ``k % window_w``."""
        rows, cols = self.grid_windows
        r = torch.arange(rows * self.window_h).reshape(rows, self.window_h, 1, 1)
        c = torch.arange(cols * self.window_w).reshape(1, 1, cols, self.window_w)
        pos = self.prefix + r * self.width + c
        pos = torch.where((r < self.height) & (c < self.width), pos, torch.full_like(pos, -1))
        return pos.permute(0, 2, 1, 3).reshape(rows * cols, self.block)

    def device_maps(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The index map on ``device``, made once per device (a copy per call would wait for the device):
        every slot's position with padding pointing at position T (a zero row), and the slots that are not
        padding with the positions they read."""
        key = str(device)
        if key not in self._on_device:
            flat = self.index_map.reshape(-1)
            inside = torch.nonzero(flat >= 0).flatten()
            gather = torch.where(flat < 0, self.tokens, flat)
            self._on_device[key] = (gather.to(device), inside.to(device), flat[inside].to(device))
        return self._on_device[key]

    @functools.cached_property
    def _on_device(self) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        return {}


@functools.cache
def hla_windows(tokens: int, blocking: str, grid: TokenGrid | None = None) -> HLAWindows:
    """The blocks of a sample of ``tokens`` positions under ``blocking``.

    ``spatial`` needs ``grid`` (else it reads 1×16 strips, as ``paper``); a grid that does not account
    for ``tokens`` is an error. ``paper`` and ``official`` ignore the grid.
    """
    if not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"a sample needs at least one position, got T = {tokens!r}")
    if blocking == "spatial" and grid is not None:
        if grid.tokens != tokens:
            raise ValueError(f"token grid ({grid.describe()}) does not match T = {tokens}")
        return HLAWindows(grid.prefix, grid.height, grid.width, HLA_WINDOW, HLA_WINDOW)
    if blocking in ("spatial", "paper"):
        return HLAWindows(0, 1, tokens, 1, HLA_BLOCK)
    if blocking == "official":
        return HLAWindows(0, 1, tokens, 1, official_block(tokens))
    raise ValueError(f"hla_blocking must be one of {list(BLOCKINGS)}, got {blocking!r}")


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
    if not isinstance(rank, int) or not 1 <= rank <= HLA_BLOCK:
        raise ValueError(f"HLA rank must be in 1..16, got {rank!r}")
    walsh = sequency_order(4)  # w_i is row walsh[i] of H_4, and kron(H_4[a], H_4[b]) = H_16[4a + b]
    return tuple(4 * walsh[i] + walsh[j] for i, j in lp_l1_pairs()[:rank])


def hla_basis(
    rank: int, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu", block: int = HLA_BLOCK
) -> torch.Tensor:
    """The explicit projection ``P`` (kept rows × ``block``), ±1 entries: the rows :func:`block_rows` keeps."""
    return hadamard_matrix(block, dtype, device)[list(block_rows(block, rank))]


@functools.cache
def _rows_on(block: int, rank: int, device: str) -> torch.Tensor:
    """:func:`block_rows` as an index tensor made once per device (indexing with a list copies it to the device,
    and that copy waits for the device, on every call)."""
    with torch.inference_mode(False):  # a cached inference tensor could not be saved for a later backward
        return torch.tensor(block_rows(block, rank), device=device)


@functools.cache
def _basis_on(block: int, rank: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """:func:`hla_basis` made once per device (the float methods use it on every layer's backward)."""
    with torch.inference_mode(False):
        return hla_basis(rank, dtype, device, block)


def official_block(tokens: int) -> int:
    """The authors' HLA block: the largest power of two dividing T, with no cap (1 for T = 197)."""
    return tokens & -tokens


def block_rows(block: int, rank: int) -> tuple[int, ...]:
    """Rows of ``H_block`` kept: LP_L1 for 16, else the lowest-sequency ``round(rank·block/16)`` (at least 1)."""
    if block == HLA_BLOCK:
        return lp_l1_rows(rank)
    keep = max(1, round(rank * block / HLA_BLOCK))
    return tuple(sequency_order(block)[:keep])


def projected_rows(length: int, windows: HLAWindows, rank: int) -> int:
    """Rows of :func:`hla_project` of an (L, C) tensor: samples × (windows × kept rows + prefix tokens)."""
    return (length // windows.tokens) * windows.rows_per_sample(rank)


def _check_length(t: torch.Tensor, windows: HLAWindows) -> tuple[int, int]:
    if t.dim() != 2:
        raise ValueError(f"HLA expects a 2-D (L, C) tensor, got shape {tuple(t.shape)}")
    length, channels = t.shape
    if length % windows.tokens != 0:
        raise ValueError(f"L = {length} is not a whole number of samples of T = {windows.tokens} positions")
    return length // windows.tokens, channels


def gather_windows(t: torch.Tensor, windows: HLAWindows) -> torch.Tensor:
    """(samples, windows, block, C): each window's positions of a (L, C) tensor, zeros where padded."""
    samples, channels = _check_length(t, windows)
    x = F.pad(t.reshape(samples, windows.tokens, channels), (0, 0, 0, 1))  # position T: the zero row
    index, _, _ = windows.device_maps(t.device)
    return x[:, index].reshape(samples, windows.windows, windows.block, channels)


def hla_project(t: torch.Tensor, windows: HLAWindows, rank: int) -> torch.Tensor:
    """Project a (L, C) tensor along L onto the kept Hadamard rows of each window of each sample.

    Returns (samples · windows · kept + samples · prefix, C): first row ``(sample · windows + window) ·
    kept + basis``, then each sample's prefix tokens times :data:`PREFIX_SCALE`. Padding positions are
    zeros (they add nothing to g_w), so ``hla_project(g_y)ᵀ hla_project(x) / block`` approximates
    ``g_yᵀ x`` and is exact on the prefix tokens.
    """
    _, channels = _check_length(t, windows)
    rows = _rows_on(windows.block, rank, str(t.device))
    x = block_hadamard(gather_windows(t, windows), windows.block, dim=2).index_select(2, rows).reshape(-1, channels)
    return _with_prefix_rows(x, t, windows)


def _with_prefix_rows(projected: torch.Tensor, t: torch.Tensor, windows: HLAWindows) -> torch.Tensor:
    """The windows' projected rows, then each sample's prefix tokens of ``t`` times :data:`PREFIX_SCALE`."""
    if not windows.prefix:
        return projected
    samples, channels = _check_length(t, windows)
    prefix = t.reshape(samples, windows.tokens, channels)[:, : windows.prefix] * PREFIX_SCALE
    return torch.cat([projected, prefix.reshape(-1, channels)])


# The float methods' projection as a GEMM with P up to this block; larger blocks (``official`` blocking of long
# power-of-two sequences) keep the butterflies: a dense (block/2 × block) P costs O(block²) a window.
MATMUL_MAX_BLOCK = HLA_BLOCK


def hla_project_matmul(t: torch.Tensor, windows: HLAWindows, rank: int) -> torch.Tensor:
    """:func:`hla_project` as one batched GEMM with ``P`` (:func:`hla_basis`): the same rows in the same order, equal
    up to float rounding (and TF32's where it is enabled for float32 GEMMs). The floating-point methods (LBP-WHT,
    the HLA filter) use it; HOT's quantised path keeps :func:`hla_project`, whose butterfly order the kernels
    reproduce bit for bit. Blocks above :data:`MATMUL_MAX_BLOCK` are projected by :func:`hla_project`."""
    if windows.block > MATMUL_MAX_BLOCK:
        return hla_project(t, windows, rank)
    samples, channels = _check_length(t, windows)
    basis = _basis_on(windows.block, rank, t.dtype, str(t.device))
    coeffs = torch.matmul(basis, gather_windows(t, windows).reshape(samples * windows.windows, windows.block, channels))
    return _with_prefix_rows(coeffs.reshape(-1, channels), t, windows)


def hla_unproject(p: torch.Tensor, windows: HLAWindows, rank: int, butterflies: bool = False) -> torch.Tensor:
    """``Pᵀ p / block`` back at each window's positions, for rows laid out as :func:`hla_project`'s (prefix rows
    divided by :data:`PREFIX_SCALE`): ``hla_unproject(hla_project(t) @ W)`` is ``hla_lowpass(t) @ W`` with the GEMM
    on the projected rows only. ``butterflies``: ``H`` applied as :func:`block_hadamard`'s butterflies (the order
    the kernels add in) at every block, not as a GEMM with ``Pᵀ`` up to :data:`MATMUL_MAX_BLOCK`."""
    rows = windows.rows_per_sample(rank)
    if p.dim() != 2 or p.shape[0] % rows:
        raise ValueError(f"expected (samples x {rows}, C) projected rows, got shape {tuple(p.shape)}")
    block, kept = windows.block, len(block_rows(windows.block, rank))
    per_sample = windows.windows * kept
    samples, channels = p.shape[0] // rows, p.shape[1]
    coeffs = p[: samples * per_sample].reshape(samples * windows.windows, kept, channels)
    # H is symmetric: Pᵀ c is H times c placed at the kept rows, zeros elsewhere
    if butterflies or block > MATMUL_MAX_BLOCK:
        full = coeffs.new_zeros(samples * windows.windows, block, channels)
        full.index_copy_(1, _rows_on(block, rank, str(p.device)), coeffs)
        back = block_hadamard(full, block, dim=1)
    else:
        back = torch.matmul(_basis_on(block, rank, p.dtype, str(p.device)).t(), coeffs)
    back = back.reshape(samples, windows.windows * block, channels) / block
    out = p.new_empty(samples, windows.tokens, channels)
    if windows.prefix:
        out[:, : windows.prefix] = p[samples * per_sample :].reshape(samples, windows.prefix, channels) / PREFIX_SCALE
    _, slots, positions = windows.device_maps(p.device)
    out[:, positions] = back[:, slots]
    return out.reshape(-1, channels)


def hla_lowpass(t: torch.Tensor, windows: HLAWindows, rank: int) -> torch.Tensor:
    """``Pᵀ P t / block`` on each window (the orthogonal projection onto the kept rows), prefix tokens as they are:
    what LBP-WHT's g_x estimate applies to g_y (the method computes it as :func:`hla_unproject` of a GEMM)."""
    return hla_unproject(hla_project_matmul(t, windows, rank), windows, rank)
