"""The CUTLASS 3.x sm_90a INT8 GEMM (`_C.cutlass_gemm_s8_sm90`): exact int32 products for every kernel variant
and K decomposition, HOT's g_w shapes included, CUDA-graph capture, and clear errors on bad inputs; and the same
GEMM with the dequantisation in its epilogue (`_C.cutlass_gemm_s8_sm90_dequant`), bit for bit `dequantize`'s."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
import torch

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")

# (variant, decomposition, splits): cooperative 128x128x128 heuristic / data-parallel / stream-K / split-K 2 and 3,
# ping-pong 64x128x128 (data-parallel).
CONFIGS = [(0, 0, 1), (0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 3, 3), (1, 0, 1)]
# HOT's weight-gradient shapes (M, N, K), then small and ragged ones (partial tiles in M, N and K).
SHAPES = [
    (2304, 768, 12608),
    (768, 3072, 12608),
    (3072, 768, 12608),
    (128, 256, 64),
    (256, 128, 1024),
    (200, 132, 80),
    (1, 4, 16),
    (129, 260, 12608),
]


def _extension():
    """hot_kernels._C with the sm90 GEMM's entry points; skips without a GPU or with an older build."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    hot_kernels = pytest.importorskip("hot_kernels", reason="hot-kernels extension not built")
    if not hasattr(hot_kernels._C, "cutlass_gemm_s8_sm90"):
        pytest.skip("extension built before the sm90 GEMM existed")
    return hot_kernels._C


@pytest.fixture(scope="module")
def ops():
    """hot_kernels._C on a compute capability 9.x GPU with the sm_90a GEMM built in; skips otherwise."""
    ops = _extension()
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm_90a GEMM needs a Hopper GPU (compute capability 9.x)")
    if not ops.cutlass_sm90_available():
        pytest.skip("extension not built for sm_90a (TORCH_CUDA_ARCH_LIST with 9.0 and CUDA 12+)")
    return ops


def _codes(rows: int, cols: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(-127, 128, (rows, cols), generator=gen, dtype=torch.int8).to(CUDA)


def _exact(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A · Bᵀ exactly: float64 holds every partial sum (|sum| <= 127² · K < 2^53), whatever the GPU's order."""
    return (a.double() @ b.double().t()).long()


@pytest.mark.parametrize(("variant", "decomposition", "splits"), CONFIGS)
@pytest.mark.parametrize(("m", "n", "k"), SHAPES)
def test_sm90_gemm_exact(ops, m: int, n: int, k: int, variant: int, decomposition: int, splits: int) -> None:
    a, b = _codes(m, k, m * 7 + k), _codes(n, k, n * 11 + k)
    d = ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits)
    assert d.dtype == torch.int32 and d.shape == (m, n) and d.is_contiguous()
    ref = _exact(a, b)
    mismatch = (d.long() != ref).sum().item()
    assert mismatch == 0, f"{mismatch} of {d.numel()} outputs differ"
    # Stream-K/split-K reduce int32 partials in any order: repeated calls give the same bits.
    assert torch.equal(ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits), d)


@pytest.mark.parametrize(("m", "n", "k"), [(128, 256, 64), (256, 128, 1024), (200, 132, 80)])
def test_sm90_gemm_matches_cpu_int64(ops, m: int, n: int, k: int) -> None:
    a, b = _codes(m, k, 3 * m), _codes(n, k, 5 * n)
    d = ops.cutlass_gemm_s8_sm90(a, b)
    assert torch.equal(d.cpu().long(), a.cpu().long() @ b.cpu().long().t())


