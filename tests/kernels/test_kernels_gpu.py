"""hot-kernels on a GPU: codes and scales bit-identical to the CPU reference, exact integer GEMMs,
real-quant layers equal to fake-quant ones, ragged shapes, and clear errors on bad inputs."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot import HOTConfig, HOTLinear, backends
from hot.backends import HLASpec, HQSpec
from hot.backends.real import (
    RealBackend,
    fp8_gemm_available,
    hash_uniform,
    hla_codes_pitch,
    hla_one_launch,
    hla_rolled_transform,
    mark_4bit,
)
from hot.backends.reference import ReferenceBackend
from hot.bench.equivalence import code_mismatches, equivalence
from hot.hadamard import block_hadamard, largest_block
from hot.hla import HLAWindows, TokenGrid, hla_windows, lp_l1_rows
from hot.quant import absmax_scale, quantize, sawb_scale
from hot.rounding import StepKey, Stream, hash_key, uniform

pytestmark = pytest.mark.gpu
REF = ReferenceBackend()
CUDA = torch.device("cuda")
HLA16 = HLASpec(hla_windows(16, "paper"), 8, 8, "nearest", "per_tensor")  # hla_matmul reads its block, 16


def _randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Random CPU data with a heavy-ish tail (outliers are what HQ is for)."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=gen) * torch.rand(*shape, generator=gen).pow(4).mul(8).add(0.1)
    return t.to(dtype)


def _assert_codes(codes: torch.Tensor, ref_codes: torch.Tensor) -> None:
    # e4m3: the g_x codes written for the FP8 GEMM on sm_90 (the same integer values)
    assert codes.dtype in (torch.int8, torch.float8_e4m3fn)
    assert codes.shape == ref_codes.shape
    mismatch = (codes.cpu().float() != ref_codes).sum().item()
    assert mismatch == 0, f"{mismatch} of {codes.numel()} codes differ from the CPU reference"


def _same_codes(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Codes (int8 or e4m3: the format the g_x GEMM reads, which the shared launches choose by the product's size)
    with the same values, anything else with the same dtype and bits."""
    codes = (torch.int8, torch.float8_e4m3fn)
    if got.dtype in codes and want.dtype in codes:
        return got.shape == want.shape and torch.equal(got.float(), want.float())
    return got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)


def _assert_bits(scale: torch.Tensor, ref_scale: torch.Tensor) -> None:
    assert scale.dtype == torch.float32 and scale.shape == ref_scale.shape
    assert torch.equal(scale.cpu(), ref_scale), "scales differ from the CPU reference"


def _assert_dequantized(backend, out: torch.Tensor, ref: torch.Tensor) -> None:
    """Bitwise, except where the FP8 GEMM folds the scales into its epilogue (sm_90, I % 16 == 0): there
    the scale products round differently, by a few fp32 ulp at most."""
    if backend.gemm_for(CUDA) == "cublas" and out.shape[1] % 16 == 0:
        torch.testing.assert_close(out.cpu(), ref, rtol=4e-7, atol=0)
    else:
        assert torch.equal(out.cpu(), ref)


def _capability() -> tuple[int, int]:
    return torch.cuda.get_device_capability()


def _spatial(prefix: int, height: int, width: int) -> HLAWindows:
    grid = TokenGrid(prefix, height, width)
    return hla_windows(grid.tokens, "spatial", grid)


def _paper(tokens: int) -> HLAWindows:
    return hla_windows(tokens, "paper")


# (windows, samples, channels, rank): 1×16 strips and 4×4 windows with and without prefix tokens and padding
HLA_CASES = [
    (_paper(197), 3, 768, 8),
    (_paper(49), 2, 40, 5),
    (_paper(16), 4, 8, 16),
    (_spatial(1, 14, 14), 3, 768, 8),  # ViT-B/16: class token, 14×14 patches padded to 16×16
    (_spatial(1, 7, 7), 2, 40, 5),
    (_spatial(2, 5, 9), 3, 36, 16),
    (_spatial(0, 4, 4), 4, 8, 1),
    (_spatial(0, 6, 3), 1, 100, 3),
]


# --- LBP-WHT's float projection (the latency figure's fused LBP-WHT column) ------------------------------


@pytest.mark.parametrize(("windows", "samples", "channels", "rank"), [*HLA_CASES, (_spatial(1, 14, 14), 2, 7, 8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_float_projection_and_its_transpose_are_the_reference_bit_for_bit(windows, samples, channels, rank, dtype):
    t = _randn(samples * windows.tokens, channels, seed=channels + rank, dtype=dtype)
    real = RealBackend()
    p = real.hla_project(t.to(CUDA), windows, rank)
    ref = REF.hla_project(t, windows, rank)
    assert p.dtype == torch.float32 and p.shape == ref.shape
    assert torch.equal(p.cpu(), ref)
    q = _randn(*ref.shape, seed=rank)
    back = real.hla_unproject(q.to(CUDA), windows, rank, t.shape[0])
    assert back.shape == t.shape and torch.equal(back.cpu(), REF.hla_unproject(q, windows, rank, t.shape[0]))


def test_unprojecting_the_wrong_row_count_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"p must have 16 rows \(the projection of L = 32 at rank 8\)"):
        RealBackend().hla_unproject(torch.zeros(7, 4, device=CUDA), _paper(16), 8, 32)


def test_the_latency_figure_s_fused_lbp_wht_gives_lbp_wht_s_gradients() -> None:
    from hot.bench.latency import lbp_wht_backward
    from hot.methods import LayerState, LBPWHTMethod

    windows, (length, out_f, in_f) = _paper(197), (2 * 197, 96, 64)
    g_y, x = _randn(length, out_f, seed=1).to(CUDA), _randn(length, in_f, seed=2).to(CUDA)
    w = _randn(out_f, in_f, seed=3).to(CUDA) * 0.02
    g_x, g_w = lbp_wht_backward(RealBackend(), g_y, w, x, windows)()
    method = LBPWHTMethod(HOTConfig(method="lbp_wht", hla_blocking="paper"))
    want_x, want_w, _ = method.backward_gemms(g_y, w, (x,), windows, LayerState(index=0), None)
    torch.testing.assert_close(g_x, want_x, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(g_w, want_w, rtol=1e-4, atol=1e-4)


# --- quantisers against the CPU reference -------------------------------------------------------


def test_the_profiling_driver_calls_each_quantiser_on_the_real_backend() -> None:
    from hot.bench.quantiser_calls import call_quantisers

    assert call_quantisers("qkv", batch=2) == 5  # what `ncu ... python -m hot.bench.quantiser_calls` profiles


@pytest.mark.parametrize("hash", ["fmix32x2", "fmix32"])
@pytest.mark.parametrize("numel", [0, 1, 3, 4, 5, 1023, 1 << 20, 25216 * 3 + 1])
@pytest.mark.parametrize("key", [0, 1, 0xFFFFFFFF, hash_key(5, 3, 11, Stream.GW_GRAD_OUTPUT, rank=2)])
def test_hash_uniform_kernel_is_the_reference_uniform(numel: int, key: int, hash: str) -> None:
    from hot import rounding
    from hot.backends.real import hash_uniform

    made = hash_uniform(numel, key, CUDA, hash)
    assert made.dtype == torch.float32 and made.shape == (numel,) and made.is_cuda
    assert torch.equal(made.cpu(), rounding.uniform((numel,), key, hash=hash))


@pytest.mark.parametrize("hash", ["fmix32x2", "fmix32"])
def test_uniform_on_cuda_equals_the_cpu_numbers_with_and_without_the_kernel(monkeypatch, hash: str) -> None:
    import hot.backends
    from hot import rounding
    from hot.backends.real import hash_uniform_built

    assert hot.backends.real_available() and hash_uniform_built()  # so the first call below takes the kernel
    key = hash_key(1, 2, 3, Stream.DROPOUT)
    cpu = rounding.uniform((33, 517), key, hash=hash)
    assert torch.equal(rounding.uniform((33, 517), key, CUDA, hash).cpu(), cpu)  # the kernel
    monkeypatch.setattr(hot.backends, "device_uniform", lambda *args: None)
    assert torch.equal(rounding.uniform((33, 517), key, CUDA, hash).cpu(), cpu)  # torch's int64 passes


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("granularity", ["per_token", "per_tensor"])
@pytest.mark.parametrize(
    ("rows", "cols"),
    # rows whose chunks are not a multiple of 32 are packed side by side into whole warps (2304 and 768 columns: two
    # rows; 320 and 64: 8; 128: 4; 96: 16; 48: 32), the last group partial, from 2 x 4096 groups 2-4 groups a block
    # ((24577, 768): 3 a block, the last block's second group past the end); from 8192 rows a block of other rows
    # takes 2-4 consecutive rows (1024 and 3200: a chunk a thread, (16411, 1024): 4 a block, the last block partial;
    # 4160 and 4608: two chunks a thread); (33, 130): block 2, the long kernel
    [
        (197, 2304),
        (256, 768),
        (33, 100),
        (5, 48),
        (1, 16),
        (7, 7),
        (4099, 96),
        (8200, 2304),
        (8200, 4608),
        (8200, 3200),
        (8200, 4160),
        (16411, 1024),
        (16411, 48),
        (24577, 768),
        (33, 64),
        (37, 128),
        (41, 320),
        (33, 130),
    ],
)
def test_hq_grad_output_matches_cpu(kernel_backend, dtype, granularity, rows: int, cols: int) -> None:
    g_y = _randn(rows, cols, seed=rows * cols, dtype=dtype)
    block, key = largest_block(cols, 16), hash_key(3, rows, cols, Stream.GX_GRAD_OUTPUT)
    ref_codes, ref_scale = REF.hq_quantize_grad_output(g_y, HQSpec(block, 4, granularity, key))
    codes, scale = kernel_backend.hq_quantize_grad_output(g_y.to(CUDA), HQSpec(block, 4, granularity, key))
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)


@pytest.mark.parametrize("block", [4, 8])
def test_hq_grad_output_smaller_blocks_match_cpu(kernel_backend, block: int) -> None:
    """Blocks of 4 and 8: the codes of a chunk stored as e4m3 words (one and two) on the FP8 route, int8 elsewhere."""
    g_y = _randn(33, 96, seed=block)
    spec = HQSpec(block, 4, "per_token", hash_key(5, block, 96, Stream.GX_GRAD_OUTPUT))
    ref_codes, ref_scale = REF.hq_quantize_grad_output(g_y, spec)
    codes, scale = kernel_backend.hq_quantize_grad_output(g_y.to(CUDA), spec)
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)


@pytest.mark.slow
def test_hq_grad_output_four_chunks_a_thread_several_rows_a_block(kernel_backend) -> None:
    """Rows of more than 512 chunks (four a thread) at 8200 rows (two a block): one dtype and granularity, the CPU
    reference of 67 M elements being slow."""
    g_y = _randn(8200, 8208, seed=9, dtype=torch.bfloat16)
    spec = HQSpec(16, 4, "per_token", hash_key(9, 8200, 8208, Stream.GX_GRAD_OUTPUT))
    ref_codes, ref_scale = REF.hq_quantize_grad_output(g_y, spec)
    codes, scale = kernel_backend.hq_quantize_grad_output(g_y.to(CUDA), spec)
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)


def test_hq_grad_output_all_zero_rows(kernel_backend) -> None:
    g_y = _randn(8, 64, seed=1)
    g_y[2] = 0
    ref_codes, ref_scale = REF.hq_quantize_grad_output(g_y, HQSpec(16, 4, "per_token", 5))
    codes, scale = kernel_backend.hq_quantize_grad_output(g_y.to(CUDA), HQSpec(16, 4, "per_token", 5))
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("out_f", "in_f"), [(2304, 768), (64, 576), (100, 30), (3, 5), (8192, 2304)])
def test_hq_weight_codes_given_scale(kernel_backend, dtype, out_f: int, in_f: int) -> None:
    """SAWB's means are float reductions whose order differs between CPU and GPU: the scale agrees to a
    few ulp, and the codes are bit-identical to the reference rounding at the kernel's scale. 8192 x 2304 has more
    blocks of rows x columns (1179648) than the code pass has threads: some threads quantise two."""
    w = _randn(out_f, in_f, seed=out_f + in_f, dtype=dtype) * 0.05
    block = largest_block(out_f, 16)
    codes, scale = kernel_backend.hq_quantize_weight(w.to(CUDA), HQSpec(block, 4))
    b = block_hadamard(w.float(), block, dim=0)
    ref_scale = sawb_scale(b, 4)
    assert scale.shape == ref_scale.shape
    torch.testing.assert_close(scale.cpu(), ref_scale, rtol=1e-6, atol=0)
    _assert_codes(codes, quantize(b, scale.cpu(), 4, "nearest"))


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_non_finite_weight_gets_the_reference_scale(kernel_backend, value, dtype) -> None:
    """One NaN or infinity in W: the scale is hot.quant.sawb_scale's bit for bit (1 for a NaN, which a max that
    dropped it would have made finite; infinite for an infinity), and the codes of W's finite blocks the
    reference's (W of magnitude near 1, so the codes at a scale of 1 are not all 0)."""
    w = _randn(96, 80, seed=3, dtype=dtype)
    w[37, 11] = value
    codes, scale = kernel_backend.hq_quantize_weight(w.to(CUDA), HQSpec(16, 4))
    b = block_hadamard(w.float(), 16, dim=0)
    ref_scale = sawb_scale(b, 4)
    _assert_bits(scale, ref_scale)
    assert ref_scale.item() == (1.0 if value != value else float("inf"))
    finite = b.isfinite()
    assert not finite.all()
    want = quantize(b, ref_scale, 4, "nearest")[finite]
    assert torch.equal(codes.cpu().float()[finite], want)
    assert want.any() == (value != value)  # a NaN's scale of 1 leaves non-zero codes, an infinite scale none


