"""Which GEMMs the real backend picks per GPU and torch build (no GPU needed: the ops and the device are stand-ins).

On Hopper, 4-bit g_x codes run on FP8 tensor cores only where torch has FP8 GEMMs (a CUDA 12+ build); a CUDA 11.8
torch (the container image's) takes the INT8 tensor cores, whose exactness the GPU tests check for every family."""

from __future__ import annotations

import math
import types

import pytest
import torch

from hot.backends import real


@pytest.fixture
def backend_on(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(real, "load_ops", lambda: types.SimpleNamespace())

    def make(capability: tuple[int, int], cuda: str | None, gemm: str = "auto", sm90: bool = False) -> real.RealBackend:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.version, "cuda", cuda)
        backend = real.RealBackend(gemm=gemm)
        backend._sm90[0] = sm90  # whether the build holds the sm_90a GEMM and device 0 runs it
        return backend

    return make


@pytest.mark.parametrize(
    ("capability", "cuda", "gemm"),
    [((9, 0), "13.0", "cublas"), ((9, 0), "12.4", "cublas"), ((9, 0), "11.8", "cutlass"), ((10, 0), "11.8", "cutlass"),
     ((8, 0), "11.8", "cutlass-int4"), ((8, 9), "13.0", "cutlass-int4"), ((7, 5), "12.4", "reference")],
)  # fmt: skip
def test_auto_picks_fp8_only_where_torch_has_fp8_gemms(backend_on, capability, cuda, gemm) -> None:
    backend = backend_on(capability, cuda)
    assert backend.gemm_for(torch.device("cuda", 0)) == gemm
    assert real.fp8_gemm_available() is (int(cuda.split(".")[0]) >= 12)


@pytest.mark.parametrize(
    ("capability", "cuda", "gemm"),
    [((9, 0), "13.0", "cutlass-sm90"), ((9, 0), "12.4", "cutlass-sm90"), ((9, 0), "11.8", "cutlass"),
     ((10, 0), "13.0", "cublas"), ((8, 0), "13.0", "cutlass-int4")],
)  # fmt: skip
def test_auto_takes_the_sm90a_int8_gemm_where_the_build_has_it(backend_on, capability, cuda, gemm) -> None:
    """On compute capability 9.0 with FP8 GEMMs, a build holding the sm_90a INT8 GEMM runs g_w on it, nowhere else."""
    assert backend_on(capability, cuda, sm90=True).gemm_for(torch.device("cuda", 0)) == gemm


def test_fp8_codes_are_written_only_for_the_fp8_gemm(backend_on) -> None:
    device = torch.device("cuda", 0)
    assert backend_on((9, 0), "12.4")._fp8_codes(device, 4, 64, 64)
    assert not backend_on((9, 0), "11.8")._fp8_codes(device, 4, 64, 64)


def test_asking_for_fp8_gemms_without_them_names_the_cuda_build(backend_on) -> None:
    backend = backend_on((9, 0), "11.8", gemm="cublas")
    with pytest.raises(RuntimeError, match=r"gemm 'cublas' needs FP8 GEMMs .* \(CUDA 11\.8\) lacks"):
        backend.gemm_for(torch.device("cuda", 0))
    assert backend_on((9, 0), "11.8", gemm="cutlass").gemm_for(torch.device("cuda", 0)) == "cutlass"


@pytest.mark.parametrize(
    ("capability", "cuda", "narrow", "m", "n", "route"),
    [((9, 0), "13.0", True, 25216, 64, "fp8"), ((9, 0), "13.0", False, 394, 64, "int8"),
     ((9, 0), "13.0", True, 394, 24, "reference"), ((9, 0), "13.0", True, 0, 64, "reference"),
     ((9, 0), "11.8", True, 394, 64, "int8"), ((8, 0), "12.4", True, 394, 64, "int4"),
     ((8, 0), "12.4", False, 394, 64, "int8"), ((8, 0), "12.4", True, 394, 6, "reference")],
)  # fmt: skip
def test_the_g_x_route_follows_the_gemm_family_and_the_codes_width(backend_on, capability, cuda, narrow, m, n, route):
    """4-bit codes on both sides take the FP8 (n % 16) or INT4 GEMM, 8-bit ones the INT8 sm80 GEMM (n % 4)."""
    backend = backend_on(capability, cuda, sm90=False)
    assert backend._gx_route(torch.device("cuda", 0), narrow, m, 768, n) == route


F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16