@pytest.mark.parametrize("variant", [0, 1])
def test_sm90_gemm_extremes(ops, variant: int) -> None:
    """|sum| = 127² · 12608 ≈ 2.03e8: no saturation or rounding anywhere; -128 is accepted too."""
    m, n, k = 256, 256, 12608
    a = torch.full((m, k), -127, dtype=torch.int8, device=CUDA)
    b = torch.full((n, k), 127, dtype=torch.int8, device=CUDA)
    b[1::2] = -128
    d = ops.cutlass_gemm_s8_sm90(a, b, variant)
    assert torch.equal(d.long(), _exact(a, b))
    assert d[0, 0].item() == -127 * 127 * k and d[0, 1].item() == 127 * 128 * k


def test_sm90_gemm_matches_int_mm(ops) -> None:
    """Same int32 result as the cuBLASLt path it is to replace (torch._int_mm, TN)."""
    a, b = _codes(768, 12608, 1), _codes(3072, 12608, 2)
    assert torch.equal(ops.cutlass_gemm_s8_sm90(a, b), torch._int_mm(a, b.t()))


def test_sm90_gemm_empty(ops) -> None:
    a, b = _codes(0, 64, 1), _codes(8, 64, 2)
    assert ops.cutlass_gemm_s8_sm90(a, b).shape == (0, 8)
    no_k = torch.empty(12, 0, dtype=torch.int8, device=CUDA)
    z = ops.cutlass_gemm_s8_sm90(no_k[:4], no_k[4:])
    assert z.shape == (4, 8) and not z.any()


@pytest.mark.parametrize(("variant", "decomposition", "splits"), [(0, 0, 1), (0, 2, 1), (1, 0, 1)])
def test_sm90_gemm_cuda_graph(ops, variant: int, decomposition: int, splits: int) -> None:
    """Capturable (the stream-K workspace is zeroed by a memset on the stream) and replays exactly."""
    a, b = _codes(2304, 12608, 4), _codes(768, 12608, 5)
    ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        d = ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits)
    a.copy_(_codes(2304, 12608, 6))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(d.long(), _exact(a, b))


def test_sm90_gemm_errors(ops) -> None:
    a, b = _codes(64, 128, 1), _codes(96, 128, 2)
    with pytest.raises(ValueError, match="a contiguous K must be a multiple of 16"):
        ops.cutlass_gemm_s8_sm90(_codes(64, 120, 1), _codes(96, 120, 2))
    with pytest.raises(ValueError, match=r"got strides \(136, 1\) and \(128, 1\)"):  # a pitch of 136 bytes
        ops.cutlass_gemm_s8_sm90(_codes(64, 136, 1)[:, :120], _codes(96, 128, 2)[:, :120])
    with pytest.raises(ValueError, match="N a multiple of 4"):
        ops.cutlass_gemm_s8_sm90(a, _codes(98, 128, 2))
    with pytest.raises(ValueError, match="must agree in K"):
        ops.cutlass_gemm_s8_sm90(a, _codes(96, 144, 2))
    with pytest.raises(ValueError, match="must be Char"):
        ops.cutlass_gemm_s8_sm90(a.float(), b)
    with pytest.raises(ValueError, match="CUDA tensor"):
        ops.cutlass_gemm_s8_sm90(a.cpu(), b.cpu())
    with pytest.raises(ValueError, match="contiguous"):
        ops.cutlass_gemm_s8_sm90(_codes(128, 64, 1).t(), b)
    with pytest.raises(ValueError, match="16-byte aligned"):
        ops.cutlass_gemm_s8_sm90(_codes(1, 64 * 65, 1).reshape(-1)[1 : 1 + 63 * 64].reshape(63, 64), _codes(96, 64, 2))
    for variant, decomposition, splits in [(2, 0, 1), (1, 2, 1), (0, 3, 1), (0, 4, 1), (-1, 0, 1)]:
        with pytest.raises(ValueError, match="invalid sm90 GEMM configuration"):
            ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits)


def _scales(count: int, vector: bool, seed: int) -> torch.Tensor:
    """Positive float32 scales over 80 binades, so that the two products round in every way a normal float does."""
    gen = torch.Generator().manual_seed(seed)
    n = count if vector else 1
    scale = (torch.rand(n, generator=gen) + 0.5) * torch.exp2(torch.randint(-60, 20, (n,), generator=gen).float())
    return scale.to(CUDA)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


