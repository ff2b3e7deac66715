"""The kernels' per-element arithmetic (kernels/csrc/quant_scalar.cuh), compiled for the CPU with nvcc, bit for bit
against the PyTorch reference: the counter hash, scales, stochastic and nearest codes, the e4m3 operand bytes.

The device build runs the same functions with IEEE round-to-nearest intrinsics in place of plain float
arithmetic; the GPU tests (test_kernels_gpu.py) check the kernels themselves.
"""

from __future__ import annotations

import functools
import operator
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from hot.hadamard import block_hadamard
from hot.hla import HLAWindows, TokenGrid, hla_windows, lp_l1_rows, projected_rows
from hot.quant import absmax_scale, qmax, quantize, sawb_scale
from hot.rounding import HASHES, MASK32, hash_key, hash_rounds, uniform, uniform_at

pytestmark = pytest.mark.build
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, build_config, nvcc: str):
    """Run one op of the compiled host driver: bytes in, bytes out."""
    exe = tmp_path_factory.mktemp("quant_scalar") / "quant_scalar_host"
    flags = [f for f in build_config.NVCC_FLAGS if f != "-DNDEBUG"]
    cmd = [nvcc, *flags, f"-I{build_config.CSRC}", str(HERE / "quant_scalar_host.cu"), "-o", str(exe)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"nvcc failed on quant_scalar_host.cu:\n{result.stderr[-4000:]}"

    def run(op: str, payload: bytes) -> bytes:
        done = subprocess.run([str(exe), op], input=payload, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout

    return run


def _grad_like(rows: int, cols: int, seed: int) -> torch.Tensor:
    """Gradient-like values over many magnitudes, with zero rows and exact multiples of the scale."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(rows, cols, generator=g) * torch.exp2(torch.randint(-30, 10, (rows, 1), generator=g).float())
    t[::7] = 0.0
    t[3::11, ::5] = torch.randint(-7, 8, t[3::11, ::5].shape, generator=g).float()  # v / s integral
    return t


@pytest.mark.parametrize("hash", HASHES)
def test_hash_uniform_is_the_reference_hash(host, hash: str) -> None:
    key, n = 0xA5F00D17, 100_000
    index = np.arange(n, dtype=np.uint64)
    # indices beyond 2^32 wrap: the hash sees the low 32 bits, as the reference's index & MASK32
    for offset in (0, 2**32):
        payload = struct.pack("<IIQ", key, hash_rounds(hash), n) + (index + np.uint64(offset)).tobytes()
        got = torch.from_numpy(np.frombuffer(host("uniform", payload), dtype=np.float32).copy())
        assert torch.equal(got, uniform((n,), key, hash=hash))


def test_hash_key_is_the_reference_key(host) -> None:
    # the kernels derive a layer's key from the step the device holds: every part at its edges, the rank's branch,
    # and parts the reference masks to 32 bits (a step past 2^32 wraps)
    edges = [0, 1, 2, 0x7FFFFFFF, 0x80000000, MASK32]
    rng = np.random.default_rng(0)
    parts = [list(p) for p in rng.choice(edges, size=(200, 5))] + [list(p) for p in rng.integers(0, 2**32, (300, 5))]
    parts += [[7, 3, 2**32 + 5, 1, 0], [7, 3, 2**40 + 9, 2, 3]]
    packed = np.array([[int(v) & MASK32 for v in p] for p in parts], dtype=np.uint32)
    out = host("hash_key", struct.pack("<Q", len(parts)) + packed.tobytes())
    got = np.frombuffer(out, dtype=np.uint32).tolist()
    assert got == [hash_key(*(int(v) for v in p)) for p in parts]


@pytest.mark.parametrize(("bits", "granularity"), [(4, "per_token"), (4, "per_tensor"), (8, "per_tensor")])
def test_stochastic_codes_match_quantize(host, bits: int, granularity: str) -> None:
    v, key = _grad_like(300, 96, seed=bits), 12345
    scale = absmax_scale(v, bits, granularity)
    u = uniform(v.shape, key)
    s = scale.expand_as(v)
    payload = torch.stack([v, s, u], dim=-1).numpy().astype(np.float32).tobytes()
    out = host("stochastic", struct.pack("<iQ", qmax(bits), v.numel()) + payload)
    codes = np.frombuffer(out[: v.numel()], dtype=np.int8)
    values = np.frombuffer(out[v.numel() :], dtype=np.float32)
    expected = quantize(v, scale, bits, "stochastic", key).reshape(-1)
    assert torch.equal(torch.from_numpy(codes.astype(np.float32)), expected)
    assert torch.equal(torch.from_numpy(values.copy()), expected)


RUNS_OF_4 = 0xFFFFFFFF  # the host's stride for four runs of 4 (stochastic_run_codes_biased<4>)


@pytest.mark.parametrize(
    ("bits", "stride", "hash"),
    [
        (bits, stride, hash)
        for bits, stride in [(4, 1), (8, 768), (4, 0), (4, RUNS_OF_4)]
        for hash in ("fmix32x2", "fmix32")
    ],
)
def test_stochastic_code_groups_are_the_codes_one_by_one(host, bits: int, stride: int, hash: str) -> None:
    """The kernels' grouped codes (one check for 16 quotients, the group divided exactly when one lies below 2^-100
    or the scale or its reciprocal is not finite): the reference's floor(v / s + u), clamped, at u of
    index + k * stride (stride 0: a run, u at index + k from an index a multiple of 16, the HQ codes' form, with runs
    beside 2^16 boundaries and the last one below 2^32; RUNS_OF_4: four runs of 4, HQ's block 4, from indices that
    are multiples of 4 but mostly not of 16). Each group's scale is its absmax scale (the kernels'
    precondition), or one made from larger values elsewhere (a row's other chunks: tiny, with an infinite reciprocal,
    over zeros). Groups hold zeros of both signs, values below 2^-100 and subnormal ones, huge values, a NaN and an
    infinity."""
    groups, key = 400, 0x5EED1234
    v = _grad_like(groups, 16, seed=bits + stride)
    v[1, 3], v[2, 0], v[2, 5] = -0.0, 2.0**-110, -(2.0**-140)  # a group with -0; tiny and subnormal values
    v[4, 9], v[10, 2] = float("nan"), float("inf")
    v[5] *= 2.0**-125  # subnormal values: s subnormal, r infinite
    v[6] *= 2.0**-100  # values on both sides of 2^-100
    v[8] *= 2.0**100  # huge values
    tiny = torch.Generator().manual_seed(7)
    for g in range(12, 40):  # groups beside a normal maximum: values down to subnormals, where Markstein is inexact
        exponents = torch.randint(-149, -100, (15,), generator=tiny).float()
        v[g, 1:] = torch.randn(15, generator=tiny).sign() * torch.exp2(exponents) * (1 + torch.rand(15, generator=tiny))
    s = absmax_scale(v, bits, "per_token")
    v[9], s[9] = 0.0, 2.0**-130  # zeros under a tiny scale made elsewhere: r = inf
    v[11, 8:], s[11] = 0.0, s[11] * 1.5  # half zeros under a larger scale
    assert not torch.isfinite(1 / s[9]) and torch.isinf(s[10]) and s[4].isnan()
    index = torch.randint(0, 2**20, (groups,), generator=torch.Generator().manual_seed(bits)).to(torch.int64)
    if stride in (0, RUNS_OF_4):  # multiples of 16, some just below 2^16 boundaries, the last 16 indices below 2^32
        index = torch.randint(0, 2**28, (groups,), generator=torch.Generator().manual_seed(bits)).to(torch.int64) * 16
        index[::5] = torch.arange(0, groups, 5) * 2**16 - 16
        index[0], index[1] = 2**32 - 16, 0
        if stride == RUNS_OF_4:  # runs of 4 from 4 mod 16 and 12 mod 16 too, a run ending at a 2^16 boundary
            index[2::4] += 4
            index[3::4] += 12
            index[7] = 2**16 - 4 - 12
    payload = b"".join(
        struct.pack("<fI", float(s[g]), int(index[g])) + v[g].numpy().astype(np.float32).tobytes()
        for g in range(groups)
    )
    out = host("stochastic_group", struct.pack("<iIIIQ", qmax(bits), key, hash_rounds(hash), stride, groups) + payload)
    positions = index[:, None] + torch.arange(16)[None, :] * (1 if stride in (0, RUNS_OF_4) else stride)
    u = uniform_at(positions.numpy(), key, hash=hash)
    limit = qmax(bits)
    expected = torch.floor(v / s + u).clamp_(-limit, limit)
    codes = torch.from_numpy(np.frombuffer(out[: 16 * groups], dtype=np.int8).astype(np.float32)).reshape(groups, 16)
    floats = torch.from_numpy(np.frombuffer(out[16 * groups : 144 * groups], dtype=np.float32).copy())
    floats = floats.reshape(2, groups, 16)
    nearest = torch.from_numpy(np.frombuffer(out[144 * groups :], dtype=np.int8).astype(np.float32)).reshape(groups, 16)
    rounded = torch.round(v / s).clamp_(-qmax(bits), qmax(bits))  # half to even, as quantize's nearest
    assert torch.equal(nearest, torch.where(rounded.isnan(), -float(qmax(bits)), rounded))
    values, quotients = floats[0], floats[1]
    # the quotients bit for bit (Markstein is off by an ulp where its residual is subnormal: codes rarely show it)
    want = v / s[:, None] if s.dim() == 1 else v / s
    same = (quotients.view(torch.int32) == want.view(torch.int32)) | (quotients.isnan() & want.isnan())
    same |= (quotients == 0) & (want == 0)  # -0 becomes +0
    assert same.all(), [(int(g), int(k)) for g, k in (~same).nonzero()[:5]]
    # a NaN quotient's code is -qmax in the kernels (fmaxf), NaN in torch's clamp: its group's scale is NaN, so the
    # gradient is NaN either way
    expected = torch.where(expected.isnan(), -float(limit), expected)
    assert expected[4].eq(-limit).all() and expected[9].eq(0).all()
    assert torch.equal(codes, expected)
    assert torch.equal(values, expected)


def test_nearest_codes_round_half_to_even_like_torch(host) -> None:
    v = _grad_like(200, 64, seed=3)
    scale = absmax_scale(v, 8, "per_token")
    ties = (torch.arange(-8, 8).float() + 0.5).repeat(4)  # exact halves: half to even
    v = torch.cat([v.reshape(-1), ties * 0.25])
    s = torch.cat([scale.expand(200, 64).reshape(-1), torch.full_like(ties, 0.25)])
    out = host("nearest", struct.pack("<iQ", 127, v.numel()) + torch.stack([v, s], -1).numpy().tobytes())
    expected = quantize(v, s, 8, "nearest")
    assert torch.equal(torch.from_numpy(np.frombuffer(out, dtype=np.int8).astype(np.float32)), expected)


def test_absmax_to_scale_is_absmax_scale(host) -> None:
    """Bit for bit, a non-finite amax included: NaN and +inf give the reference's non-finite scales."""
    special = torch.tensor([0.0, 0.0, 0.0, float("nan"), float("inf")])
    amax = torch.cat([special, torch.rand(1000) * torch.exp2(torch.randint(-40, 40, (1000,)).float())])
    for bits in (4, 8):
        out = host("scale", struct.pack("<iQ", qmax(bits), amax.numel()) + amax.numpy().tobytes())
        expected = torch.stack([absmax_scale(a.reshape(1, 1), bits) for a in amax])
        got = torch.from_numpy(np.frombuffer(out, dtype=np.float32).copy())
        assert torch.equal(got.view(torch.int32), expected.view(torch.int32))