def test_hq_weight_matches_cpu_bitwise_on_exact_sums(kernel_backend) -> None:
    """Weights on a 1/16 grid make every SAWB sum exact in any order: then the scale is bit-identical."""
    w = torch.randint(-16, 17, (128, 64), generator=torch.Generator().manual_seed(2)).float() / 16
    ref_codes, ref_scale = REF.hq_quantize_weight(w, HQSpec(16, 4))
    codes, scale = kernel_backend.hq_quantize_weight(w.to(CUDA), HQSpec(16, 4))
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_channel"])
@pytest.mark.parametrize("rounding", ["stochastic", "nearest"])
@pytest.mark.parametrize(("windows", "samples", "channels", "rank"), HLA_CASES, ids=str)
def test_hla_matches_cpu(kernel_backend, dtype, granularity, rounding, windows, samples, channels, rank) -> None:
    t = _randn(windows.tokens * samples, channels, seed=windows.tokens + channels, dtype=dtype)
    key = hash_key(1, 2, 3, Stream.GW_GRAD_OUTPUT) if rounding == "stochastic" else None
    spec = HLASpec(windows, rank, 8, rounding, granularity, key)
    ref_codes, ref_scale = REF.hla_quantize(t, spec)
    codes, scale = kernel_backend.hla_quantize(t.to(CUDA), spec)
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hq_granularity", ["per_token", "per_tensor"])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_channel"])
@pytest.mark.parametrize(
    ("windows", "samples", "channels", "rank"),
    [*HLA_CASES, (_spatial(1, 7, 7), 2, 30, 8), (_paper(16), 3, 7, 8), (_spatial(1, 14, 14), 128, 96, 8)],
    ids=str,
)
def test_column_sums_come_with_the_codes(
    kernel_backend, fused, dtype, hq_granularity, granularity, windows, samples, channels, rank
):
    """The bias gradient from a statistics pass over g_y (HLA's, or the fused kernel's): every row added once
    (float64's sum within float32 rounding of a tree of additions), the same bits on every call, and the codes and
    scales the reference's."""
    g_y = _randn(windows.tokens * samples, channels, seed=7 * channels + samples, dtype=dtype)
    hq = HQSpec(largest_block(channels, 16), 4, hq_granularity, hash_key(1, 2, 3, Stream.GX_GRAD_OUTPUT))
    hla = HLASpec(windows, rank, 8, "stochastic", granularity, hash_key(1, 2, 3, Stream.GW_GRAD_OUTPUT))
    backend = _fused(kernel_backend) if fused else kernel_backend
    got = backend.quantize_grad_output(g_y.to(CUDA), hq, hla, column_sums=True)
    want = REF.quantize_grad_output(g_y, hq, hla, column_sums=True)
    for g, w in zip(got[:4], want[:4], strict=True):
        (_assert_codes if w.dtype == torch.int8 else _assert_bits)(g, w)
    sums = got.column_sums
    assert sums.dtype == torch.float32 and sums.shape == (channels,) and sums.device.type == "cuda"
    exact = g_y.double().sum(0)
    # one missed or doubled row moves a sum by about 1/L of its absolute sum: far above this bound
    bound = 4e-6 * g_y.double().abs().sum(0)
    assert ((sums.cpu().double() - exact).abs() <= bound).all()
    assert ((want.column_sums.double() - exact).abs() <= bound).all()
    again = backend.quantize_grad_output(g_y.to(CUDA), hq, hla, column_sums=True).column_sums
    assert torch.equal(again, sums)
    assert backend.quantize_grad_output(g_y.to(CUDA), hq, hla).column_sums is None