# (variant, decomposition, splits) of the dequantising GEMM: the route's two kernels and stream-K's reduction.
DEQUANT_CONFIGS = [(0, 0, 1), (0, 2, 1), (1, 0, 1)]
DEQUANT_SHAPES = [(200, 132, 80), (1, 4, 16), (768, 1024, 32), (129, 260, 1568), (2304, 768, 12608)]


@pytest.mark.parametrize(("variant", "decomposition", "splits"), DEQUANT_CONFIGS)
@pytest.mark.parametrize(("m", "n", "k"), DEQUANT_SHAPES)
@pytest.mark.parametrize(("row_vec", "col_vec"), [(True, True), (False, True), (True, False), (False, False)])
def test_sm90_dequant_epilogue_equals_dequantize(
    ops, m: int, n: int, k: int, variant: int, decomposition: int, splits: int, row_vec: bool, col_vec: bool
) -> None:
    """The scales applied in the epilogue give `dequantize`'s bits for every element: (acc · row) · (col / 16)."""
    a, b = _codes(m, k, m + 3 * k), _codes(n, k, n + 5 * k)
    row, col = _scales(m, row_vec, m), _scales(n, col_vec, n + 1)
    got = ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, variant, decomposition, splits)
    want = ops.dequantize(ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits), row, col, 16.0)
    assert got.dtype == torch.float32 and got.shape == (m, n) and got.is_contiguous()
    mismatch = (_bits(got) != _bits(want)).sum().item()
    assert mismatch == 0, f"{mismatch} of {got.numel()} outputs differ"


@pytest.mark.parametrize(("variant", "decomposition", "splits"), DEQUANT_CONFIGS)
def test_sm90_dequant_epilogue_keeps_subnormal_outputs(ops, variant: int, decomposition: int, splits: int) -> None:
    """Scales small enough that many outputs are subnormal (and some round to zero): the epilogue flushes none that
    `dequantize` keeps, and rounds each as it does."""
    m, n, k = 200, 132, 80
    a, b = _codes(m, k, 11), _codes(n, k, 12)
    gen = torch.Generator().manual_seed(13)
    row = (torch.rand(m, generator=gen) + 0.5) * torch.exp2(torch.randint(-80, -60, (m,), generator=gen).float())
    col = (torch.rand(n, generator=gen) + 0.5) * torch.exp2(torch.randint(-80, -60, (n,), generator=gen).float())
    row, col = row.to(CUDA), col.to(CUDA)
    got = ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, variant, decomposition, splits)
    want = ops.dequantize(ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits), row, col, 16.0)
    subnormal = ((want != 0) & (want.abs() < torch.finfo(torch.float32).tiny)).sum().item()
    assert subnormal > got.numel() // 10, f"only {subnormal} subnormal outputs: the test would not see a flush"
    mismatch = (_bits(got) != _bits(want)).sum().item()
    assert mismatch == 0, f"{mismatch} of {got.numel()} outputs differ"


@contextlib.contextmanager
def _sm90_setting(set_on: Callable[[bool], None], enabled: bool) -> Iterator[None]:
    """Within: one process-wide switch of the sm90 GEMMs (``set_on``, e.g. ``ops.set_sm90_balanced_grid``) set to
    ``enabled``; on again after (the default of each), whatever happens inside."""
    set_on(enabled)
    try:
        yield
    finally:
        set_on(True)


