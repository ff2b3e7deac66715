"""The CUTLASS 3.x sm_90a INT8 GEMM (`_C.cutlass_gemm_s8_sm90`): exact int32 products for every kernel variant
and K decomposition, HOT's g_w shapes included, CUDA-graph capture, and clear errors on bad inputs."""

from __future__ import annotations

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
    with pytest.raises(ValueError, match="K a multiple of 16"):
        ops.cutlass_gemm_s8_sm90(_codes(64, 120, 1), _codes(96, 120, 2))
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


def test_sm90_unavailable_elsewhere() -> None:
    """On a GPU that is not compute capability 9.0 the GEMM reports itself unavailable and raises clearly."""
    ops = _extension()
    if torch.cuda.get_device_capability() == (9, 0):
        pytest.skip("Hopper: covered by the tests above")
    assert not ops.cutlass_sm90_available()
    with pytest.raises(RuntimeError, match="not available"):
        ops.cutlass_gemm_s8_sm90(_codes(64, 128, 1), _codes(96, 128, 2))