def _fused(backend: RealBackend) -> RealBackend:
    return RealBackend(gemm=backend.gemm, fused_grad_output=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hq_granularity", ["per_token", "per_tensor"])
@pytest.mark.parametrize("hla_granularity", ["per_tensor", "per_channel"])
@pytest.mark.parametrize("rounding", ["stochastic", "nearest"])
@pytest.mark.parametrize(
    ("windows", "samples", "channels", "rank"),
    [*HLA_CASES, (_paper(197), 2, 2304, 8), (_spatial(1, 14, 14), 2, 2304, 8), (_paper(7), 3, 100, 3)],
    ids=str,
)
def test_fused_grad_output_matches_both_quantisers(
    kernel_backend, dtype, hq_granularity, hla_granularity, rounding, windows, samples, channels, rank
) -> None:
    """One fused call gives the HQ and the HLA codes and scales of the two reference quantisers, bit for bit."""
    g_y = _randn(windows.tokens * samples, channels, seed=3 * windows.tokens + channels, dtype=dtype)
    block = largest_block(channels, 16)
    hq = HQSpec(block, 4, hq_granularity, hash_key(1, 2, 3, Stream.GX_GRAD_OUTPUT))
    key = hash_key(1, 2, 3, Stream.GW_GRAD_OUTPUT) if rounding == "stochastic" else None
    hla = HLASpec(windows, rank, 8, rounding, hla_granularity, key)
    backend = _fused(kernel_backend)
    assert backend.fuses_grad_output(g_y, hq, hla)
    got = backend.quantize_grad_output(g_y.to(CUDA), hq, hla)
    want = REF.quantize_grad_output(g_y, hq, hla)
    _assert_codes(got[0], want[0])
    _assert_bits(got[1], want[1])
    _assert_codes(got[2], want[2])
    _assert_bits(got[3], want[3])


@pytest.mark.parametrize("block", [1, 2, 4, 8, 16])
def test_fused_grad_output_every_hadamard_block(kernel_backend, block: int) -> None:
    g_y = _randn(3 * 50, 64, seed=block, dtype=torch.bfloat16)
    hq = HQSpec(block, 4, "per_token", 11)
    hla = HLASpec(_spatial(1, 7, 7), 8, 8, "stochastic", "per_tensor", 12)
    got = _fused(kernel_backend).quantize_grad_output(g_y.to(CUDA), hq, hla)
    want = REF.quantize_grad_output(g_y, hq, hla)
    assert got.column_sums is None and want.column_sums is None
    for g, w in zip(got[:4], want[:4], strict=True):
        (_assert_codes if w.dtype == torch.int8 else _assert_bits)(g, w)


def test_fused_grad_output_falls_back_for_ragged_channels(kernel_backend) -> None:
    g_y = _randn(2 * 20, 6, seed=5)
    hq = HQSpec(2, 4, "per_token", 1)
    hla = HLASpec(_paper(20), 8, 8, "stochastic", "per_tensor", 2)
    backend = _fused(kernel_backend)
    assert not backend.fuses_grad_output(g_y, hq, hla)
    got = backend.quantize_grad_output(g_y.to(CUDA), hq, hla)
    for g, w in zip(got[:4], REF.quantize_grad_output(g_y, hq, hla)[:4], strict=True):
        (_assert_codes if w.dtype == torch.int8 else _assert_bits)(g, w)


def test_grad_output_bytes_counts_two_reads(kernel_backend) -> None:
    g_y = torch.empty(197 * 4, 768, dtype=torch.bfloat16)
    hq = HQSpec(16, 4, "per_token", 1)
    hla = HLASpec(_paper(197), 8, 8, "stochastic", "per_tensor", 2)
    proj_rows = 4 * 13 * 8
    want = 2 * g_y.numel() * 2 + g_y.numel() + proj_rows * 768 + 4 * (197 * 4 + 768)
    assert _fused(kernel_backend).grad_output_bytes(g_y, hq, hla) == want


def _one_launch_set(backend: RealBackend, enabled: bool, fn):
    """fn() with hla_quantize's one-launch path on or off (restored to on after)."""
    with hla_one_launch(backend, enabled):
        return fn()


def _cuda_kernels(fn) -> list[str]:
    """The names of the CUDA kernels fn() launches."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.key for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]


def _launches(names: list[str], part: str) -> bool:
    return any(part in n for n in names)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rounding", ["stochastic", "nearest"])
@pytest.mark.parametrize(
    ("windows", "samples", "channels", "rank"),
    [*HLA_CASES, (_spatial(1, 14, 14), 8, 768, 8), (_paper(16), 3, 7, 8)],
    ids=str,
)
def test_one_launch_hla_equals_the_two_passes(kernel_backend, dtype, rounding, windows, samples, channels, rank):
    """A tensor whose tiles all fit on the GPU takes one cooperative launch (no amax pass): the two-pass path's codes,
    scale and column sums, bit for bit."""
    t = _randn(windows.tokens * samples, channels, seed=3 * channels + samples, dtype=dtype).to(CUDA)
    key = hash_key(4, 5, 6, Stream.GW_GRAD_OUTPUT) if rounding == "stochastic" else None
    spec = HLASpec(windows, rank, 8, rounding, "per_tensor", key)

    def run():
        return kernel_backend._hla_quantize(t, spec, column_sums=True)

    one = _cuda_kernels(run)
    two = _one_launch_set(kernel_backend, False, lambda: _cuda_kernels(run))
    assert _launches(one, "hla_quantize_one_launch") and not _launches(one, "hla_amax")
    assert _launches(two, "hla_amax") and not _launches(two, "one_launch")
    got, want = run(), _one_launch_set(kernel_backend, False, run)
    _assert_codes(got[0], want[0].cpu().float())
    for g, w in zip(got[1:], want[1:], strict=True):
        _assert_bits(g, w.cpu())
    with hla_rolled_transform(kernel_backend, False):  # phase 1 unrolled over a unit's channels: the same bits
        unrolled_names, unrolled = _cuda_kernels(run), run()
    rolled = channels % 4 == 0  # a unit of one channel has one form
    assert next(n for n in one if "one_launch" in n).split(">(")[0].endswith(", true" if rolled else ", false")
    assert next(n for n in unrolled_names if "one_launch" in n).split(">(")[0].endswith(", false")
    for g, u in zip(got, unrolled, strict=True):
        assert torch.equal(g, u)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("x_rounding", ["nearest", "stochastic"])
@pytest.mark.parametrize(
    ("windows", "samples", "x_channels", "g_channels"),
    [(_paper(197), 2, 256, 64), (_paper(49), 1, 1024, 768), (_spatial(1, 14, 14), 3, 768, 2304), (_paper(16), 5, 4, 8)],
    ids=str,
)
def test_two_hla_quantisers_in_one_launch_equal_two_calls(dtype, x_rounding, windows, samples, x_channels, g_channels):
    """x's and g_y's HLA quantisers in one cooperative launch (the figure's backward of a layer that kept x): each
    tensor's codes, scale and g_y's column sums bit for bit as two calls make them."""
    from hot.backends import InputCodes

    real = RealBackend()
    x = _randn(windows.tokens * samples, x_channels, seed=x_channels, dtype=dtype).to(CUDA)
    g_y = _randn(windows.tokens * samples, g_channels, seed=g_channels + 1, dtype=dtype).to(CUDA)
    x_key = hash_key(4, 5, 6, Stream.GW_INPUT) if x_rounding == "stochastic" else None
    x_spec = HLASpec(windows, 8, 8, x_rounding, "per_tensor", x_key)
    g_spec = HLASpec(windows, 8, 8, "stochastic", "per_tensor", hash_key(4, 5, 6, Stream.GW_GRAD_OUTPUT))
    x_codes = InputCodes(real, x, x_spec)
    assert real._pairs_with_grad_output(x_codes, g_y, g_spec)
    names = _cuda_kernels(lambda: real._hla_quantize_pair(x_codes, g_y, g_spec, True))
    assert _launches(names, "hla_quantize_pair_one_launch") and len(names) == 1
    (x_c, x_s), (g_c, g_s, g_sums) = real._hla_quantize_pair(x_codes, g_y, g_spec, True)
    want_x, want_g = real.hla_quantize(x, x_spec), real._hla_quantize(g_y, g_spec, True)
    for got, want in zip((x_c, x_s, g_c, g_s, g_sums), (*want_x, *want_g), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    assert names[0].split(">(")[0].endswith(", true")  # phase 1 rolled over a unit's channels
    with hla_rolled_transform(real, False):  # unrolled: the same bits
        names = _cuda_kernels(lambda: real._hla_quantize_pair(x_codes, g_y, g_spec, True))
        assert names[0].split(">(")[0].endswith(", false")
        (ux_c, ux_s), (ug_c, ug_s, ug_sums) = real._hla_quantize_pair(x_codes, g_y, g_spec, True)
    for got, want in zip((x_c, x_s, g_c, g_s, g_sums), (ux_c, ux_s, ug_c, ug_s, ug_sums), strict=True):
        assert torch.equal(got, want)
    with hla_one_launch(real, False):  # off: two calls, each in its two passes (a backward gives x its own stream)
        assert not real._pairs_with_grad_output(x_codes, g_y, g_spec)
        names = _cuda_kernels(lambda: real._hla_quantize_pair(x_codes, g_y, g_spec, True))
        assert not _launches(names, "one_launch") and _launches(names, "hla_amax")
        again = real._hla_quantize_pair(x_codes, g_y, g_spec, True)
    assert torch.equal(again[0][0], x_c) and torch.equal(again[1][0], g_c) and torch.equal(again[1][2], g_sums)


def test_asking_whether_x_pairs_copies_nothing() -> None:
    """Whether x pairs with g_y is a question of dtype and shape: a transposed x, with g_y at an aligned or a
    misaligned start, gets the answer the contiguous copies get, and asking launches no kernel (inside a capture a
    copy would replay every step)."""
    from hot.backends import InputCodes

    real = RealBackend()
    spec = HLASpec(_paper(49), 8, 8, "stochastic", "per_tensor", hash_key(1, 2, 3, Stream.GW_GRAD_OUTPUT))
    x = _randn(1024, 49, seed=7, dtype=torch.bfloat16).to(CUDA).t()  # (49, 1024), not contiguous
    g_y = _randn(50, 768, seed=8, dtype=torch.bfloat16).to(CUDA)[1:]  # starts 1536 bytes in: aligned
    g_y_odd = _randn(49 * 768 + 1, seed=9, dtype=torch.bfloat16).to(CUDA)[1:].view(49, 768)  # starts 2 bytes in
    assert g_y_odd.data_ptr() % 16 != 0 and not x.is_contiguous()
    for xs, gs in ((x, g_y), (x, g_y_odd)):
        x_codes = InputCodes(real, xs, spec)
        want = real._pairs_with_grad_output(InputCodes(real, xs.contiguous().clone(), spec), gs.clone(), spec)
        assert want
        names = _cuda_kernels(lambda x_codes=x_codes, gs=gs: real._pairs_with_grad_output(x_codes, gs, spec))
        assert names == []
        assert real._pairs_with_grad_output(x_codes, gs, spec) == want


def test_two_hla_quantisers_too_large_for_one_launch_take_two_calls() -> None:
    """Tiles of both tensors beyond what the GPU holds at once: two calls, the same bits, and a captured backward
    would not pair them; so for channels not in fours and for tensors of two types."""
    from hot.backends import InputCodes

    real = RealBackend()
    spec = HLASpec(_paper(16), 8, 8, "stochastic", "per_tensor", hash_key(1, 2, 3, Stream.GW_GRAD_OUTPUT))
    for x, g_y in (
        (_randn(16 * 96, 4096, seed=1).to(CUDA), _randn(16 * 96, 4096, seed=2).to(CUDA)),
        (_randn(64, 36, seed=3).to(CUDA), _randn(64, 30, seed=4).to(CUDA)),
        (_randn(64, 32, seed=5).to(CUDA), _randn(64, 32, seed=6, dtype=torch.bfloat16).to(CUDA)),
    ):
        x_codes = InputCodes(real, x, spec)
        assert not real._pairs_with_grad_output(x_codes, g_y, spec)  # a captured backward gives x its own stream
        names = _cuda_kernels(lambda x_codes=x_codes, g_y=g_y: real._hla_quantize_pair(x_codes, g_y, spec, False))
        assert not _launches(names, "pair")
        (x_c, x_s), (g_c, g_s, _) = real._hla_quantize_pair(x_codes, g_y, spec, False)
        want = (*real.hla_quantize(x, spec), *real.hla_quantize(g_y, spec))
        for got, expected in zip((x_c, x_s, g_c, g_s), want, strict=True):
            assert torch.equal(got, expected)


@pytest.mark.parametrize(
    ("rows", "out_f", "in_f", "w_dtype", "g_dtype", "columns"),
    [
        (3136, 64, 256, torch.float32, torch.float32, True),  # ResNet-50 layer1.conv1: 4 threads a row, 64 a CTA
        (784, 128, 512, torch.float32, torch.float32, True),  # layer2.conv1: 8 threads a row
        (300, 16, 48, torch.float32, torch.bfloat16, False),  # one chunk: 256 rows a CTA, the last CTA part-filled
        (77, 32, 64, torch.bfloat16, torch.float32, True),  # 2 threads a row
        (50, 48, 32, torch.float32, torch.float32, False),  # 3 chunks on 4 threads: one idles in every row
        (64, 256, 48, torch.float32, torch.bfloat16, True),  # 16 threads a row
        (70, 400, 32, torch.bfloat16, torch.float32, False),  # 25 chunks on a warp
        (40, 512, 64, torch.float32, torch.float32, True),  # 32 chunks: a warp a row
        (49, 768, 1024, torch.float32, torch.float32, True),  # EfficientFormer stages.3.proj: 48 chunks a row
        (197, 3072, 768, torch.float32, torch.bfloat16, False),  # 192 chunks: a row on 192 of 256 threads
        (394, 96, 64, torch.bfloat16, torch.bfloat16, True),
        (1, 96, 64, torch.float32, torch.float16, False),
        (33, 16 * 300, 32, torch.float32, torch.bfloat16, True),  # 2 chunks a thread
        (17, 16 * 700, 16, torch.float16, torch.float32, False),  # 4 chunks a thread
    ],
)
def test_weight_and_grad_output_codes_in_one_launch_equal_the_two_quantisers(
    rows, out_f, in_f, w_dtype, g_dtype, columns
) -> None:
    """W's code pass and g_y's per-token HQ rows in one launch (after W's statistics pass): W's codes, scale and
    column scales and g_y's codes and scales bit for bit as hq_quantize_weight and hq_quantize_grad_output make
    them (the codes' values: int8 where WeightCodes asks for the INT8 g_x GEMM's, else e4m3 for the FP8 one)."""
    from hot.backends.real import WeightCodes

    real = RealBackend()
    hq = HQSpec(16, 4, "per_token", hash_key(7, 1, 3, Stream.GX_GRAD_OUTPUT))
    w = (_randn(out_f, in_f, seed=out_f) * 0.02).to(w_dtype).to(CUDA)
    g_y = _randn(rows, out_f, seed=rows, dtype=g_dtype).to(CUDA)
    for int8 in (False, True):  # e4m3 codes for the FP8 g_x GEMM, or int8 ones for the sm_90a INT8 GEMM
        w_codes = WeightCodes(real, w, hq, columns, int8)
        assert real._weight_with_grad_output(w_codes, g_y, hq)
        names = _cuda_kernels(lambda w_codes=w_codes: real._weight_and_grad_output_codes(w_codes, g_y, hq))
        assert len(names) == 2 and _launches(names, "sawb_partials")
        assert _launches(names, "weight_and_grad_output_codes")
        w_got, g_got = real._weight_and_grad_output_codes(w_codes, g_y, hq)
        w_want, g_want = w_codes(), real.hq_quantize_grad_output(g_y, hq)
        for got, want in zip((*w_got, *g_got), (*w_want, *g_want), strict=True):
            assert _same_codes(got, want)
            assert getattr(got, "_hot_4bit_codes", False) == getattr(want, "_hot_4bit_codes", False)
        fp8 = not int8 and real._gx_gemm(g_y.device) == "cublas"
        assert w_got[0].dtype == g_got[0].dtype == (torch.float8_e4m3fn if fp8 else torch.int8)


def test_the_shared_launches_read_the_step_on_the_device() -> None:
    """Training's keys hold the step as a device tensor (StepKey), which a captured step advances: both shared
    launches give the separate quantisers' bits at one step and at the next."""
    from hot.backends import InputCodes
    from hot.backends.real import WeightCodes
    from hot.methods import Keys, layer_specs

    real = RealBackend()
    step = torch.tensor([5], dtype=torch.int64, device=CUDA)
    specs = layer_specs(HOTConfig(hla_blocking="paper"), 96, _paper(197), Keys(7, 1, step))
    hq, gy = specs.grad_output, specs.grad_output_hla
    assert isinstance(hq.key, StepKey) and isinstance(gy.key, StepKey)
    g_y, x = _randn(394, 96, seed=11).to(CUDA), _randn(394, 64, seed=12).to(CUDA)
    w_codes, x_codes = (
        WeightCodes(real, _randn(96, 64, seed=13).to(CUDA) * 0.02, hq, True),
        InputCodes(real, x, specs.input_hla),
    )
    assert real._weight_with_grad_output(w_codes, g_y, hq) and real._pairs_with_grad_output(x_codes, g_y, gy)
    codes = []
    for _ in range(2):
        w_got, g_got = real._weight_and_grad_output_codes(w_codes, g_y, hq)
        (x_c, x_s), g_hla = real._hla_quantize_pair(x_codes, g_y, gy, True)
        got = (*w_got, *g_got, x_c, x_s, *g_hla)
        want = (*w_codes(), *real.hq_quantize_grad_output(g_y, hq), *x_codes(), *real._hla_quantize(g_y, gy, True))
        for a, b in zip(got, want, strict=True):
            assert _same_codes(a, b)
        codes.append(g_got[0].float())
        step.add_(1)
    assert not torch.equal(*codes)  # the next step draws other dither


def test_weight_and_grad_output_codes_where_the_one_launch_does_not_apply() -> None:
    """Rows of more than 1024 chunks take hq_grad_output_per_token_long: no shared launch, so the captured backward
    keeps W's stream; the op still gives both quantisers' results (two calls)."""
    from hot.backends.real import WeightCodes

    real = RealBackend()
    hq = HQSpec(16, 4, "per_token", hash_key(7, 1, 3, Stream.GX_GRAD_OUTPUT))
    w, g_y = _randn(16 * 1100, 16, seed=1).to(CUDA) * 0.02, _randn(5, 16 * 1100, seed=2).to(CUDA)
    w_codes = WeightCodes(real, w, hq, False)
    assert not real._weight_with_grad_output(w_codes, g_y, hq)
    hq8 = replace(hq, block=8)
    assert not real._weight_with_grad_output(WeightCodes(real, w[:64], hq8, False), g_y[:, :64], hq8)
    names = _cuda_kernels(lambda: real._weight_and_grad_output_codes(w_codes, g_y, hq))
    assert _launches(names, "weight_quantize") and _launches(names, "hq_grad_output_per_token_long")
    w_got, g_got = real._weight_and_grad_output_codes(w_codes, g_y, hq)
    for got, want in zip((*w_got, *g_got), (*w_codes(), *real.hq_quantize_grad_output(g_y, hq)), strict=True):
        assert _same_codes(got, want)


def test_hla_too_large_to_be_resident_takes_two_passes(kernel_backend) -> None:
    """8192 tiles are more than any GPU holds at once: the amax pass and the code pass; so does a per-channel scale
    (its amax is one a column)."""
    t = torch.ones(16 * 4096, 1024, device=CUDA, dtype=torch.bfloat16)
    spec = HLASpec(_paper(16), 8, 8, "stochastic", "per_tensor", hash_key(1, 2, 3, Stream.GW_GRAD_OUTPUT))
    big = _cuda_kernels(lambda: kernel_backend.hla_quantize(t, spec))
    assert _launches(big, "hla_amax") and not _launches(big, "one_launch")
    small = t[: 16 * 8]
    per_channel = _cuda_kernels(lambda: kernel_backend.hla_quantize(small, replace(spec, granularity="per_channel")))
    assert _launches(per_channel, "hla_amax") and not _launches(per_channel, "one_launch")


def test_hla_official_blocking_falls_back_exactly(kernel_backend) -> None:
    t = _randn(2 * 24, 16, seed=4)
    spec = HLASpec(hla_windows(24, "official"), 8, 8, "stochastic", "per_tensor", 9)
    ref_codes, ref_scale = REF.hla_quantize(t, spec)
    codes, scale = kernel_backend.hla_quantize(t.to(CUDA), spec)
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)


@pytest.mark.parametrize("granularity", ["per_tensor", "per_token", "per_channel"])
@pytest.mark.parametrize("bits", [4, 8])
def test_absmax_scale_on_cuda_is_the_cpus(granularity: str, bits: int) -> None:
    """The scale divides by qmax on the GPU too (by a Python number torch would multiply by its reciprocal, which
    differs from the division in the last bit for many values): the fake backend's GPU numbers are the CPU's."""
    t = _randn(4096, 257, seed=21)
    assert torch.equal(absmax_scale(t.to(CUDA), bits, granularity).cpu(), absmax_scale(t, bits, granularity))


def test_official_blocking_of_vit_b_stays_on_the_gpu(kernel_backend) -> None:
    """ViT-B's T = 197 under the authors' blocking (block 1) runs the reference ops on the GPU, with the CPU's
    codes: at batch 64 the CPU took about a minute a training step."""
    t = _randn(64 * 197, 768, seed=5)
    spec = HLASpec(hla_windows(197, "official"), 8, 8, "stochastic", "per_tensor", 3)
    codes, scale = kernel_backend.hla_quantize(t.to(CUDA), spec)
    assert codes.device.type == "cuda" and scale.device.type == "cuda"
    ref_codes, ref_scale = REF.hla_quantize(t, spec)
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)


def test_lp_l1_rank8_rows() -> None:
    assert lp_l1_rows(8) == (0, 2, 8, 10, 3, 12, 11, 14)


# --- integer GEMMs ------------------------------------------------------------------------------


def _gemms() -> list[str]:
    if not torch.cuda.is_available():
        return []
    major, minor = torch.cuda.get_device_capability()
    found = ["reference"]
    if major >= 8:
        found += ["cutlass", "cutlass-int4"]  # sm80 kernels also run on Hopper (INT4 mma.sync emulated)
    if (major, minor) >= (8, 9):
        found.append("cublas")
    if (major, minor) == (9, 0) and _sm90_gemm_built():
        found.append("cutlass-sm90")
    return found


def _sm90_gemm_built() -> bool:
    """Whether hot-kernels was built with HOT_KERNELS_SM90A=1 (checked at collection: no import error raised)."""
    try:
        from hot_kernels import _C
    except ImportError:
        return False
    return bool(getattr(_C, "cutlass_sm90_available", lambda: False)())  # False for builds older than the GEMM


def _int_codes(shape: tuple[int, int], low: int, high: int, seed: int) -> torch.Tensor:
    """Integer codes uniform in low..high (both included)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, shape, generator=gen, dtype=torch.int8)


@pytest.mark.parametrize("gemm", _gemms())
@pytest.mark.parametrize(("m", "k", "n"), [(197, 2304, 768), (3136, 64, 256), (49, 512, 4608), (33, 48, 20), (5, 8, 3)])
@pytest.mark.parametrize("bits", [4, 8])
def test_hq_matmul_is_exact_integer_product(kernel_backend, gemm: str, m: int, k: int, n: int, bits: int) -> None:
    """Every 4-bit code (-8..7, marked for the INT4/FP8 GEMMs) and 8-bit codes (unmarked: INT8 GEMM)."""
    backend = RealBackend(gemm=gemm)
    low, high = (-8, 7) if bits == 4 else (-127, 127)
    a, b = _int_codes((m, k), low, high, m), _int_codes((k, n), low, high, n)
    exact = (a.long() @ b.long()).float()
    a_dev, b_dev = a.to(CUDA), b.to(CUDA)
    if bits == 4:
        a_dev, b_dev = mark_4bit(a_dev), mark_4bit(b_dev)
    block = largest_block(k, 16)
    ones = torch.ones(m, 1, device=CUDA)
    # unit scales: the dequantisation (acc · 1) · (block / block) leaves the int32 product unchanged
    out = backend.hq_matmul(a_dev, ones, b_dev, torch.tensor(float(block), device=CUDA), HQSpec(block, bits))
    assert torch.equal(out.cpu(), exact)


@pytest.mark.parametrize("gemm", _gemms())
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_hq_matmul_low_precision_output_rounds_the_float32_result(kernel_backend, gemm: str, out_dtype) -> None:
    """out_dtype: the float32 g_x rounded once (in the FP8 GEMM's epilogue, or after dequantisation)."""
    backend = RealBackend(gemm=gemm)
    m, k, n = 512, 768, 256
    a, b = mark_4bit(_int_codes((m, k), -8, 7, 1).to(CUDA)), mark_4bit(_int_codes((k, n), -8, 7, 2).to(CUDA))
    row = torch.rand(m, 1, device=CUDA) + 0.5
    col = torch.tensor(0.37, device=CUDA)
    want = backend.hq_matmul(a, row, b, col, HQSpec(16, 4))
    got = backend.hq_matmul(a, row, b, col, HQSpec(16, 4), out_dtype=out_dtype)
    assert got.dtype == out_dtype and got.shape == want.shape
    # equal to the rounded float32 result except where the epilogue's scale product moves it across a
    # rounding boundary: then by one unit in the last place of out_dtype
    torch.testing.assert_close(got.float(), want.to(out_dtype).float(), rtol=2**-7, atol=0)
    assert (got != want.to(out_dtype)).float().mean().item() < 1e-3


@pytest.mark.parametrize("gemm", _gemms())
@pytest.mark.parametrize(("r", "o", "i"), [(1600, 2304, 768), (200, 64, 256), (24, 40, 24), (10, 17, 9)])
def test_hla_matmul_is_exact_integer_product(kernel_backend, gemm: str, r: int, o: int, i: int) -> None:
    backend = RealBackend(gemm=gemm)
    g, x = _int_codes((r, o), -127, 127, r), _int_codes((r, i), -127, 127, i)
    exact = g.long().t() @ x.long()
    one = torch.ones((), device=CUDA)
    out = backend.hla_matmul(g.to(CUDA), one, x.to(CUDA), torch.tensor(16.0, device=CUDA), HLA16)
    assert torch.equal(out.cpu().double(), exact.double())


def test_the_sm90_gemm_takes_k_that_is_not_a_multiple_of_16(kernel_backend) -> None:
    backend = RealBackend(gemm="cutlass-sm90")
    if not backend._sm90_available(torch.cuda.current_device()):
        pytest.skip("this build or GPU has no sm_90a GEMM")
    one = torch.ones((), device=CUDA)
    # K = 104 and 98: padded to 112 (both operands in one launch); 112 as it is
    assert [backend._gw_route(CUDA, 96, r, 64) for r in (104, 112, 98)] == ["int8_sm90"] * 3
    for r in (104, 112, 98):
        g, x = _int_codes((r, 96), -127, 127, r), _int_codes((r, 64), -127, 127, r + 1)
        out = backend.hla_matmul(g.to(CUDA), one, x.to(CUDA), torch.tensor(16.0, device=CUDA), HLA16)
        assert torch.equal(out.cpu().double(), (g.long().t() @ x.long()).double())


@pytest.mark.parametrize("how", ["alone", "pair", "fused"])
def test_hla_codes_lie_at_a_pitch_the_sm90_gemm_reads(kernel_backend, how: str) -> None:
    """The HLA quantisers (alone, paired, and g_y's inside the fused grad_output pass) write codes_t (C, R) in rows
    hla_codes_pitch(R) apart, R rounded up to 16 bytes: a sample of ViT's 14 x 14 grid and class token keeps
    R = 16 * 8 + 1 = 129 rows, 144 bytes apart. The g_w GEMM on the sm_90a route reads them there: no padding or
    copy launch, and the exact product of the reference's codes."""
    from hot.backends import InputCodes

    backend = RealBackend(gemm="cutlass-sm90")
    if not backend._sm90_available(torch.cuda.current_device()):
        pytest.skip("this build or GPU has no sm_90a GEMM")
    grid = TokenGrid(1, 14, 14)
    spec = HLASpec(hla_windows(grid.tokens, "spatial", grid), 8, 8, "stochastic", "per_tensor", 11)
    g, x = _randn(grid.tokens, 96, seed=1), _randn(grid.tokens, 64, seed=2)
    if how == "pair":
        (x_codes, x_scale), (g_codes, g_scale, _) = backend._hla_quantize_pair(
            InputCodes(backend, x.to(CUDA), spec), g.to(CUDA), spec, False
        )
    elif how == "fused":
        fused, hq = RealBackend(gemm="cutlass-sm90", fused_grad_output=True), HQSpec(16, 4, "per_token", 12)
        assert fused.fuses_grad_output(g.to(CUDA), hq, spec)
        out = fused.quantize_grad_output(g.to(CUDA), hq, spec)
        g_codes, g_scale = out.hla_codes, out.hla_scale
        x_codes, x_scale = backend.hla_quantize(x.to(CUDA), spec)
    else:
        g_codes, g_scale = backend.hla_quantize(g.to(CUDA), spec)
        x_codes, x_scale = backend.hla_quantize(x.to(CUDA), spec)
    assert backend.ops.hla_codes_pitch(129) == 144 and backend.ops.hla_codes_pitch(128) == 128
    # the traced layout's pitch (Python arithmetic) is the kernels'
    assert all(hla_codes_pitch(r) == backend.ops.hla_codes_pitch(r) for r in range(1, 100))
    for codes, t in ((g_codes, g), (x_codes, x)):
        assert codes.shape == (129, t.shape[1]) and codes.stride() == (1, 144)
        _assert_codes(codes, REF.hla_quantize(t, spec)[0])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = backend.hla_matmul(g_codes, g_scale, x_codes, x_scale, spec)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(names) == 1 and "cutlass" in names[0], names
    want = REF.hla_matmul(
        g_codes.cpu().double(), g_scale.cpu().double(), x_codes.cpu().double(), x_scale.cpu().double(), spec
    )
    torch.testing.assert_close(out.cpu().double(), want.double(), rtol=1e-6, atol=0)


def test_cutlass_kernels_directly(kernel_backend) -> None:
    import hot_kernels

    if _capability() < (8, 0):
        pytest.skip("CUTLASS tensor-op GEMMs need sm_80+")
    a, b = _int_codes((64, 128), -127, 127, 1).to(CUDA), _int_codes((96, 128), -127, 127, 2).to(CUDA)
    d8 = hot_kernels._C.cutlass_gemm_s8(a, b)
    assert d8.dtype == torch.int32 and torch.equal(d8.cpu().long(), a.cpu().long() @ b.cpu().long().t())


def _pack_int4_cpu(codes: torch.Tensor, cols_pad: int) -> torch.Tensor:
    """CUTLASS int4b_t packing: element 2k in the low nibble of byte k, zero codes past the columns."""
    padded = torch.nn.functional.pad(codes.long(), (0, cols_pad - codes.shape[1])) & 0xF
    return (padded[:, 0::2] | (padded[:, 1::2] << 4)).to(torch.uint8)


@pytest.mark.parametrize(("m", "n", "k", "k_pad"), [(64, 96, 128, 128), (200, 132, 100, 128), (1, 4, 2304, 2304)])
def test_cutlass_int4_kernel_directly(kernel_backend, m: int, n: int, k: int, k_pad: int) -> None:
    """Packing (nibble order, K padding) against the CPU, and the INT4 GEMM's int32 products exactly."""
    import hot_kernels

    if _capability() < (8, 0):
        pytest.skip("CUTLASS tensor-op GEMMs need sm_80+")
    a, b = _int_codes((m, k), -8, 7, m), _int_codes((n, k), -8, 7, n)
    pa, pb = hot_kernels._C.pack_int4(a.to(CUDA), k_pad), hot_kernels._C.pack_int4(b.to(CUDA), k_pad)
    assert torch.equal(pa.cpu(), _pack_int4_cpu(a, k_pad)) and torch.equal(pb.cpu(), _pack_int4_cpu(b, k_pad))
    d4 = hot_kernels._C.cutlass_gemm_s4(pa, pb)
    assert d4.dtype == torch.int32 and d4.shape == (m, n)
    assert torch.equal(d4.cpu().long(), a.long() @ b.long().t())


def test_4bit_gemm_routing(kernel_backend) -> None:
    """The quantisers mark their 4-bit codes for the INT4/FP8 GEMMs; 8-bit g_x codes stay exact (INT8 GEMM)."""
    g_y, w = _randn(197, 256, seed=3), _randn(256, 96, seed=4) * 0.05
    for gemm in _gemms():
        backend = RealBackend(gemm=gemm)
        for bits in (4, 8):
            key = hash_key(1, 197, 256, Stream.GX_GRAD_OUTPUT)
            codes, scale = backend.hq_quantize_grad_output(g_y.to(CUDA), HQSpec(16, bits, "per_token", key))
            w_codes, w_scale = backend.hq_quantize_weight(w.to(CUDA), HQSpec(16, bits))
            ref_codes, ref_scale = REF.hq_quantize_grad_output(g_y, HQSpec(16, bits, "per_token", key))
            _assert_codes(codes, ref_codes)
            _assert_bits(scale, ref_scale)
            fp8 = gemm in ("cublas", "cutlass-sm90") and bits == 4
            assert (codes.dtype == torch.float8_e4m3fn) == fp8
            out = backend.hq_matmul(codes, scale, w_codes, w_scale, HQSpec(16, 4))
            ref = REF.hq_matmul(ref_codes, ref_scale, w_codes.cpu().float(), w_scale.cpu(), HQSpec(16, 4))
            if fp8:
                torch.testing.assert_close(out.cpu(), ref, rtol=4e-7, atol=0)
            else:
                assert torch.equal(out.cpu(), ref), (gemm, bits)


def test_dequantisation_matches_reference_order(kernel_backend) -> None:
    a, b = _int_codes((300, 256), -7, 7, 5), _int_codes((256, 96), -7, 7, 6)
    a_scale = torch.rand(300, 1, generator=torch.Generator().manual_seed(7)) + 0.01
    b_scale = torch.tensor(0.0123)
    ref = REF.hq_matmul(a.float(), a_scale, b.float(), b_scale, HQSpec(16, 4))
    out = kernel_backend.hq_matmul(a.to(CUDA), a_scale.to(CUDA), b.to(CUDA), b_scale.to(CUDA), HQSpec(16, 4))
    _assert_dequantized(kernel_backend, out, ref)  # the product is exact in float32 here


# --- layers: real quant against fake quant ------------------------------------------------------


def _layer_grads(backend: str, x: torch.Tensor, w: torch.Tensor, grid: TokenGrid, **cfg) -> tuple:
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=True, device=CUDA)
    with torch.no_grad():
        lin.weight.copy_(w)
    layer = HOTLinear.from_float(lin, HOTConfig(backend=backend, seed=11, **cfg), index=4)
    layer.hot_grid = grid
    xin = x.reshape(-1, grid.tokens, x.shape[-1]).clone().requires_grad_(True)
    g_y = _randn(*xin.shape[:-1], w.shape[0], seed=99).to(CUDA)
    layer(xin).backward(g_y)
    return xin.grad.reshape(-1, x.shape[-1]), layer.weight.grad, layer.bias.grad


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize(
    "cfg",
    [
        {},
        {"gx_granularity": "per_tensor"},
        {"abc": True},
        {"gw_granularity": "per_channel"},
        {"rounding_hash": "fmix32"},
        {"rounding_hash": "fmix32", "gx_granularity": "per_tensor", "abc": True},
    ],
    ids=str,
)
@pytest.mark.parametrize(
    ("grid", "samples", "in_f", "out_f"),
    [
        (TokenGrid(1, 14, 14), 2, 64, 96),
        (TokenGrid(0, 4, 4), 3, 48, 32),
        (TokenGrid(1, 3, 3), 1, 24, 40),
        (TokenGrid(0, 1, 197), 2, 64, 96),  # 1-row grid, 1×16 strips' shape with 4×4 windows' padding
    ],
    ids=str,
)
@pytest.mark.parametrize("blocking", ["spatial", "paper"])
def test_hot_linear_real_equals_fake(
    kernel_backend, fused: bool, cfg: dict, grid: TokenGrid, samples: int, in_f: int, out_f: int, blocking
):
    # weights on a 1/16 grid: the SAWB scale is exact in any summation order (see above)
    w = torch.randint(-8, 9, (out_f, in_f), generator=torch.Generator().manual_seed(out_f)).float() / 16
    x = _randn(grid.tokens * samples, in_f, seed=in_f).to(CUDA)
    gx_real, gw_real, gb_real = _layer_grads(
        "real", x, w.to(CUDA), grid, hla_blocking=blocking, fused_grad_output=fused, **cfg
    )
    gx_fake, gw_fake, gb_fake = _layer_grads("fake", x, w.to(CUDA), grid, hla_blocking=blocking, **cfg)
    # g_x: identical codes, exact products, the same dequantisation ops
    assert _rel(gx_real, gx_fake) < 1e-6
    # g_w: identical codes; the fake path's float32 GEMM may round sums above 2^24
    assert _rel(gw_real, gw_fake) < 1e-6
    # g_b: the same sums added in another order (inside the HLA pass, unless fused)
    assert _rel(gb_real, gb_fake) < 1e-6


@pytest.mark.parametrize("cfg", [{}, {"gx_granularity": "per_tensor"}, {"abc": True}])
def test_cuda_11_8_torch_on_hopper_runs_the_int8_gemm_exactly(kernel_backend, monkeypatch, cfg: dict) -> None:
    """A CUDA 11.8 torch (no FP8 GEMMs) on sm_90: the real backend picks the INT8 tensor cores by itself, never
    calls _scaled_mm, and its layer gradients are the fake backend's."""
    if _capability()[0] < 9:
        pytest.skip("the FP8/INT8 choice is made on compute capability 9.0 and later")
    grid, samples, in_f, out_f = TokenGrid(1, 14, 14), 2, 64, 96
    w = torch.randint(-8, 9, (out_f, in_f), generator=torch.Generator().manual_seed(5)).float().to(CUDA) / 16
    x = _randn(grid.tokens * samples, in_f, seed=6).to(CUDA)
    gx_fake, gw_fake, _ = _layer_grads("fake", x, w, grid, **cfg)
    monkeypatch.setattr(torch.version, "cuda", "11.8")
    # shared backends keep their device's GEMM choice: this test's layers get fresh ones, and later tests too
    monkeypatch.setattr(backends, "_shared_backend", functools.cache(backends._shared_backend.__wrapped__))

    def no_fp8(*args, **kwargs):
        raise AssertionError("torch._scaled_mm called although this torch is taken for a CUDA 11.8 build")

    monkeypatch.setattr(torch, "_scaled_mm", no_fp8)
    assert RealBackend().gemm_for(torch.device(CUDA)) == "cutlass"
    # the one-call path runs its FP8 GEMM in C++, past the patched torch._scaled_mm: its route says which GEMM runs
    assert backends._backend("real", "auto", False)._gx_route(torch.device(CUDA), True, x.shape[0], 96, in_f) == "int8"
    gx_real, gw_real, _ = _layer_grads("real", x, w, grid, **cfg)
    assert _rel(gx_real, gx_fake) < 1e-6 and _rel(gw_real, gw_fake) < 1e-6


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize(
    "cfg", [{}, {"gx_granularity": "per_tensor"}, {"abc": True}, {"gw_granularity": "per_channel"}]
)
def test_non_finite_grad_output_gives_non_finite_gradients(kernel_backend, value, fused, cfg) -> None:
    """One NaN or infinity in g_y: the scales of its group are non-finite (as the reference's), so are g_x and g_w;
    the finite groups keep the reference's codes and scales."""
    grid, in_f, out_f = TokenGrid(1, 14, 14), 64, 96
    lin = torch.nn.Linear(in_f, out_f, device=CUDA)
    layer = HOTLinear.from_float(lin, HOTConfig(backend="real", fused_grad_output=fused, **cfg), index=0)
    layer.hot_grid = grid
    x = _randn(2, grid.tokens, in_f, seed=1).to(CUDA).requires_grad_(True)
    g_y = _randn(2, grid.tokens, out_f, seed=2)
    g_y[1, 40, 7] = value
    layer(x).backward(g_y.to(CUDA))
    assert not torch.isfinite(x.grad).all() and not torch.isfinite(layer.weight.grad).all()
    assert torch.equal(layer.bias.grad.isfinite().cpu(), torch.arange(out_f) != 7)  # its column's sum alone
    g2d = g_y.reshape(-1, out_f)
    hq = HQSpec(16, 4, cfg.get("gx_granularity", "per_token"), 77)
    hla = HLASpec(_spatial(1, 14, 14), 8, 8, "stochastic", cfg.get("gw_granularity", "per_tensor"), 78)
    ref_codes, ref_scale = REF.hq_quantize_grad_output(g2d, hq)
    codes, scale = RealBackend(fused_grad_output=fused).quantize_grad_output(g2d.to(CUDA), hq, hla)[:2]
    scale = scale.cpu()
    assert torch.equal(scale.isfinite(), ref_scale.isfinite()) and not scale.isfinite().all()
    if hq.granularity == "per_token":
        rows = ref_scale.reshape(-1).isfinite()
        assert torch.equal(codes.cpu().float()[rows], ref_codes.float()[rows])
        assert torch.equal(scale[rows], ref_scale[rows])


@pytest.mark.parametrize("blocking", ["spatial", "official"])
@pytest.mark.parametrize("gw_granularity", ["per_tensor", "per_channel"])
def test_packed_input_like_matches_the_real_codes(kernel_backend, gw_granularity: str, blocking: str) -> None:
    """What torch.compile traces with is laid out as what the real backend returns (shape, stride, dtype): the
    kernels' codes at their pitch, or the reference's where the authors' blocking is not in the kernels."""
    from hot.methods import create_method

    config = HOTConfig(backend="real", abc=True, gw_granularity=gw_granularity, hla_blocking=blocking)
    method = create_method(config)
    x = _randn(3 * 197, 96, seed=5).to(CUDA)
    windows = _spatial(1, 14, 14) if blocking == "spatial" else hla_windows(197, blocking)
    real = method.pack_input(x, windows, None)
    like = method.packed_input_like(x, windows)
    assert [(t.shape, t.stride(), t.dtype, t.device) for t in like] == [
        (t.shape, t.stride(), t.dtype, t.device) for t in real
    ]


def test_compiled_real_training_step_equals_eager(kernel_backend) -> None:
    import copy

    import torch._dynamo as dynamo

    from hot import convert

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).to(CUDA)
    eager = convert(net, HOTConfig(backend="real", abc=True), token_grid=TokenGrid(1, 14, 14))
    compiled = copy.deepcopy(eager)
    x = _randn(4 * 197, 64, seed=3).to(CUDA).reshape(4, 197, 64)

    def grads(model: torch.nn.Module, run) -> list[torch.Tensor]:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            run(x).float().square().mean().backward()
        return [p.grad for p in model.parameters()]

    dynamo.reset()
    explained = dynamo.explain(copy.deepcopy(eager))(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    expected = grads(eager, eager)
    # aot_eager: the same kernels as eager around the HOT ops, so the comparison can be exact
    compiled_grads = grads(compiled, torch.compile(compiled, backend="aot_eager"))
    for a, b in zip(compiled_grads, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("how", ["deepcopy", "torch.save"])
def test_real_backend_model_copies_and_pickles(kernel_backend, how: str) -> None:
    """A converted model (backend real) survives copy.deepcopy and torch.save/load (timm's ModelEmaV2 deep-copies):
    the copy holds the same weights and step, and its backward gives the original's gradients bit for bit."""
    import copy
    import io

    from hot import convert

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64)).to(CUDA)
    original = convert(net, HOTConfig(backend="real", abc=True), token_grid=TokenGrid(0, 4, 4))
    x = _randn(8 * 16, 64, seed=5).to(CUDA).reshape(8, 16, 64)
    original(x).square().mean().backward()  # a step taken: the copy must carry the hash step on
    if how == "deepcopy":
        twin = copy.deepcopy(original)
    else:
        buffer = io.BytesIO()
        torch.save(original, buffer)
        buffer.seek(0)
        twin = torch.load(buffer, weights_only=False)
    assert type(twin[0].hot_method.backend_for(CUDA)).__name__ == "RealBackend"
    for model in (original, twin):
        model.zero_grad()
        model(x).square().mean().backward()
    for a, b in zip(original.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad)