@pytest.mark.parametrize(("m", "n", "k"), [(1536, 768, 32), (3072, 768, 144), (2304, 768, 12608), (200, 132, 80)])
def test_the_balanced_pingpong_grid_gives_the_full_grids_bits(ops, m: int, n: int, k: int) -> None:
    """The ping-pong kernel on the fewest clusters that take the full grid's waves (more tiles a CTA where the
    tiles exceed one wave), and on CUTLASS's full grid: the same exact products and dequantised bits."""
    a, b = _codes(m, k, m + k), _codes(n, k, n + 7 * k)
    row, col = _scales(m, True, m), _scales(n, True, n + 2)
    balanced = ops.cutlass_gemm_s8_sm90(a, b, 1), ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, 1)
    with _sm90_setting(ops.set_sm90_balanced_grid, False):
        full = ops.cutlass_gemm_s8_sm90(a, b, 1), ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, 1)
    assert torch.equal(balanced[0], _exact(a, b).int()) and torch.equal(full[0], balanced[0])
    assert torch.equal(_bits(full[1]), _bits(balanced[1]))


@pytest.mark.parametrize("dequant", [False, True])
def test_the_pingpong_kernel_launches_the_balanced_grid(ops, dequant: bool) -> None:
    """The grid CUTLASS's scheduler makes of the ping-pong kernel's arguments: 2 · sm90_pingpong_clusters CTAs, and
    with the balance off the full grid, a cluster on every SM pair up to the tiles (both raster orders: tall and wide
    products); the cooperative kernel's grid is its own either way."""
    sms = torch.cuda.get_device_properties(CUDA).multi_processor_count
    checked = 0
    for m, n, k in [(1536, 768, 32), (3072, 768, 144), (768, 3072, 112), (2304, 768, 128), (64, 256, 1568)]:
        a, b = _codes(m, k, 1), _codes(n, k, 2)
        tiles = -(-m // 128) * -(-n // 128)
        balanced = ops.cutlass_gemm_s8_sm90_ctas(a, b, 1, dequant)
        coop = ops.cutlass_gemm_s8_sm90_ctas(a, b, 0, dequant)
        with _sm90_setting(ops.set_sm90_balanced_grid, False):
            full = ops.cutlass_gemm_s8_sm90_ctas(a, b, 1, dequant)
            assert ops.cutlass_gemm_s8_sm90_ctas(a, b, 0, dequant) == coop
        assert balanced == 2 * ops.sm90_pingpong_clusters(m, n, sms), (m, n, balanced)
        assert full == 2 * min(sms // 2, tiles), (m, n, full)
        checked += balanced < full
    assert checked >= 3  # the shapes beyond one wave launch fewer CTAs


@pytest.mark.parametrize("divisor", [1.0, 8.0, 0.5])
def test_sm90_dequant_epilogue_other_power_of_two_divisors(ops, divisor: float) -> None:
    a, b = _codes(130, 1568, 1), _codes(96, 1568, 2)
    row, col = _scales(130, True, 3), _scales(96, True, 4)
    got = ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, divisor, 1)
    assert torch.equal(_bits(got), _bits(ops.dequantize(ops.cutlass_gemm_s8_sm90(a, b, 1), row, col, divisor)))


def test_sm90_dequant_epilogue_reads_unaligned_and_strided_scales(ops) -> None:
    """Scale vectors at a 4-byte offset or strided are copied to what the epilogue's 16-byte loads need."""
    m, n, k = 136, 200, 256
    a, b = _codes(m, k, 1), _codes(n, k, 2)
    row_store, col_store = _scales(m + 1, True, 3), _scales(2 * n, True, 4)
    row, col = row_store[1:], col_store[::2]
    got = ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, 1)
    want = ops.dequantize(ops.cutlass_gemm_s8_sm90(a, b), row.contiguous(), col.contiguous(), 16.0)
    assert torch.equal(_bits(got), _bits(want))