@pytest.mark.parametrize(
    ("sm90", "gemm", "m", "k", "n", "out", "e4m3", "route"),
    [(True, "auto", 49, 768, 1024, F32, False, "int8_sm90"), (True, "auto", 3136, 64, 256, F32, False, "int8_sm90"),
     (True, "auto", 1024, 1024, 1023 + 1, F32, False, "fp8"), (True, "auto", 25216, 768, 2304, F32, False, "fp8"),
     (True, "cutlass-sm90", 49, 768, 1024, F32, False, "int8_sm90"), (True, "cublas", 49, 768, 1024, F32, False, "fp8"),
     (False, "auto", 49, 768, 1024, F32, False, "fp8"),
     # bf16/fp16 g_x: the FP8 GEMM writes them in its epilogue (the INT8 one writes float32, a cast more)
     (True, "auto", 49, 768, 1024, BF16, False, "fp8"), (True, "auto", 49, 768, 1024, F16, False, "fp8"),
     # codes a quantiser wrote alone are e4m3: the FP8 GEMM reads them with no conversion pass
     (True, "auto", 49, 768, 1024, F32, True, "fp8")],
)  # fmt: skip
def test_small_g_x_products_take_the_sm90a_int8_gemm(backend_on, sm90, gemm, m, k, n, out, e4m3, route) -> None:
    """float32 4-bit g_x products below 2^30 multiply-adds (every layer of the latency figure) on int8 codes run on
    the sm_90a INT8 GEMM where the family holds it (auto on a build with it, or cutlass-sm90); from 2^30 (training
    shapes), for bf16/fp16 g_x, on codes already e4m3, or where cuBLAS is asked for by name, on the FP8 GEMM."""
    backend = backend_on((9, 0), "13.0", gemm=gemm, sm90=sm90)
    assert backend._gx_route(torch.device("cuda", 0), True, m, k, n, out, e4m3) == route


@pytest.mark.parametrize(
    ("m", "k", "n", "route"),
    [(784, 128, 1152, "fp8"), (49, 512, 4608, "fp8"), (3136, 64, 576, "fp8"),  # ResNet-50's N = 9 K layers
     (784, 128, 512, "int8_sm90"), (197, 768, 3072, "int8_sm90"), (197, 2304, 768, "int8_sm90")],
)  # fmt: skip
def test_a_width_bound_keeps_wide_small_g_x_products_on_the_fp8_gemm(backend_on, m, k, n, route) -> None:
    """``small_gx_max_width`` (4 by default) sends small products with N above that many times K to the FP8 GEMM:
    the latency figure's N = 9 K layers, and no other; unbounded (an A/B's other side), none."""
    backend = backend_on((9, 0), "13.0", sm90=True)
    device = torch.device("cuda", 0)
    assert backend.small_gx_max_width == 4.0
    assert backend._gx_route(device, True, m, k, n) == route
    backend.small_gx_max_width = math.inf
    assert backend._gx_route(device, True, m, k, n) == "int8_sm90"


@pytest.mark.parametrize(
    ("o", "r", "i", "route"),
    [(96, 224, 64, "int8_sm90"), (96, 210, 64, "int8_sm90"), (96, 840, 64, "int8_sm90"), (16, 840, 64, "int8_sm90"),
     (96, 840, 12, "int8_sm90"), (96, 0, 64, "reference"), (96, 224, 6, "reference")],
)  # fmt: skip
def test_the_g_w_route_on_hopper_takes_the_sm90a_gemm_for_every_k(backend_on, o, r, i, route):
    """The sm_90a GEMM dequantises in its epilogue and pads K to 16 itself, so it runs K that cuBLASLt would take
    unpadded (840, a multiple of 8) too; N must be a multiple of 4."""
    assert backend_on((9, 0), "13.0", sm90=True)._gw_route(torch.device("cuda", 0), o, r, i) == route


def test_composed_ops_take_one_hash_so_specs_with_two_run_the_quantisers_one_by_one(monkeypatch) -> None:
    """The fused g_y quantiser and the one-call backward take one hash for both quantisers: specs whose stochastic
    HLA rounding draws with another hash than HQ's take neither (the quantisers run one by one, each with its own),
    rather than one of them drawing with the other's hash."""
    from hot.backends import HLASpec, HQSpec
    from hot.hla import hla_windows

    monkeypatch.setattr(real, "load_ops", lambda: types.SimpleNamespace())
    fused = real.RealBackend(fused_grad_output=True)
    g = torch.zeros(32, 64)
    windows = hla_windows(16, "paper")
    hq = HQSpec(16, 4, "per_token", 1, "fmix32")
    same = HLASpec(windows, 8, 8, "stochastic", "per_tensor", 2, "fmix32")
    other = HLASpec(windows, 8, 8, "stochastic", "per_tensor", 2, "fmix32x2")
    nearest = HLASpec(windows, 8, 8, "nearest", "per_tensor", None, "fmix32x2")
    assert fused.fuses_grad_output(g, hq, same) and fused.fuses_grad_output(g, hq, nearest)
    assert not fused.fuses_grad_output(g, hq, other)
    assert real._one_hash(hq, same) and real._one_hash(hq, nearest) and not real._one_hash(hq, other)