@pytest.mark.parametrize("fused", [False, True])
def test_step_keys_give_the_integer_keys_codes(fused: bool) -> None:
    """A StepKey (the step in a device tensor, the key derived in the kernels) gives exactly the codes of the integer
    key hash_key computes for that step, on every quantiser that rounds stochastically; moving the step in place
    moves the codes with it."""
    backend = RealBackend(fused_grad_output=fused)
    g = _randn(4 * 197, 64, seed=21).to(CUDA)
    windows = _spatial(1, 14, 14)
    step = torch.tensor([41], dtype=torch.int64, device=CUDA)
    for granularity in ("per_token", "per_tensor"):
        for value in (41, 2**32 + 7):
            step.fill_(value)
            on_device = [StepKey(step, 5, 3, int(s), 2) for s in (Stream.GX_GRAD_OUTPUT, Stream.GW_GRAD_OUTPUT)]
            on_host = [hash_key(5, 3, value, int(s), 2) for s in (Stream.GX_GRAD_OUTPUT, Stream.GW_GRAD_OUTPUT)]
            results = []
            for hq_key, hla_key in (on_device, on_host):
                hq = HQSpec(16, 4, granularity, hq_key)
                hla = HLASpec(windows, 8, 8, "stochastic", "per_tensor", hla_key)
                results.append(backend.quantize_grad_output(g, hq, hla, column_sums=True))
                assert backend.fuses_grad_output(g, hq, hla) == fused
            for a, b in zip(*results, strict=True):
                assert torch.equal(a.float(), b.float())
    made = hash_uniform(5000, StepKey(step, 5, 3, 1, 2), CUDA)  # the reference ops' numbers on the GPU
    assert torch.equal(made.cpu(), uniform((5000,), hash_key(5, 3, 2**32 + 7, 1, 2)))
    first = backend.hla_quantize(g, HLASpec(windows, 8, 8, "stochastic", "per_tensor", StepKey(step, 0, 0, 1)))
    step.add_(1)
    second = backend.hla_quantize(g, HLASpec(windows, 8, 8, "stochastic", "per_tensor", StepKey(step, 0, 0, 1)))
    assert not torch.equal(first[0], second[0])  # a new step, new dither


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize(
    ("rows", "cols", "tokens", "granularity"),
    [
        (4 * 197, 768, 197, "per_token"),  # a row's codes in registers
        (2 * 197, 2304, 197, "per_tensor"),
        (32, 16400, 16, "per_token"),  # rows too long for the registers: the two-pass per-token kernel
    ],
)
def test_the_one_finaliser_hash_gives_the_reference_codes(fused, rows, cols, tokens, granularity) -> None:
    """rounding_hash "fmix32" on the GPU: both g_y quantisers' codes (HQ per token or per tensor, HLA stochastic over
    a ViT's 4x4 windows or 1x16 strips), separately and fused, with the key derived in the kernels from the step
    tensor, equal the reference's under the same hash, and differ from the spec hash's codes."""
    from hot.methods import Keys, layer_specs

    windows = hla_windows(tokens, "spatial", TokenGrid(1, 14, 14) if tokens == 197 else None)
    g = _randn(rows, cols, seed=cols, dtype=torch.bfloat16)
    step = torch.tensor([9], dtype=torch.int64, device=CUDA)
    backend = RealBackend(fused_grad_output=fused)
    found = {}
    for hash in ("fmix32", "fmix32x2"):
        config = HOTConfig(rounding_hash=hash, gx_granularity=granularity)
        on_device = layer_specs(config, cols, windows, Keys(3, 2, step))
        on_host = layer_specs(config, cols, windows, Keys(3, 2, 9))
        real = backend.quantize_grad_output(g.to(CUDA), on_device.grad_output, on_device.grad_output_hla)
        ref = REF.quantize_grad_output(g, on_host.grad_output, on_host.grad_output_hla)
        assert backend.fuses_grad_output(g.to(CUDA), on_device.grad_output, on_device.grad_output_hla) == fused
        _assert_codes(real.hq_codes, ref.hq_codes)
        _assert_bits(real.hq_scale, ref.hq_scale)
        _assert_codes(real.hla_codes, ref.hla_codes)
        _assert_bits(real.hla_scale, ref.hla_scale)
        found[hash] = real.hq_codes.cpu().float(), real.hla_codes.cpu().float()
    for a, b in zip(found["fmix32"], found["fmix32x2"], strict=True):
        assert (a != b).float().mean() > 0.05  # other dither, other codes