def test_sm90_dequant_epilogue_cuda_graph_and_empty(ops) -> None:
    a, b = _codes(384, 1568, 4), _codes(96, 1568, 5)
    row, col = _scales(384, True, 6), _scales(1, False, 7)
    ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, 1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        d = ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, 1)
    a.copy_(_codes(384, 1568, 8))
    row.copy_(_scales(384, True, 9))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(_bits(d), _bits(ops.dequantize(ops.cutlass_gemm_s8_sm90(a, b), row, col, 16.0)))
    no_k = torch.empty(12, 0, dtype=torch.int8, device=CUDA)
    z = ops.cutlass_gemm_s8_sm90_dequant(no_k[:4], no_k[4:], _scales(4, True, 1), _scales(8, True, 2), 16.0)
    assert z.shape == (4, 8) and z.dtype == torch.float32 and not z.any()


def test_sm90_dequant_epilogue_errors(ops) -> None:
    a, b = _codes(64, 128, 1), _codes(96, 128, 2)
    row, col = _scales(64, True, 1), _scales(96, True, 2)
    with pytest.raises(ValueError, match="power-of-two divisor"):
        ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 12.0)
    with pytest.raises(ValueError, match="row scale has 63 elements, expected 1 or 64"):
        ops.cutlass_gemm_s8_sm90_dequant(a, b, row[:63], col, 16.0)
    with pytest.raises(ValueError, match="column scale has 95 elements, expected 1 or 96"):
        ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col[:95], 16.0)
    with pytest.raises(ValueError, match="column scale"):
        ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col.double(), 16.0)
    with pytest.raises(ValueError, match="N a multiple of 4"):
        ops.cutlass_gemm_s8_sm90_dequant(a, _codes(98, 128, 2), row, _scales(98, True, 2), 16.0)


def test_the_int8_sm90_route_takes_the_dequantising_gemm(ops) -> None:
    """int_matmul's "int8_sm90" route (ping-pong below 2^30 multiply-adds, cooperative above) gives the bits of the
    int32 GEMM then `dequantize`, which is what the other routes give; the profiler shows no dequantize kernel."""
    for m, n, k in [(384, 96, 1568), (2304, 768, 12608)]:
        a, b = _codes(m, k, m), _codes(n, k, n)
        row, col = _scales(m, True, 1), _scales(1, False, 2)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            got = ops.int_matmul(a, b, row, col, 16.0, "int8_sm90")
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        assert names and not any("dequantize" in name for name in names), names
        want = ops.dequantize(torch._int_mm(a, b.t()), row, col, 16.0)
        assert torch.equal(_bits(got), _bits(want))


def _at_pitch(rows: int, k: int, pitch: int, seed: int) -> torch.Tensor:
    """int8 codes (rows, k) whose rows lie `pitch` bytes apart, the bytes past k random too (not zeros)."""
    return _codes(rows, pitch, seed)[:, :k]


@pytest.mark.parametrize(("variant", "decomposition", "splits"), [(0, 0, 1), (0, 2, 1), (0, 3, 2), (1, 0, 1)])
@pytest.mark.parametrize(
    ("m", "n", "k", "extra"),
    [(200, 132, 104, 0), (64, 96, 392, 16), (129, 260, 8, 0), (33, 4, 1, 32), (768, 1024, 13304, 0)],
)
def test_sm90_gemm_reads_rows_at_their_pitch(ops, m, n, k, extra, variant, decomposition, splits) -> None:
    """Operands whose rows lie at a pitch of a multiple of 16 bytes are read where they lie, K any (an HLA
    quantiser's codes): TMA fills the last K tile past K with zeros, so the bytes between K and the pitch, random
    here, add nothing. Both kernels, the stream-K and split-K reductions, int32 and the dequantising epilogue."""
    pitch = (k + 15) // 16 * 16 + extra
    a, b = _at_pitch(m, k, pitch, k), _at_pitch(n, k, pitch + 16, k + 1)
    exact = _exact(a, b)
    got = ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits)
    assert torch.equal(got.long(), exact)
    row, col = _scales(m, True, 1), _scales(n, True, 2)
    got = ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, variant, decomposition, splits)
    assert torch.equal(_bits(got), _bits(ops.dequantize(exact.int(), row, col, 16.0)))