@pytest.mark.parametrize("special", [None, float("nan"), float("inf")])
def test_amax_of_is_torch_amax_and_keeps_a_nan(host, special) -> None:
    """The kernels' max of magnitudes is torch's amax, which a NaN wins (fmaxf would drop it)."""
    values = (torch.randn(999) * torch.exp2(torch.randint(-30, 30, (999,)).float())).abs()
    values[::50] = 0.0
    if special is not None:
        values[500] = special
    out = host("amax", struct.pack("<Q", values.numel()) + values.numpy().tobytes())
    got = torch.from_numpy(np.frombuffer(out, dtype=np.float32).copy()).reshape(())
    want = values.amax()
    assert torch.equal(got.view(torch.int32), want.view(torch.int32)) or (got.isnan() and want.isnan())


def test_e4m3_bytes_of_every_int8_code(host) -> None:
    codes = torch.arange(-127, 128, dtype=torch.float32)
    codes = torch.cat([codes, codes.new_zeros(1)])  # an even count for the pair conversion
    out = host("e4m3", struct.pack("<Q", codes.numel()) + codes.numpy().tobytes())
    one, pairs = np.frombuffer(out[: codes.numel()], dtype=np.uint8), np.frombuffer(out[codes.numel() :], np.uint8)
    expected = codes.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert np.array_equal(one, expected) and np.array_equal(pairs, expected)
    exact = codes.abs() <= 16  # every code an FP8 GEMM operand can hold exactly (4-bit codes and more)
    assert torch.equal(torch.from_numpy(one.copy()).view(torch.float8_e4m3fn).float()[exact], codes[exact])