def test_a_real_layer_keeps_its_step_on_the_gpu(kernel_backend) -> None:
    layer = HOTLinear.from_float(torch.nn.Linear(64, 32, device=CUDA), HOTConfig(backend="real"), 0)
    x = torch.randn(4, 16, 64, device=CUDA, requires_grad=True)
    for _ in range(3):
        layer(x).sum().backward()
    assert layer.hot_state._counter.device.type == "cuda" and layer.hot_state.step == 3
    layer.hot_state.step = 10  # a checkpoint's step, written in place
    assert layer.get_extra_state()[0].item() == 10
    fake = HOTLinear.from_float(torch.nn.Linear(64, 32, device=CUDA), HOTConfig(backend="fake"), 0)
    fake(x).sum().backward()
    assert fake.hot_state._counter.device.type == "cpu"  # reference code reads the step on the host


@pytest.mark.parametrize(
    ("rows", "out_f", "in_f", "fused", "side", "data", "x_dtype"),
    [
        (394, 96, 64, False, True, False, torch.float32),
        (3152, 768, 3072, False, True, False, torch.float32),
        (394, 96, 64, True, True, False, torch.float32),  # the fused quantiser keeps one stream
        (394, 96, 64, False, False, False, torch.float32),
        # x and W given as data: W's codes in one launch with g_y's HQ codes, and x's with g_y's HLA codes where the
        # kernels take both in one launch (one side stream), else on their own stream
        (394, 96, 64, False, True, True, torch.bfloat16),
        (394, 96, 64, False, True, True, torch.float32),  # x float32 and g_y bfloat16: one launch takes one type
        (3152, 768, 3072, False, True, True, torch.bfloat16),  # x and g_y hold more tiles than a GPU holds at once
    ],
)
def test_the_g_w_chain_beside_the_g_x_chain_gives_the_in_order_gradients(
    rows, out_f, in_f, fused, side, data, x_dtype, monkeypatch
):
    from hot.backends import InputCodes, gradients_in_order
    from hot.backends import real as real_module
    from hot.backends.real import WeightCodes
    from hot.methods import Keys, layer_specs

    real = RealBackend(fused_grad_output=fused, side_stream=side)
    windows = _paper(197)
    specs = layer_specs(HOTConfig(hla_blocking="paper"), out_f, windows, Keys(7, 1, 3))
    hq, gy = specs.grad_output, specs.grad_output_hla
    g_y = _randn(rows, out_f, seed=5, dtype=torch.bfloat16).to(CUDA)
    x, w = _randn(rows, in_f, seed=6, dtype=x_dtype).to(CUDA), _randn(out_f, in_f, seed=7).to(CUDA) * 0.02

    def g_x_from(codes: torch.Tensor, scale: torch.Tensor, wc: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
        return real.hq_matmul(codes, scale, wc, ws, hq)

    def w_codes_from() -> tuple[torch.Tensor, torch.Tensor]:  # beside g_y's quantisers
        return real.hq_quantize_weight(w, hq)

    def g_w_from(codes: torch.Tensor, scale: torch.Tensor, xc: torch.Tensor, xs: torch.Tensor) -> torch.Tensor:
        return real.hla_matmul(codes, scale, xc, xs, gy)

    def x_codes_from() -> tuple[torch.Tensor, torch.Tensor]:  # made in the backward: beside g_y's HLA codes
        return real.hla_quantize(x, specs.input_hla)

    paired = False
    if data:
        w_codes_from, x_codes_from = WeightCodes(real, w, hq, False), InputCodes(real, x, specs.input_hla)
        assert real._weight_with_grad_output(w_codes_from, g_y, hq)
        paired = real._pairs_with_grad_output(x_codes_from, g_y, gy)
        assert paired is (rows == 394 and x_dtype == g_y.dtype)
    want = gradients_in_order(real, g_y, hq, gy, True, g_x_from, g_w_from, w_codes_from, x_codes_from)
    counts: list[int] = []
    pick = real_module._side_streams

    def spy(device, current, count):
        counts.append(count)
        return pick(device, current, count)

    monkeypatch.setattr(real_module, "_side_streams", spy)
    real.gradients(g_y, hq, gy, True, g_x_from, g_w_from, w_codes_from, x_codes_from)
    assert counts == []  # eager: one stream
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        real.gradients(g_y, hq, gy, True, g_x_from, g_w_from, w_codes_from, x_codes_from)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    counts.clear()
    with torch.cuda.graph(graph):  # captured: the g_w chain and x's codes on side streams (fused: one stream)
        got = real.gradients(g_y, hq, gy, True, g_x_from, g_w_from, w_codes_from, x_codes_from)
    streams = (1 if paired else 2) if data else 3  # the g_w chain's, x's unless paired, W's unless shared
    assert counts == ([streams] if side and not fused else [])
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b)