@pytest.mark.parametrize("k", [104, 98, 1, 12608])
def test_the_integer_routes_pad_k_and_agree(ops, k: int) -> None:
    """K that is not a multiple of 16 is zero-padded (both operands in one launch) for the CUTLASS GEMMs and, where
    not a multiple of 8, for cuBLASLt: every route gives the exact product's dequantised bits."""
    m, n = 200, 264
    a, b = _codes(m, k, k), _codes(n, k, k + 1)
    row, col = _scales(m, True, 1), _scales(n, True, 2)
    want = ops.dequantize(_exact(a, b).int(), row, col, 16.0)
    for route in ("int8_sm90", "int8", "int8_lt"):
        got = ops.int_matmul(a, b, row, col, 16.0, route)
        assert torch.equal(_bits(got), _bits(want)), route
    # the same codes at a pitch of 16 bytes, random past K: int8_sm90 reads them where they lie (no padding launch
    # for K % 16 != 0), the other routes pad both in one launch (K % 8 == 0 too for cuBLASLt: no copy of each)
    pitch = (k + 15) // 16 * 16
    a_p, b_p = _at_pitch(m, k, pitch, 7), _at_pitch(n, k, pitch, 8)
    a_p.copy_(a)
    b_p.copy_(b)
    for route in ("int8_sm90", "int8", "int8_lt"):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            got = ops.int_matmul(a_p, b_p, row, col, 16.0, route)
            torch.cuda.synchronize()
        assert torch.equal(_bits(got), _bits(want)), route
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        if route == "int8_sm90":
            assert len(names) == 1 and "cutlass" in names[0], names
        elif k % 16:
            assert sum("pad_columns" in name for name in names) == 1, (route, names)
            assert not any("copy" in name for name in names), (route, names)


@pytest.mark.parametrize("k", [96, 104])
def test_the_integer_routes_take_transposed_and_unaligned_operands(ops, k: int) -> None:
    """Transposed views (codes a quantiser wrote (R, C), read as (C, R)) are made contiguous and then padded only
    where K needs it: at K = 96 by no route, at 104 (a multiple of 8) not for cuBLASLt. A contiguous operand at an
    address that is not 16-byte aligned is padded with the other in one launch. Every route: the exact product's
    bits."""
    m, n = 200, 264
    a, b = _codes(m, k, k), _codes(n, k, k + 1)
    row, col = _scales(m, True, 1), _scales(n, True, 2)
    want = ops.dequantize(_exact(a, b).int(), row, col, 16.0)
    a_t, b_t = a.t().contiguous().t(), b.t().contiguous().t()  # the same values, strides (1, rows)
    for route, multiple in (("int8_sm90", 16), ("int8", 16), ("int8_lt", 8)):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            got = ops.int_matmul(a_t, b_t, row, col, 16.0, route)
            torch.cuda.synchronize()
        assert torch.equal(_bits(got), _bits(want)), route
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        assert sum("pad_columns" in name for name in names) == int(k % multiple != 0), (route, names)
    unaligned = torch.empty(m * k + 1, dtype=torch.int8, device=CUDA)[1:].view(m, k)
    unaligned.copy_(a)
    assert unaligned.data_ptr() % 16 != 0
    for route in ("int8_sm90", "int8", "int8_lt"):
        got = ops.int_matmul(unaligned, b, row, col, 16.0, route)
        assert torch.equal(_bits(got), _bits(want)), route


def test_sm90_unavailable_elsewhere() -> None:
    """On a GPU that is not compute capability 9.0 the GEMM reports itself unavailable and raises clearly."""
    ops = _extension()
    if torch.cuda.get_device_capability() == (9, 0):
        pytest.skip("Hopper: covered by the tests above")
    assert not ops.cutlass_sm90_available()
    with pytest.raises(RuntimeError, match="not available"):
        ops.cutlass_gemm_s8_sm90(_codes(64, 128, 1), _codes(96, 128, 2))