def _sawb_partials(t: torch.Tensor, blocks: int) -> np.ndarray:
    """The weight kernel's pass 1 on the CPU: (sum b², sum |b|, max |b|) in float64 over ``blocks`` chunks."""
    chunks = np.array_split(t.reshape(-1).double().numpy(), blocks)
    return np.array([(np.sum(c * c), np.sum(np.abs(c)), np.max(np.abs(c), initial=0.0)) for c in chunks])


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize(
    "case",
    ["integers", "constant_magnitude", "zeros", "one_nonzero"],
)
def test_sawb_scale_from_partials_matches_sawb_scale(host, bits: int, case: str) -> None:
    """The weight quantiser's scale from its partial sums (the three folds and their combination, as each of its
    CTAs makes it) equals hot.quant.sawb_scale bit for bit. Values are small multiples of 2^-7 (as transformed
    integer weights are), so float32 sums are exact too and the float64 sums leave nothing to round differently;
    constant magnitudes make 4-bit SAWB's clip negative (amax taken)."""
    g = torch.Generator().manual_seed(bits)
    t = torch.randint(-32, 33, (96, 64), generator=g).float() * 2**-7
    if case == "constant_magnitude":
        t = torch.where(t >= 0, 0.5, -0.5)
    elif case == "zeros":
        t = torch.zeros(96, 64)
    elif case == "one_nonzero":
        t = torch.zeros(96, 64)
        t[5, 7] = -0.75
    partials = _sawb_partials(t, 256)
    header = struct.pack("<iidQ", qmax(bits), int(bits == 4), float(t.numel()), len(partials))
    out = host("sawb", header + partials.astype(np.float64).tobytes())
    got = torch.from_numpy(np.frombuffer(out, dtype=np.float32).copy()).reshape(())
    want = sawb_scale(t, bits)
    assert torch.equal(got, want), (got.item(), want.item())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize(("out_f", "in_f"), [(16, 7), (16, 100), (64, 576), (768, 1024), (2304, 768), (8192, 2304)])