class _CountingOps:
    """The compiled ops, recording each one looked up, the positional arguments of each call and each call's name
    beside them."""

    def __init__(self, ops) -> None:
        self._ops, self.called, self.args, self.calls = ops, [], [], []

    def __getattr__(self, name: str):
        self.called.append(name)
        op = getattr(self._ops, name)
        if not callable(op):
            return op

        def call(*args):
            self.args.append(args)
            self.calls.append((name, args))
            return op(*args)

        return call


BF16, F32 = torch.bfloat16, torch.float32


@pytest.mark.parametrize(
    ("rows", "out_f", "in_f", "cfg", "gemm", "gx_dtype", "sums", "routes"),
    [
        # T = 197 in 1x16 strips: 104 projected rows a sample
        (394, 96, 64, {}, "auto", BF16, True, ("fp8", "int8_sm90")),  # R = 208
        (394, 96, 64, {}, "auto", F32, True, ("int8_sm90", "int8_sm90")),  # float32 g_x below 2^30 MACs
        (394, 32, 288, {}, "auto", F32, True, ("fp8", "int8_sm90")),  # but N = 9 K: small_gx_max_width's FP8 GEMM
        (591, 96, 64, {"abc": True}, "auto", BF16, True, ("fp8", "int8_sm90")),  # R = 312: K padded to 320
        (3152, 768, 3072, {"gx_granularity": "per_tensor"}, "auto", BF16, True, ("fp8", "int8_sm90")),  # tensor-wise
        (394, 96, 64, {"gw_granularity": "per_channel", "gy_rounding": "nearest"}, "auto", BF16, True,
         ("fp8", "int8_sm90")),
        (394, 96, 64, {"gx_bits": 8}, "auto", BF16, True, ("int8", "int8_sm90")),  # 8-bit g_x: the INT8 sm80 GEMM
        (394, 40, 32, {}, "auto", BF16, True, ("fp8", "int8_sm90")),  # O = 40: int8 g_y codes, converted (K 48)
        (394, 40, 32, {}, "auto", F32, True, ("int8_sm90", "int8_sm90")),  # O = 40: K padded to 48
        # per tensor with O = 40: no shared launch, but the codes made alone are int8, so both paths take INT8
        (394, 40, 32, {"gx_granularity": "per_tensor"}, "auto", F32, True, ("int8_sm90", "int8_sm90")),
        (394, 40, 24, {}, "auto", BF16, True, None),  # I = 24: no FP8 GEMM, so the calls one by one
        # a 14x14 grid and a class token in 4x4 windows: 129 rows a sample, R = 258, g_w's K padded to 272
        (394, 96, 64, {"hla_blocking": "spatial"}, "auto", BF16, True, ("fp8", "int8_sm90")),
        (394, 96, 64, {"hla_blocking": "spatial"}, "auto", F32, False, ("int8_sm90", "int8_sm90")),
        # the other families (their sm80 kernels run on Hopper too), float32 g_x, no bias
        (394, 96, 64, {}, "cutlass-int4", F32, False, ("int4", "int8")),
        (394, 96, 64, {}, "cutlass", F32, True, ("int8", "int8")),
        (394, 96, 64, {}, "cublas", torch.float16, False, ("fp8", "int8_lt")),
        # one finaliser a code (rounding_hash "fmix32"), per token and per tensor
        (394, 96, 64, {"rounding_hash": "fmix32"}, "auto", BF16, True, ("fp8", "int8_sm90")),
        (394, 96, 64, {"rounding_hash": "fmix32"}, "auto", F32, True, ("int8_sm90", "int8_sm90")),
        (3152, 768, 3072, {}, "auto", F32, True, ("fp8", "int8_sm90")),  # 7.4 G MACs: the FP8 GEMM, per token
        # per tensor: a captured backward quantises W and g_y alone (e4m3), so the one call keeps the FP8 GEMM too
        (394, 96, 64, {"gx_granularity": "per_tensor"}, "auto", F32, True, ("fp8", "int8_sm90")),
        (3152, 768, 3072, {"rounding_hash": "fmix32", "gx_granularity": "per_tensor"}, "auto", BF16, True,
         ("fp8", "int8_sm90")),
    ],
)  # fmt: skip
def test_a_layer_backward_in_one_call_equals_its_calls_one_by_one(
    rows, out_f, in_f, cfg, gemm, gx_dtype, sums, routes
) -> None:
    """RealBackend.layer_gradients runs the eager backward as one call of the compiled ops where the kernels and
    torch's GEMMs cover it: the gradients equal layer_gradients_in_parts' bit for bit (and in a CUDA graph), on the
    same g_x GEMM (where the one call takes the sm_90a INT8 one, the calls one by one are given int8 codes: alone
    the quantisers write e4m3 ones, which the FP8 GEMM reads, with another epilogue's rounding)."""
    from hot.backends import layer_gradients_in_parts
    from hot.backends.real import load_ops
    from hot.methods import Keys, layer_specs

    if _capability() != (9, 0):
        pytest.skip("the routes listed are compute capability 9.0's")
    real = RealBackend(gemm=gemm)
    if gemm == "auto" and not real._sm90_available(torch.cuda.current_device()):
        pytest.skip("this build has no sm_90a GEMM, which the auto routes listed take")
    real.ops = ops = _CountingOps(load_ops())
    step = torch.tensor([3], dtype=torch.int64, device=CUDA)
    config = HOTConfig(**{"hla_blocking": "paper", **cfg})
    windows = hla_windows(197, config.hla_blocking, TokenGrid(1, 14, 14))
    specs = layer_specs(config, out_f, windows, Keys(7, 1, step))
    hq, gy = specs.grad_output, specs.grad_output_hla
    g_y = _randn(rows, out_f, seed=5, dtype=torch.bfloat16).to(CUDA)
    x, w = _randn(rows, in_f, seed=6).to(CUDA), _randn(out_f, in_f, seed=7).to(CUDA) * 0.02
    x_codes = real.hla_quantize(x, specs.input_hla)
    in_parts = RealBackend(gemm=gemm)
    if routes is not None and routes[0] == "int8_sm90":
        in_parts._fp8_codes = lambda *args: False  # int8 codes, so the calls one by one take the INT8 GEMM too
    want = layer_gradients_in_parts(in_parts, g_y, w, lambda: x_codes, hq, gy, gx_dtype, sums)
    ops.called.clear()
    got = real.layer_gradients(g_y, w, lambda: x_codes, hq, gy, gx_dtype, sums)
    if routes is None:
        assert "layer_gradients" not in ops.called
    else:
        queries = {"weight_and_grad_output_in_one_launch"}  # a route's question, no launch
        assert [name for name in ops.called if name not in queries] == ["layer_gradients"]  # one call of the ops
        assert (ops.args[-1][10], ops.args[-1][19]) == routes  # its g_x and g_w routes
    assert (got[2] is None) is (want[2] is None) is (not sums)
    for a, b in zip(got, want, strict=True):
        assert a is None or (a.dtype == b.dtype and torch.equal(a, b))
    one_stream = RealBackend(gemm=gemm, side_stream=False)
    one_stream.ops = captured_ops = _CountingOps(load_ops())
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        one_stream.layer_gradients(g_y, w, lambda: x_codes, hq, gy, gx_dtype, sums)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    captured_ops.called.clear()
    with torch.cuda.graph(graph):  # one stream: the one call is captured
        captured = one_stream.layer_gradients(g_y, w, lambda: x_codes, hq, gy, gx_dtype, sums)
    assert ("layer_gradients" in captured_ops.called) is (routes is not None)
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(captured, want, strict=True):
        assert a is None or torch.equal(a, b)
    # side streams in the capture: where g_x takes the FP8 route per token, W's quantiser writes its column scales
    # and fp8_matmul divides by a block of 1 (no scale_columns launch)
    side = RealBackend(gemm=gemm)
    side.ops = side_ops = _CountingOps(load_ops())
    with torch.cuda.stream(warm):
        side.layer_gradients(g_y, w, lambda: x_codes, hq, gy, gx_dtype, sums)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    side_ops.calls.clear()
    with torch.cuda.graph(graph):
        captured = side.layer_gradients(g_y, w, lambda: x_codes, hq, gy, gx_dtype, sums)
    # (W's quantiser alone writes e4m3 codes and column scales for the FP8 GEMM whatever the product's size; the
    # shared launch, where g_x takes the INT8 GEMM, int8 codes, and the INT8 GEMM ignores the column scales)
    columns = routes is not None and routes[0] in ("fp8", "int8_sm90") and hq.granularity == "per_token"
    assert side._gx_columns_from_quantiser(g_y, w, hq, gx_dtype) is columns
    fp8_blocks = [args[4] for name, args in side_ops.calls if name == "fp8_matmul"]
    assert fp8_blocks == ([] if routes is None or routes[0] != "fp8" else [1] if columns else [hq.block])
    if routes is not None and routes[0] == "int8_sm90":
        gx_calls = [args for name, args in side_ops.calls if name == "int_matmul" and args[0].shape[0] == rows]
        assert [(args[0].dtype, args[-1]) for args in gx_calls] == [(torch.int8, "int8_sm90")]  # no conversion
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(captured, want, strict=True):
        assert a is None or torch.equal(a, b)


def test_int8_g_x_codes_only_where_eager_and_captured_backwards_both_take_the_int8_gemm() -> None:
    """A small float32 g_x with per-token scales takes the sm_90a INT8 GEMM on int8 codes, eager (the one call) and
    captured (W's launch shared with g_y's HQ rows) alike; where a captured backward quantises W or g_y alone (per
    tensor), for bf16 g_x and at training sizes, both keep e4m3 codes; where N is not a multiple of 16 neither has
    an FP8 or INT8 g_x GEMM."""
    from hot.methods import Keys, layer_specs

    real = RealBackend()
    if not real._sm90_available(torch.cuda.current_device()):
        pytest.skip("this build has no sm_90a GEMM")
    specs = layer_specs(HOTConfig(hla_blocking="paper"), 96, _paper(197), Keys(7, 1, 3))
    tensor_wise = HOTConfig(hla_blocking="paper", gx_granularity="per_tensor")
    per_tensor = layer_specs(tensor_wise, 96, _paper(197), Keys(7, 1, 3))
    hq, gy = specs.grad_output, specs.grad_output_hla
    g_y, w = torch.zeros(394, 96, device=CUDA), torch.zeros(96, 64, device=CUDA)
    assert real._int8_gx_codes(g_y, w, hq, gy, torch.float32)
    assert not real._int8_gx_codes(g_y, w, hq, gy, torch.bfloat16)
    assert per_tensor.grad_output.granularity == "per_tensor"
    assert not real._int8_gx_codes(g_y, w, per_tensor.grad_output, per_tensor.grad_output_hla, torch.float32)
    assert not real._int8_gx_codes(g_y, torch.zeros(96, 62, device=CUDA), hq, gy, torch.float32)  # N % 16: reference
    big = layer_specs(HOTConfig(hla_blocking="paper"), 768, _paper(197), Keys(7, 1, 3))
    g_big, w_big = torch.zeros(3152, 768, device=CUDA), torch.zeros(768, 3072, device=CUDA)
    assert not real._int8_gx_codes(g_big, w_big, big.grad_output, big.grad_output_hla, torch.float32)
    assert not RealBackend(gemm="cublas")._int8_gx_codes(g_y, w, hq, gy, torch.float32)


def test_a_capture_on_a_side_stream_still_forks(monkeypatch) -> None:
    """torch's streams come from a pool reused round robin, so a capture can run on the very stream cached as the g_w
    chain's: the backward then takes other side streams (none the capturing one), and its gradients are the eager
    ones."""
    from hot.backends import InputCodes
    from hot.backends import real as real_module
    from hot.methods import Keys, layer_specs

    real = RealBackend()
    specs = layer_specs(HOTConfig(hla_blocking="paper"), 96, _paper(197), Keys(7, 1, 3))
    hq, gy = specs.grad_output, specs.grad_output_hla
    g_y = _randn(394, 96, seed=5).to(CUDA)
    x, w = _randn(394, 64, seed=6).to(CUDA), _randn(96, 64, seed=7).to(CUDA) * 0.02
    pick = real_module._side_streams
    for paired in (True, False):
        x_codes = InputCodes(real, x, specs.input_hla) if paired else lambda: real.hla_quantize(x, specs.input_hla)
        want = real.layer_gradients(g_y, w, x_codes, hq, gy, torch.float32, True)
        chosen: list[tuple[torch.cuda.Stream, list[torch.cuda.Stream]]] = []

        def spy(device, current, count, pick=pick, chosen=chosen):
            streams = pick(device, current, count)
            chosen.append((current, streams))
            return streams

        monkeypatch.setattr(real_module, "_side_streams", spy)
        capture_stream = real_module._side_stream(g_y.device, 0)
        capture_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(capture_stream):
            real.layer_gradients(g_y, w, x_codes, hq, gy, torch.float32, True)  # warm-up on that stream
        torch.cuda.current_stream().wait_stream(capture_stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=capture_stream):
            got = real.layer_gradients(g_y, w, x_codes, hq, gy, torch.float32, True)
        (current, streams), *_ = chosen
        assert current == capture_stream and current not in streams and len(set(streams)) == len(streams) > 1 - paired
        graph.replay()
        torch.cuda.synchronize()
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b)