@pytest.mark.parametrize("programmatic", [True, False])
@pytest.mark.parametrize(("variant", "decomposition", "splits"), DEQUANT_CONFIGS)
def test_a_gemm_reads_what_the_kernel_before_it_wrote(ops, programmatic, variant, decomposition, splits) -> None:
    """Each GEMM launched right after an elementwise kernel that writes what it reads (B for the int32 GEMM, the row
    scales for the dequantising one; a programmatic launch depends on that kernel through the relaxed edge and must
    wait for its writes): each eager call and each replay of the captured kernels gives the exact products of what
    was just written. No kernel here signals its dependents early, so a GEMM's CTAs start only as the writer's last
    ones exit: this checks the edge and the wait's place, not a wait under an early signal."""
    m, n, k = 2304, 768, 12608
    sources = (_codes(m, k, 1), _codes(n, k, 2), _scales(m, True, 3))  # what the kernels write, refilled each round
    a, b, row = (torch.empty_like(t) for t in sources)
    col = _scales(n, True, 4)

    def write_and_multiply() -> tuple[torch.Tensor, torch.Tensor]:
        torch.neg(sources[0], out=a)  # kernels, not copies: a copy between like tensors is a memcpy node
        torch.neg(sources[1], out=b)
        d = ops.cutlass_gemm_s8_sm90(a, b, variant, decomposition, splits)
        torch.neg(sources[2], out=row)
        return d, ops.cutlass_gemm_s8_sm90_dequant(a, b, row, col, 16.0, variant, decomposition, splits)

    def refill(seed: int) -> None:
        torch.cuda.synchronize()
        new = (_codes(m, k, seed), _codes(n, k, seed + 1), _scales(m, True, seed + 2))
        for src, values in zip(sources, new, strict=True):
            src.copy_(values)
        torch.cuda.synchronize()

    def check(d: torch.Tensor, f: torch.Tensor) -> None:
        torch.cuda.synchronize()
        exact = _exact(sources[0], sources[1])  # (-a)(-b) = ab
        assert torch.equal(d.long(), exact)
        assert torch.equal(_bits(f), _bits(ops.dequantize(exact.int(), -sources[2], col, 16.0)))

    with _sm90_setting(ops.set_sm90_programmatic_launch, programmatic):
        for seed in (10, 20):
            refill(seed)
            check(*write_and_multiply())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            d, f = write_and_multiply()
        for seed in (30, 40, 50):
            refill(seed)
            graph.replay()
            check(d, f)


def test_a_smaller_pingpong_share_moves_wide_products_to_the_cooperative_kernel(ops) -> None:
    """Below the share, a small product whose ping-pong grid would take more SMs takes the cooperative kernel
    (128 x 128 tiles, data-parallel): the same bits, one CUTLASS kernel of the cooperative variant, and the
    ping-pong kernel again once the share is back at 1."""
    m, n, k = 784, 1152, 128  # ResNet-50 layer2.conv2's g_x: 63 cluster tiles, nearly every SM of an H100/H200
    a, b = _codes(m, k, 3), _codes(n, k, 4)
    row, col = _scales(m, True, 1), _scales(n, True, 2)
    want = ops.dequantize(_exact(a, b).int(), row, col, 16.0)

    def kernels() -> tuple[torch.Tensor, list[str]]:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            got = ops.int_matmul(a, b, row, col, 16.0, "int8_sm90")
            torch.cuda.synchronize()
        return got, [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]

    default, names = kernels()
    assert torch.equal(_bits(default), _bits(want)) and len(names) == 1
    try:
        ops.set_sm90_pingpong_sm_share(0.5)
        got, wide = kernels()
    finally:
        ops.set_sm90_pingpong_sm_share(1.0)
    assert torch.equal(_bits(got), _bits(want)) and len(wide) == 1 and wide != names, (names, wide)
    assert kernels()[1] == names
    with pytest.raises(ValueError, match="SM share"):
        ops.set_sm90_pingpong_sm_share(0.0)