def test_weight_scale_is_the_host_fold_of_the_kernels_partials(host, kernel_backend, dtype, bits, out_f, in_f):
    """The weight quantiser's scale, bit for bit, is the host model's (quant_scalar.cuh, compiled for the CPU) made
    from the partials the kernel's statistics pass wrote on the GPU, from one CTA's triple to the most (256): the
    partials the code pass reads and how it combines them. The float64 sums are rounded to float32 before they meet,
    so the fold's order rarely shows in the scale; the CPU tests pin that order addition for addition."""
    w = (torch.randn(out_f, in_f, generator=torch.Generator().manual_seed(out_f + in_f)) * 0.05).to(dtype)
    block = 16
    codes_t, scale, partials = kernel_backend.ops.hq_quantize_weight_with_partials(w.cuda(), block, bits)
    used = min(-(-(out_f // block * in_f) // 256), 256)  # sawb_partials' grid: a CTA of 256 threads per 256 items
    assert partials.shape == (used, 3) and partials.dtype == torch.float64
    p = partials.cpu().numpy()
    header = struct.pack("<iidQ", qmax(bits), int(bits == 4), float(w.numel()), len(p))
    want = np.frombuffer(host("sawb", header + p.astype(np.float64).tobytes()), dtype=np.float32)[0]
    assert scale.cpu().numpy().view(np.uint32) == np.float32(want).view(np.uint32)
    reference = sawb_scale(block_hadamard(w.float(), block, dim=0), bits)
    torch.testing.assert_close(scale.cpu(), reference, rtol=1e-6, atol=0)
    assert codes_t.shape == (in_f, out_f)


def _warp_fold(values: np.ndarray) -> np.float64:
    """The SAWB fold's order, written out: lane l adds values l, l + 32, ... in index order, then the 32 lane sums
    meet in an xor butterfly (lane l adds lane l ^ o's, o = 16, 8, 4, 2, 1), and lane 0's sum is the result."""
    lanes = [np.float64(0.0)] * 32
    for i, v in enumerate(values):
        lanes[i % 32] = lanes[i % 32] + np.float64(v)
    for o in (16, 8, 4, 2, 1):
        lanes = [lanes[lane] + lanes[lane ^ o] for lane in range(32)]
    return lanes[0]


@pytest.mark.parametrize("count", [1, 31, 192, 256])
def test_sawb_fold_is_the_warps_order(host, count: int) -> None:
    """The weight quantiser folds the partials as one warp does (quant_scalar.cuh): the two sums bit for bit in that
    order, on partials whose float64 sums round (index order gives other bits on them), and the max of the
    magnitudes with amax_of (a NaN partial wins)."""
    rng = np.random.default_rng(count)
    partials = rng.random((count, 3)) * np.exp2(rng.integers(-3, 3, (count, 3)))  # full mantissas, near magnitudes
    partials[:, 2] = partials[:, 2].astype(np.float32)
    out = host("sawb_fold", struct.pack("<Q", count) + partials.astype(np.float64).tobytes())
    s2, s1 = np.frombuffer(out[:16], dtype=np.float64)
    (amax,) = np.frombuffer(out[16:], dtype=np.float32)
    assert s2 == _warp_fold(partials[:, 0]) and s1 == _warp_fold(partials[:, 1])
    assert amax == np.float32(partials[:, 2].max())
    if count > 32:  # the order matters on these values: index order gives other bits in at least one sum
        in_order = [functools.reduce(operator.add, partials[:, c], np.float64(0.0)) for c in (0, 1)]
        assert (s2, s1) != tuple(in_order)
    with_nan = partials.copy()
    with_nan[count // 2, 2] = np.nan
    out = host("sawb_fold", struct.pack("<Q", count) + with_nan.astype(np.float64).tobytes())
    assert np.isnan(np.frombuffer(out[16:], dtype=np.float32)[0])


def test_sawb_fold_adds_each_lanes_triples_in_index_order(host) -> None:
    """Within a lane the triples are added first to last: lane 0 holding 1, 2^-53, 2^-53 (triples 0, 32, 64) sums to
    1 (each tiny addend rounds away, ties to even), where last to first would give 1 + 2^-52."""
    partials = np.zeros((65, 3))
    partials[[0, 32, 64], :2] = [[1.0, 1.0], [2.0**-53, 2.0**-53], [2.0**-53, 2.0**-53]]
    out = host("sawb_fold", struct.pack("<Q", 65) + partials.tobytes())
    assert tuple(np.frombuffer(out[:16], dtype=np.float64)) == (1.0, 1.0)
    assert _warp_fold(partials[:, 0]) == 1.0 and _warp_fold(partials[::-1, 0]) == 1.0 + 2.0**-52


def _reference_units(windows: HLAWindows, samples: int, rank: int) -> list[tuple[int, int, list[int]]]:
    """(first projected row, rows, the 16 rows of the tensor read) of every unit, in hla_project's row order."""
    kept = len(lp_l1_rows(rank))
    units = []
    for s in range(samples):
        for w, slots in enumerate(windows.index_map.tolist()):
            rows = [-1 if t < 0 else s * windows.tokens + t for t in slots]
            units.append(((s * windows.windows + w) * kept, kept, rows))
    first_prefix = samples * windows.windows * kept
    for s in range(samples):
        for p in range(windows.prefix):
            units.append((first_prefix + s * windows.prefix + p, 1, [s * windows.tokens + p] + [-1] * 15))
    return units


@pytest.mark.parametrize(
    ("prefix", "height", "width", "spatial", "rank"),
    [
        (1, 14, 14, True, 8),
        (0, 7, 7, True, 5),
        (2, 5, 9, True, 16),
        (3, 1, 1, True, 1),
        (0, 1, 197, False, 8),
        (0, 1, 16, False, 3),
        (0, 9, 4, True, 8),
    ],
)
def test_window_index_map_is_the_reference(host, prefix, height, width, spatial, rank) -> None:
    """The kernels' units read the rows HLAWindows.index_map names and write hla_project's rows."""
    grid = TokenGrid(prefix, height, width)
    windows = hla_windows(grid.tokens, "spatial" if spatial else "paper", grid)
    samples = 3
    fields = (windows.tokens, windows.prefix, windows.height, windows.width, windows.window_w, samples, rank)
    out = np.frombuffer(host("windows", struct.pack("<7q", *fields)), dtype=np.int64)
    units, proj_rows = int(out[0]), int(out[1])
    assert proj_rows == projected_rows(samples * windows.tokens, windows, rank)
    got = [(int(u[0]), int(u[1]), u[2:].tolist()) for u in out[2:].reshape(units, 18)]
    assert got == _reference_units(windows, samples, rank)


def test_kernels_constant_rows_are_the_papers(host) -> None:
    """The rows the HLA kernels are compiled for as constants are the paper's (rank 8 in LP_L1 order), so the
    default configuration runs those kernels; other rows run the same kernels with rows read at run time."""
    got = np.frombuffer(host("paper_rows", b""), dtype=np.int32).tolist()
    assert tuple(got) == lp_l1_rows(8)


def test_fast_division_is_integer_division(host) -> None:
    """The kernels' division of block and unit numbers (below 2^31) by a shape's counts, a multiply-high, an add
    and a shift, is integer division, and its divisor gives the remainder: every divisor up to 2^12 and powers of two
    and their neighbours up to 2^31, against numerators at 0, around multiples of the divisor and near 2^31, and
    random ones."""
    rng = np.random.default_rng(7)
    top = 2**31 - 1
    divisors = list(range(1, 4097)) + [2**e + o for e in range(12, 32) for o in (-1, 0, 1) if 2**e + o <= 2**31]
    divisors += rng.integers(4097, 2**31, 2000).tolist()
    pairs = []
    for d in divisors:
        q = top // d
        edges = [0, 1, d - 1, d, d + 1, top, top - 1, q * d, q * d - 1, (q // 2) * d, (q // 2) * d - 1]
        numerators = edges + rng.integers(0, top + 1, 24).tolist()
        pairs += [(n, d) for n in numerators if 0 <= n <= top]
    arr = np.array(pairs, dtype=np.int64)
    out = host("fastdiv", struct.pack("<Q", len(arr)) + arr.tobytes())
    got = np.frombuffer(out, dtype=np.uint32).astype(np.int64).reshape(2, -1)
    want = np.stack([arr[:, 0] // arr[:, 1], arr[:, 0] % arr[:, 1]])
    wrong = np.flatnonzero((got != want).any(axis=0))
    cases = [(int(arr[i, 0]), int(arr[i, 1]), got[:, i].tolist(), want[:, i].tolist()) for i in wrong[:5]]
    assert wrong.size == 0, cases


def _division_cases(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Quotients v / s of the quantisers' kind and the hard cases of division by a reciprocal: exponents down to
    subnormal v, significands of all ones and of a single one, exact quotients, halfway-like ones."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-140, 60, n))).astype(np.float32)
    s = (rng.random(n) + 0.5).astype(np.float32) * np.exp2(rng.integers(-70, 70, n)).astype(np.float32)
    ones = np.float32(2.0) - np.float32(2.0**-23)  # significand 1.111…1
    s[::7] = ones * np.exp2(rng.integers(-40, 40, s[::7].shape)).astype(np.float32)
    v[1::7] = (ones * np.exp2(rng.integers(-40, 40, v[1::7].shape))).astype(np.float32)
    s[2::7] = np.exp2(rng.integers(-40, 40, s[2::7].shape)).astype(np.float32)  # powers of two: exact reciprocal
    v[3::7] = (rng.integers(-127, 128, v[3::7].shape) * s[3::7]).astype(np.float32)  # v / s integral or nearly
    v[4::7] = ((rng.integers(-127, 127, v[4::7].shape) + 0.5) * s[4::7]).astype(np.float32)  # near halfway codes
    s[5::7] = (np.float32(1.0) + np.float32(2.0**-23) * rng.integers(1, 64, s[5::7].shape)).astype(np.float32)
    return v, s


def test_division_by_a_scale_is_ieee_division(host) -> None:
    """div_scale (a multiply by the scale's reciprocal and an FMA correction, IEEE division for tiny v) gives
    IEEE v / s bit for bit for every finite quotient, under an infinite scale too (0, where r = 0 would give NaN);
    the quantisers' codes rest on it."""
    for seed in range(3):
        v, s = _division_cases(200_000, seed)
        v = np.concatenate([v, np.float32([1.5, -3.0, 0.0, 2.0**-120])]).astype(np.float32)
        s = np.concatenate([s, np.full(4, np.inf, dtype=np.float32)]).astype(np.float32)
        want = v / s
        finite = np.isfinite(want)
        pairs = np.stack([v, s], axis=1).astype(np.float32)
        out = host("divide", struct.pack("<Q", len(v)) + pairs.tobytes())
        got = np.frombuffer(out, dtype=np.float32)
        wrong = np.flatnonzero(finite & (got.view(np.uint32) != want.view(np.uint32)))
        assert wrong.size == 0, [(float(v[i]), float(s[i]), float(got[i]), float(want[i])) for i in wrong[:5]]