def test_one_token_keeps_the_column_scales_launch() -> None:
    """One token's one scale and W's one make fp8_matmul tensor-wise: I column scales from W's quantiser would take
    the row-wise epilogue instead, so a capture of one token keeps the calls of layer_gradients_in_parts."""
    from hot.methods import Keys, layer_specs

    real = RealBackend(gemm="cublas")  # the FP8 g_x GEMM at any size (auto takes the INT8 one for small products)
    hq = layer_specs(HOTConfig(hla_blocking="paper"), 96, _paper(197), Keys(7, 1, 3)).grad_output
    w = torch.zeros(96, 64, device=CUDA)
    one, two = torch.zeros(1, 96, device=CUDA), torch.zeros(2, 96, device=CUDA)
    if not fp8_gemm_available() or real._gx_route(two.device, True, 2, 96, 64) != "fp8":
        pytest.skip("this GPU or torch has no FP8 GEMM route")
    assert hq.granularity == "per_token"
    assert not real._gx_columns_from_quantiser(one, w, hq, torch.float32)
    assert real._gx_columns_from_quantiser(two, w, hq, torch.float32)


def test_the_integer_gemm_route_names_an_unknown_route() -> None:
    a = torch.zeros(32, 32, dtype=torch.int8, device=CUDA)
    one = torch.ones(1, device=CUDA)
    with pytest.raises(ValueError, match="unknown integer GEMM route 'int2'"):
        RealBackend().ops.int_matmul(a, a, one, one, 1.0, "int2")


@pytest.mark.parametrize("where", ["g_w chain", "W's codes"])
def test_an_error_on_the_side_stream_reaches_the_caller_with_the_capture_joined(where: str) -> None:
    from hot.methods import Keys, layer_specs

    real = RealBackend()
    specs = layer_specs(HOTConfig(hla_blocking="paper"), 96, _paper(197), Keys(7, 1, 3))
    g_y = _randn(394, 96, seed=5).to(CUDA)

    def fails(*codes: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(f"{where} failed")

    def x_codes() -> tuple[torch.Tensor, torch.Tensor]:
        return g_y, g_y

    hq, hla = specs.grad_output, specs.grad_output_hla
    real.gradients(g_y, hq, hla, False, lambda c, *_: c, lambda c, *_: c, x_codes, x_codes)  # warm-up
    torch.cuda.synchronize()
    g_w_from, w_codes_from = (fails, x_codes) if where == "g_w chain" else (lambda c, *_: c, fails)
    with pytest.raises(RuntimeError, match=f"{where} failed"), torch.cuda.graph(torch.cuda.CUDAGraph()):
        real.gradients(g_y, hq, hla, False, lambda c, *_: c, g_w_from, w_codes_from, x_codes)
    torch.cuda.synchronize()  # the device is usable afterwards
    assert not torch.cuda.is_current_stream_capturing()


def test_repeated_hla_basis_rows_are_an_error() -> None:
    with pytest.raises(ValueError, match="HLA basis rows must be distinct, got row 2 twice"):
        RealBackend().ops.hla_project(torch.zeros(16, 4, device=CUDA), [16, 0, 1, 16, 16], [0, 2, 2])


def test_capturing_a_reference_layer_in_a_cuda_graph_is_an_error() -> None:
    """The reference backend keeps the step on the host, which a replay would not advance: capture is refused."""
    layer = HOTLinear.from_float(torch.nn.Linear(64, 32, device=CUDA), HOTConfig(backend="fake"), 0)
    x = torch.randn(4, 16, 64, device=CUDA, requires_grad=True)
    layer(x).sum().backward()  # warm-up outside the capture
    with pytest.raises(RuntimeError, match="cannot be captured in a CUDA graph"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            layer(x)


def _linear_pair(bias: bool) -> tuple[HOTLinear, HOTLinear]:
    import copy

    torch.manual_seed(0)
    layer = HOTLinear.from_float(torch.nn.Linear(64, 96, bias=bias, device=CUDA), HOTConfig(backend="real"), 0)
    layer.hot_grid = TokenGrid(1, 14, 14)
    return layer, copy.deepcopy(layer)


def test_a_cuda_graph_replays_each_step_with_its_own_dither(kernel_backend) -> None:
    """A HOT layer's forward and backward captured in one CUDA graph: every replay advances the layer's step on the
    device and gives the gradients an eager twin gives at that step, bit for bit (so each replay draws new dither)."""
    layer, twin = _linear_pair(bias=True)
    x = _randn(2 * 197, 64, seed=8).to(CUDA).reshape(2, 197, 64).requires_grad_()
    weight_out = _randn(2 * 197, 96, seed=9).to(CUDA).reshape(2, 197, 96)  # loss (y · w).sum(): g_y = w, exactly

    def step(model: HOTLinear) -> None:
        (model(x) * weight_out).sum().backward()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up outside the capture (the counter is made on the device here)
            step(layer)
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(2):
        step(twin)
    graph = torch.cuda.CUDAGraph()
    layer.zero_grad(set_to_none=True)
    x.grad = None
    with torch.cuda.graph(graph):
        step(layer)
    graph_x_grad = x.grad  # the graph's buffers: every replay writes its gradients there
    assert layer.hot_state.step == 2  # capturing ran nothing
    previous = None
    for _ in range(3):
        graph.replay()
        twin.zero_grad(set_to_none=True)
        x.grad = None
        step(twin)
        got = [layer.weight.grad, layer.bias.grad, graph_x_grad]
        want = [twin.weight.grad, twin.bias.grad, x.grad]
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b)
        if previous is not None:
            assert not torch.equal(previous, layer.weight.grad)
        previous = layer.weight.grad.clone()
    assert layer.hot_state.step == twin.hot_state.step == 5


def test_reduce_overhead_compile_equals_eager(kernel_backend) -> None:
    """torch.compile(mode="reduce-overhead") on a converted model: CUDA graphs are used (no skip), and five training
    steps give eager's gradients bit for bit (ReLU and the exact loss gradient leave no room for other rounding)."""
    import copy

    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    from hot import convert

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).to(CUDA)
    eager = convert(net, HOTConfig(backend="real"), token_grid=TokenGrid(1, 14, 14))
    graphed = copy.deepcopy(eager)
    x = _randn(2 * 197, 64, seed=3).to(CUDA).reshape(2, 197, 64)
    weight_out = _randn(2 * 197, 64, seed=4).to(CUDA).reshape(2, 197, 64)
    dynamo.reset()
    counters.clear()
    run = torch.compile(graphed, mode="reduce-overhead")
    previous = None
    for _ in range(5):
        for model, forward in ((eager, eager), (graphed, run)):
            model.zero_grad(set_to_none=True)
            (forward(x) * weight_out).sum().backward()
        for a, b in zip(graphed.parameters(), eager.parameters(), strict=True):
            assert torch.equal(a.grad, b.grad)
        if previous is not None:
            assert not torch.equal(previous, eager[0].weight.grad)
        previous = eager[0].weight.grad.clone()
    assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
    assert [layer.hot_state.step for layer in (graphed[0], graphed[2])] == [5, 5]


# --- random and ragged shapes -------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.integers(1, 70),
    cols=st.integers(1, 130),
    per_token=st.booleans(),
    key=st.integers(0, 2**32 - 1),
    bf16=st.booleans(),
)
def test_hq_random_shapes(kernel_backend, rows: int, cols: int, per_token: bool, key: int, bf16: bool) -> None:
    g_y = _randn(rows, cols, seed=rows * 131 + cols, dtype=torch.bfloat16 if bf16 else torch.float32)
    block = largest_block(cols, 16)
    granularity = "per_token" if per_token else "per_tensor"
    ref_codes, ref_scale = REF.hq_quantize_grad_output(g_y, HQSpec(block, 4, granularity, key))
    codes, scale = kernel_backend.hq_quantize_grad_output(g_y.to(CUDA), HQSpec(block, 4, granularity, key))
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)
    w = (torch.randint(-8, 9, (cols, 13), generator=torch.Generator().manual_seed(cols)).float()) / 16
    b_codes, b_scale = kernel_backend.hq_quantize_weight(w.to(CUDA), HQSpec(block, 4))
    b = block_hadamard(w, block, dim=0)
    torch.testing.assert_close(b_scale.cpu(), sawb_scale(b, 4), rtol=1e-6, atol=0)
    rb_codes = quantize(b, b_scale.cpu(), 4, "nearest")  # SAWB's mean: see test_hq_weight_codes_given_scale
    _assert_codes(b_codes, rb_codes)
    out = kernel_backend.hq_matmul(codes, scale, b_codes, b_scale, HQSpec(block, 4))
    ref = REF.hq_matmul(ref_codes, ref_scale, rb_codes, b_scale.cpu(), HQSpec(block, 4))
    _assert_dequantized(kernel_backend, out, ref)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prefix=st.integers(0, 3),
    height=st.integers(1, 9),
    width=st.integers(1, 12),
    spatial=st.booleans(),
    samples=st.integers(1, 4),
    channels=st.integers(1, 40),
    rank=st.integers(1, 16),
    per_channel=st.booleans(),
    stochastic=st.booleans(),
    key=st.integers(0, 2**32 - 1),
)
def test_hla_random_shapes(
    kernel_backend, prefix, height, width, spatial, samples, channels, rank, per_channel, stochastic, key
) -> None:
    grid = TokenGrid(prefix, height, width)
    windows = hla_windows(grid.tokens, "spatial" if spatial else "paper", grid)
    t = _randn(grid.tokens * samples, channels, seed=grid.tokens * 97 + channels)
    granularity = "per_channel" if per_channel else "per_tensor"
    rounding = "stochastic" if stochastic else "nearest"
    spec = HLASpec(windows, rank, 8, rounding, granularity, key)
    ref_codes, ref_scale = REF.hla_quantize(t, spec)
    codes, scale = kernel_backend.hla_quantize(t.to(CUDA), spec)
    _assert_codes(codes, ref_codes)
    _assert_bits(scale, ref_scale)
    out = kernel_backend.hla_matmul(codes, scale, codes, scale, HLA16)
    ref = REF.hla_matmul(ref_codes.double(), ref_scale.double(), ref_codes.double(), ref_scale.double(), HLA16)
    torch.testing.assert_close(out.cpu().double(), ref.double(), rtol=1e-6, atol=0)


# --- bad inputs ---------------------------------------------------------------------------------


def test_bad_inputs_raise_clear_errors(kernel_backend) -> None:
    import hot_kernels

    be = kernel_backend
    g = torch.randn(32, 64, device=CUDA)
    with pytest.raises(ValueError, match="CUDA device"):
        be.hq_quantize_grad_output(g.cpu(), HQSpec(16, 4, "per_token", 1))
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        be.hq_quantize_grad_output(g.to(torch.int32), HQSpec(16, 4, "per_token", 1))
    with pytest.raises(ValueError, match="2-D"):
        be.hq_quantize_grad_output(g[None], HQSpec(16, 4, "per_token", 1))
    with pytest.raises(ValueError, match="block"):
        be.hq_quantize_grad_output(g, HQSpec(3, 4, "per_token", 1))
    with pytest.raises(ValueError, match="multiple of the Hadamard block"):
        be.hq_quantize_grad_output(g[:, :60], HQSpec(16, 4, "per_token", 1))
    with pytest.raises(ValueError, match="bits"):
        be.hq_quantize_grad_output(g, HQSpec(16, 5, "per_token", 1))
    with pytest.raises(ValueError, match="granularity"):
        be.hq_quantize_grad_output(g, HQSpec(16, 4, "rowwise", 1))
    with pytest.raises(ValueError, match="hash key"):
        be.hq_quantize_grad_output(g, HQSpec(16, 4, "per_token", -1))
    with pytest.raises(ValueError, match="multiple of the Hadamard block"):
        be.hq_quantize_weight(torch.randn(60, 8, device=CUDA), HQSpec(16, 4))
    with pytest.raises(ValueError, match="whole number of samples"):
        be.hla_quantize(g, HLASpec(_paper(5), 8, 8, "stochastic", "per_tensor", 1))
    with pytest.raises(ValueError, match="rank"):
        be.hla_quantize(g, HLASpec(_paper(16), 17, 8, "stochastic", "per_tensor", 1))
    with pytest.raises(ValueError, match="key is needed for stochastic rounding"):
        be.hla_quantize(g, HLASpec(_paper(16), 8, 8, "stochastic", "per_tensor", None))
    with pytest.raises(ValueError, match="HLAWindows"):
        be.hla_quantize(g, HLASpec(16, 8, 8, "stochastic", "per_tensor", 1))
    codes = torch.zeros(32, 64, dtype=torch.int8, device=CUDA)
    one = torch.ones((), device=CUDA)
    with pytest.raises(ValueError, match="do not agree"):
        be.hq_matmul(codes, one, codes, one, HQSpec(16, 4))
    with pytest.raises(ValueError, match="int8"):
        be.hq_matmul(codes.float(), one, codes.t(), one, HQSpec(16, 4))
    with pytest.raises(ValueError, match="a_scale"):
        be.hq_matmul(codes, torch.ones(5, device=CUDA), codes.t(), one, HQSpec(16, 4))
    with pytest.raises(ValueError, match="do not agree"):
        be.hla_matmul(codes, one, codes[:8], one, HLA16)
    # the low-level ops check layout themselves (ValueError from TORCH_CHECK_VALUE)
    with pytest.raises(ValueError, match="contiguous"):
        hot_kernels._C.hq_quantize_grad_output(g.t(), 16, 4, True, [1], False, None, 2)
    with pytest.raises(ValueError, match="aligned"):
        hot_kernels._C.hq_quantize_grad_output(g.reshape(-1)[1:65].reshape(1, 64), 16, 4, True, [1], False, None, 2)


def test_gx_codes_are_fp8_operands_on_sm90(kernel_backend) -> None:
    """With the FP8 GEMM the quantisers write e4m3 codes, so hq_matmul needs no conversion pass (small float32
    products take the INT8 sm_90a GEMM only on the int8 codes the launches that make both code sets write)."""
    if kernel_backend._gx_gemm(torch.device(CUDA)) != "cublas":  # cutlass-sm90 differs from cublas in g_w only
        pytest.skip("the FP8 g_x GEMM is the sm_90 path")
    hq = HQSpec(16, 4, "per_token", 1)
    codes, scale = kernel_backend.hq_quantize_grad_output(torch.randn(32, 64, device=CUDA), hq)
    w_codes, w_scale = kernel_backend.hq_quantize_weight(torch.randn(64, 48, device=CUDA), HQSpec(16, 4))
    assert codes.dtype == torch.float8_e4m3fn and w_codes.dtype == torch.float8_e4m3fn
    # a small float32 product: on these codes the FP8 GEMM, with no conversion pass to int8 for the INT8 one
    names = _cuda_kernels(lambda: kernel_backend.hq_matmul(codes, scale, w_codes, w_scale, hq, torch.float32))
    assert not any("codes_to" in n or "cutlass" in n for n in names), names
    odd, _ = kernel_backend.hq_quantize_grad_output(torch.randn(32, 24, device=CUDA), HQSpec(8, 4, "per_token", 1))
    assert odd.dtype == torch.int8  # K not a multiple of 16: the GEMM pads, so int8 codes


def test_low_level_ops_raise(kernel_backend) -> None:
    """Bad arguments of every adapter raise ValueError naming the problem (no crash)."""
    from hot_kernels import _C

    acc = torch.zeros(4, 8, dtype=torch.int32, device=CUDA)
    one = torch.ones(1, device=CUDA)
    with pytest.raises(ValueError, match="row scale has 3 elements"):
        _C.dequantize(acc, torch.ones(3, device=CUDA), one, 16.0)
    with pytest.raises(ValueError, match="acc must be a CUDA tensor"):
        _C.dequantize(acc.cpu(), one, one, 16.0)
    with pytest.raises(ValueError, match="acc must be Float"):
        _C.dequantize(acc.double(), one, one, 16.0)
    a, b = _int_codes((64, 8), -7, 7, 1).to(CUDA), _int_codes((96, 8), -7, 7, 2).to(CUDA)
    with pytest.raises(ValueError, match="multiple of 16"):
        _C.cutlass_gemm_s8(a, b)
    with pytest.raises(ValueError, match="a must be Char"):
        _C.cutlass_gemm_s8(a.float(), b)
    with pytest.raises(ValueError, match="multiple of 32"):
        _C.cutlass_gemm_s4(a.view(torch.uint8), b.view(torch.uint8))
    with pytest.raises(ValueError, match="cols_pad"):
        _C.codes_to_e4m3(a, 4)
    x64 = torch.randn(64, 4, device=CUDA)
    flags = (8, False, False, [0], False, None, 2)  # bits, stochastic, per_channel, key, column_sums, step, rounds
    with pytest.raises(ValueError, match="aligned"):
        _C.hla_quantize(torch.randn(257, device=CUDA)[1:].reshape(64, 4), [16, 0, 1, 16, 16], [0], *flags)
    with pytest.raises(ValueError, match=r"1 prefix \+ 4x4 grid is not T = 16"):
        _C.hla_quantize(x64, [16, 1, 4, 4, 4], [0], *flags)
    with pytest.raises(ValueError, match="4x4, or 1x16 strips"):
        _C.hla_quantize(x64, [16, 0, 2, 8, 8], [0], *flags)
    g = torch.randn(32, 64, device=CUDA)
    with pytest.raises(ValueError, match="fp8 operands hold 4-bit codes only"):
        _C.hq_quantize_grad_output(g, 16, 8, True, [1], True, None, 2)
    with pytest.raises(ValueError, match="fp8 operands hold 4-bit codes only"):
        _C.quantize_grad_output(
            g, [16, 0, 1, 16, 16], 16, 8, True, [1], True, [0, 1], 8, False, True, [2], False, None, 2
        )
    step = torch.zeros(1, dtype=torch.int64, device=CUDA)
    key_cases = [
        (([1, 2], None), "must be \\[key\\] or \\[seed, layer, stream, rank\\], got 2"),
        (([1, 2, 3, 4], None), "needs the step tensor"),
        (([2**32], None), "not a 32-bit unsigned integer"),
        (([1, 2, 3, 4], step.float()), "1-element int64 tensor"),
        (([1, 2, 3, 4], step.cpu()), "step is on cpu"),
    ]
    for (key, key_step), message in key_cases:
        with pytest.raises(ValueError, match=message):
            _C.hq_quantize_grad_output(g, 16, 4, True, key, False, key_step, 2)
    with pytest.raises(ValueError, match="hash_rounds must be 1"):
        _C.hq_quantize_grad_output(g, 16, 4, True, [1], False, None, 0)
    with pytest.raises(ValueError, match="step must hold one element"):
        _C.advance_step(torch.zeros(2, dtype=torch.int64, device=CUDA))


# --- fake against real: codes and training ------------------------------------------------------


def test_real_codes_equal_the_reference_codes_in_a_vit_layer(kernel_backend) -> None:
    """hot bench's equivalence section: every code of the three quantisers, the real backend's against the CPU
    reference's, at a ViT's windows (a class token and a 7×7 grid)."""
    found = code_mismatches("cuda", 32 * 50, 128, 64, 50, grid=TokenGrid(1, 7, 7))
    assert found["elements"] > 0
    assert {k: v for k, v in found.items() if k != "elements"} == {
        "hq_grad_output": 0, "hla_grad_output": 0, "hla_input": 0
    }  # fmt: skip


def test_fake_and_real_training_agree(kernel_backend) -> None:
    """Both backends train the same model to the same losses step by step and to the same held-out accuracy;
    20 AdamW steps learn the task (0.76 with the fake backend on the CPU, chance 0.1), so the accuracy bound can fail
    for a backward that is wrong."""
    result = equivalence("cuda", steps=20, batch=32)
    assert result["passed"], result["rel_loss_diffs"]
    assert all(run["held_out_accuracy"] > 0.5 for run in result["runs"]), result["runs"]
    assert abs(result["accuracy_diff"]) <= 0.02, result["accuracy_diff"]  # 5 of 256 held-out predictions


def _lora_grads(backend: str, x: torch.Tensor, y: torch.Tensor) -> tuple[list[float], dict[str, torch.Tensor], set]:
    from hot.convert import hot_layers
    from hot.train.config import TrainConfig
    from hot.train.models import build_model

    torch.manual_seed(5)
    config = TrainConfig(method="lora_hot_both", lora={"rank": 4, "alpha": 8}, hot={"backend": backend, "seed": 3})
    model = build_model(config, 10, 1).to(CUDA)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3)
    losses, first = [], {}
    for step in range(4):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if step == 0:
            first = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        opt.step()
        losses.append(loss.item())
    return losses, first, {layer.hot_state.backend for _, layer in hot_layers(model)} - {None}


def test_lora_with_hot_on_frozen_and_decomposed_weights_real_equals_fake(kernel_backend) -> None:
    """A peft LoRA ViT with HOT on its frozen base layers and on the rank-4 adapters (Linear and Conv2d, whose
    4-wide dimensions the kernels pad): the real backend's gradients and losses are the reference's."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 1, 28, 28, generator=g).to(CUDA)
    y = torch.randint(0, 10, (64,), generator=g).to(CUDA)
    real_losses, real_grads, real_used = _lora_grads("real", x, y)
    fake_losses, fake_grads, fake_used = _lora_grads("fake", x, y)
    assert real_used == {"real"} and fake_used == {"fake"}
    assert real_grads.keys() == fake_grads.keys() and any(".lora_A." in n for n in real_grads)
    rel = {n: _rel(real_grads[n], fake_grads[n]) for n in real_grads if fake_grads[n].abs().sum() > 0}
    assert max(rel.values()) < 1e-3, sorted(rel.items(), key=lambda kv: -kv[1])[:5]
    diffs = [abs(a - b) / abs(b) for a, b in zip(real_losses, fake_losses, strict=True)]
    assert max(diffs) < 1e-3, (real_losses, fake_losses)


@pytest.mark.parametrize("mode", ["eager", "reduce-overhead"])
def test_recomputed_inputs_equal_the_saved_codes_on_the_gpu(kernel_backend, mode: str) -> None:
    """recompute_inputs with the real backend, under bf16 autocast: each ViT block's qkv and fc1 make their input's
    codes again in the backward from their LayerNorm's input, fc2 from fc1's output, proj from its input itself (a
    view of the fused attention's output, which the attention keeps). Eagerly, three steps give the gradients of a
    twin that keeps the codes, bit for bit, and the saved bytes shrink by the four layers' codes.
    Under CUDA graphs (no skip) the forward's norms and GELU are inductor's kernels and the backward's eager
    PyTorch's, which may differ in the last bit: the first step's gradients are those of the compiled twin that
    keeps the codes to 1e-2 (a wrong source is off by about 1)."""
    import copy

    import timm
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    from hot import convert

    torch.manual_seed(0)
    net = timm.create_model("vit_tiny_patch16_224", img_size=64, patch_size=8, depth=2, num_classes=10).to(CUDA)
    keeps = convert(copy.deepcopy(net), HOTConfig(backend="real", abc=True))
    recomputes = convert(net, HOTConfig(backend="real", abc=True, recompute_inputs="all"))
    paired = [
        layer
        for block in recomputes.blocks
        for layer in (block.attn.qkv, block.attn.proj, block.mlp.fc1, block.mlp.fc2)
    ]
    assert all(layer.hot_input_source is not None for layer in paired)
    x = _randn(4 * 3 * 64, 64, seed=5).to(CUDA).reshape(4, 3, 64, 64)
    dynamo.reset()
    counters.clear()
    compiled = mode != "eager"
    runs = {
        keeps: torch.compile(keeps, mode="reduce-overhead") if compiled else keeps,
        recomputes: torch.compile(recomputes, mode="reduce-overhead") if compiled else recomputes,
    }
    names = [name for name, _ in keeps.named_parameters()]
    for _ in range(1 if compiled else 3):
        grads = []
        for model, forward in runs.items():
            model.zero_grad(set_to_none=True)
            if compiled:  # two models' CUDA graphs, one after the other: each run a step of its own
                torch.compiler.cudagraph_mark_step_begin()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = forward(x)
            out.float().square().mean().backward()
            grads.append([p.grad.clone() for p in model.parameters()])  # before the next graph's run reuses them
        for name, a, b in zip(names, *grads, strict=True):
            if compiled:
                assert (a - b).norm() <= 1e-2 * a.norm(), name
            else:
                assert torch.equal(a, b), name
    if compiled:
        assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
        return

    def saved(model: torch.nn.Module) -> int:
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        seen: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            if t.untyped_storage().data_ptr() not in params:
                seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cuda", dtype=torch.bfloat16):
            model(x)
        return sum(seen.values())

    rows = 4 * (4 * 8 + 1)  # 4 samples of an 8x8 grid: 4 windows' 8 rows and the class token's
    assert saved(keeps) - saved(recomputes) >= rows * sum(layer.in_features for layer in paired)


def test_a_captured_recompute_runs_on_the_side_stream(kernel_backend, monkeypatch) -> None:
    """Under CUDA graphs (torch.compile's reduce-overhead) each paired layer makes its input again for the g_w
    chain, which the capture queues on a side stream (x's codes', beside g_y's HLA codes and the g_x chain): every
    recompute recorded while a graph is captured ran there, and some were captured (cudagraph trees record from the
    second step)."""
    import timm
    import torch._dynamo as dynamo

    import hot.backends.real as real
    import hot.functional as functional
    from hot import convert

    made, drawn = functional._recomputed_input, real._side_streams
    seen: list[tuple[bool, torch.cuda.Stream]] = []
    operands: list[torch.cuda.Stream] = []  # the stream each captured backward gave x's codes
    capturing: list[torch.cuda.Stream] = []

    def recorded(*args, **kwargs) -> torch.Tensor:
        seen.append((torch.cuda.is_current_stream_capturing(), torch.cuda.current_stream()))
        return made(*args, **kwargs)

    def side_streams(device, current, count) -> list[torch.cuda.Stream]:
        streams = drawn(device, current, count)
        capturing.append(current)
        operands.extend(streams[1:2])  # after the g_w chain's: x's codes' own, where x is not paired
        return streams

    monkeypatch.setattr(functional, "_recomputed_input", recorded)
    monkeypatch.setattr(real, "_side_streams", side_streams)
    torch.manual_seed(0)
    net = timm.create_model("vit_tiny_patch16_224", img_size=64, patch_size=8, depth=2, num_classes=10).to(CUDA)
    model = convert(net, HOTConfig(backend="real", abc=True, recompute_inputs="all"))
    forward = torch.compile(model, mode="reduce-overhead")
    x = _randn(4 * 3 * 64, 64, seed=5).to(CUDA).reshape(4, 3, 64, 64)
    dynamo.reset()
    for _ in range(3):
        model.zero_grad(set_to_none=True)
        torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = forward(x)
        out.float().square().mean().backward()
    torch.cuda.synchronize()
    captured = [stream for capturing, stream in seen if capturing]
    assert captured, seen  # qkv, fc1 and fc2 of two blocks recompute (proj keeps x itself)
    # torch's stream pool can hand the capture a side stream's handle, so which side stream is x's varies
    assert all(stream in operands and stream not in capturing for stream in captured), (captured, operands)
