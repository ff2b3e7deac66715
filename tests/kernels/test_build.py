"""CPU-only build checks: kernels/setup.py builds the extension for sm_80 and sm_90 and it loads without a GPU (its
bindings' checks raise ValueError on bad tensors), and the opt-in sm_90a INT8 GEMM compiles to wgmma (IGMMA)
instructions."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.build


def _cuda_include(nvcc: str) -> Path:
    """The CUDA headers: beside nvcc, or under /usr/local/cuda when nvcc is a wrapper elsewhere on PATH."""
    candidates = [Path(nvcc).resolve().parents[1], Path("/usr/local/cuda")]
    for root in candidates:
        if (root / "include" / "cuda_runtime.h").is_file():
            return root / "include"
    pytest.skip(f"cuda_runtime.h not found under {[str(c) for c in candidates]} (set CUDA_HOME)")


def _cutlass_include(config) -> Path:
    """The CUTLASS headers the build would use; skips when there are none."""
    try:
        return config.cutlass_include()
    except RuntimeError as err:
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, build_config, nvcc: str) -> Path:
    """The extension built by kernels/setup.py for sm_80 and sm_90 (two compile jobs for 2-core CI), into a
    temporary directory holding the ``hot_kernels`` package; it loads without a GPU."""
    _cutlass_include(build_config)
    cuda_home = _cuda_include(nvcc).parent
    out = tmp_path_factory.mktemp("hot_kernels_build")
    env = {
        **os.environ,
        "CUDA_HOME": str(cuda_home),
        "TORCH_CUDA_ARCH_LIST": "8.0;9.0",
        "HOT_KERNELS_SM90A": "0",
        "MAX_JOBS": "2",
    }
    cmd = [sys.executable, "setup.py", "build_py", "--build-lib", str(out / "lib"), "build_ext", "--build-lib",
           str(out / "lib"), "--build-temp", str(out / "tmp")]  # fmt: skip
    result = subprocess.run(cmd, cwd=build_config.HERE, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"the build failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return out / "lib"


def _run_with_ops(lib: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter that imports the built ``hot_kernels`` (as where it is installed)."""
    env = {**os.environ, "PYTHONPATH": str(lib), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)


def test_the_extension_builds_for_sm80_and_sm90_and_imports_nothing_of_hot(built: Path) -> None:
    code = (
        "import sys, hot_kernels\n"
        f"assert hot_kernels.__file__.startswith({str(built)!r}), hot_kernels.__file__\n"
        "print(sorted(n for n in dir(hot_kernels._C) if not n.startswith('_')))\n"
        "print(sorted(m for m in sys.modules if m == 'hot' or m.startswith('hot.')))\n"
    )
    result = _run_with_ops(built, code)
    assert result.returncode == 0, result.stderr[-3000:]
    ops, hot_modules = result.stdout.splitlines()[-2:]
    for op in ("hq_quantize_grad_output", "hla_quantize", "quantize_grad_output", "cutlass_gemm_s8", "check_hq_matmul",
               "hash_uniform"):  # fmt: skip
        assert f"'{op}'" in ops
    assert hot_modules == "[]", f"hot_kernels imported {hot_modules}"


def test_bad_tensors_raise_value_errors_naming_them_from_the_bindings(built: Path) -> None:
    """The C++ checks are the one place tensors are checked: each raises ValueError (not RuntimeError) with the
    tensor's name and the problem; CPU tensors reach every check before any kernel would launch."""
    code = """
import torch
from hot_kernels import _C
i8 = torch.zeros(4, 32, dtype=torch.int8)
cases = [
    (lambda: _C.check_float_matrix(torch.zeros(4, 32), "g_y"), "g_y must be on a CUDA device for backend 'real'"),
    (
        lambda: _C.hq_quantize_grad_output(torch.zeros(4, 32), 16, 4, True, [1], False, None, 2),
        "g_y must be a CUDA tensor",
    ),
    (
        lambda: _C.hla_quantize(torch.zeros(4, 32), [16, 0, 1, 16, 16], [0], 8, False, False, [0], True, None, 2),
        "t must be a CUDA",
    ),
    (
        lambda: _C.hq_quantize_weight_and_grad_output(
            torch.zeros(32, 32), torch.zeros(4, 32), 16, 4, False, False, [1], False, None, 2
        ),
        "g_y must be a CUDA tensor",
    ),
    (
        lambda: _C.hla_quantize_pair(
            torch.zeros(16, 4), [16, 0, 1, 16, 16], [0], 8, False, [0], False, None,
            torch.zeros(16, 4), [16, 0, 1, 16, 16], [0], 8, True, [1], True, None, 2,
        ),
        "a must be a CUDA tensor",
    ),
    (
        lambda: _C.hla_pair_in_one_launch(
            torch.zeros(16, 4), [16, 0, 1, 16, 16], [0], False, torch.zeros(16, 4), [16, 0, 1, 16, 16], [0], True
        ),
        "a must be a CUDA tensor",
    ),
    (lambda: _C.check_hq_matmul(i8, torch.ones(4), i8, torch.ones(1), 16), "a_codes must be on a CUDA device"),
    (lambda: _C.check_hla_matmul(i8, torch.ones(1), i8, torch.ones(1)), "g_codes must be on a CUDA device"),
    (lambda: _C.cutlass_gemm_s8(i8, i8), "a must be a CUDA tensor"),
    (lambda: _C.cutlass_gemm_s8_sm90_ctas(i8, i8, 1), "a must be a CUDA tensor"),
    (lambda: _C.dequantize(i8.int(), torch.ones(4), torch.ones(1), 16.0), "acc must be a CUDA tensor"),
    (lambda: _C.hash_uniform(-1, [0], 0, None, 2), "numel must be non-negative, got -1"),
    (lambda: _C.hash_uniform(4, [1 << 32], 0, None, 2), "key holds 4294967296, not a 32-bit unsigned integer"),
    (lambda: _C.hash_uniform(4, [0], 0, None, 3), 'hash_rounds must be 1 ("fmix32") or 2 ("fmix32x2"), got 3'),
    (lambda: _C.hash_uniform(4, [0], 0, None, 1), "device index 0 names no CUDA device (0 visible)"),
    (lambda: _C.int_matmul(i8, i8, torch.ones(1), torch.ones(1), 1.0, "int2"), "unknown integer GEMM route 'int2'"),
    (  # by keyword: the binding's argument names are the ones hot.backends.real passes in this order
        lambda: _C.layer_gradients(
            g_y=torch.zeros(4, 32), weight=torch.zeros(32, 32), x_codes=i8, x_scale=torch.ones(1), block=16,
            gx_bits=4, per_token=True, hq_key=[1], gy_fp8=False, w_fp8=False, gx_route="fp8",
            gx_dtype=torch.float32, windows=[16, 0, 1, 16, 16], rows=[0], gw_bits=8, stochastic=False,
            per_channel=False, hla_key=[0], column_sums=False, gw_route="int8", step=None, hash_rounds=2,
        ),
        "g_y must be on a CUDA device for backend 'real'",
    ),
]
for call, message in cases:
    try:
        call()
    except ValueError as err:
        assert message in str(err) and "Exception raised from" not in str(err), str(err)
    else:
        raise AssertionError("no error: " + message)
print("checked", len(cases))
"""
    result = _run_with_ops(built, code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "checked 17"


def test_the_pingpong_grid_takes_the_full_grids_waves_on_the_fewest_clusters(built: Path) -> None:
    """The small g_w GEMM's persistent grid (host code, in every build): for each shape, as many waves of 128 x 128
    cluster tiles as sm_count / 2 clusters take, and one cluster fewer would take one wave more."""
    code = """
from hot_kernels import _C
checked = 0
for sm_count in (132, 114, 78, 2):
    full = sm_count // 2
    for m in (1, 64, 128, 129, 512, 768, 1536, 2304, 3072, 4608, 8192):
        for n in (4, 128, 768, 1024, 3072, 4608):
            clusters = _C.sm90_pingpong_clusters(m, n, sm_count)
            tiles = -(-m // 128) * -(-n // 128)
            waves = -(-tiles // full)
            assert 1 <= clusters <= min(full, tiles), (m, n, sm_count, clusters)
            assert -(-tiles // clusters) == waves, (m, n, sm_count, clusters)
            assert clusters == 1 or -(-tiles // (clusters - 1)) > waves, (m, n, sm_count, clusters)
            checked += 1
# EfficientFormer's stages.3.qkv g_w (1536 x 768): 72 tiles, 2 waves on 66 clusters, as few on 36.
assert _C.sm90_pingpong_clusters(1536, 768, 132) == 36
assert _C.sm90_pingpong_clusters(3072, 768, 132) == 48  # 144 tiles: 3 waves either way
assert _C.sm90_pingpong_clusters(768, 1024, 132) == 48  # one wave: every tile its own cluster
assert _C.sm90_pingpong_clusters(0, 768, 132) == 0 and _C.sm90_pingpong_clusters(64, 64, 1) == 0
print("checked", checked)
"""
    result = _run_with_ops(built, code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "checked 264"


def _cuobjdump(nvcc: str) -> str | None:
    """cuobjdump beside nvcc, on PATH, or the copy in triton's wheel (installed with torch)."""
    beside = Path(nvcc).resolve().parent / "cuobjdump"
    if beside.is_file():
        return str(beside)
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.is_file():
            return str(bundled)
    return None


@pytest.mark.slow
def test_sm90a_gemm_compiles_to_wgmma(tmp_path: Path, build_config, nvcc: str) -> None:
    """HOT_KERNELS_SM90A=1's flags: the GEMM's mainloop is Hopper's integer wgmma, not an empty stub."""
    config = build_config
    cutlass = _cutlass_include(config)
    out = tmp_path / "sm90.o"
    flags = [*config.nvcc_flags(sm90a=True), *config.gencode_flags(["9.0a"]), f"-I{config.CSRC}", f"-I{cutlass}"]
    cmd = [nvcc, *flags, "-c", str(config.CSRC / "cutlass_sm90_gemm.cu"), "-o", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"nvcc failed on cutlass_sm90_gemm.cu (sm_90a):\n{result.stderr[-4000:]}"
    cuobjdump = _cuobjdump(nvcc)
    if cuobjdump is None:
        pytest.skip("no cuobjdump to read the SASS")
    sass = subprocess.run([cuobjdump, "-sass", str(out)], capture_output=True, text=True, check=True).stdout
    assert "IGMMA" in sass, "the sm_90a object holds no integer wgmma instruction"


def test_sm90a_flags(build_config, monkeypatch) -> None:
    """HOT_KERNELS_SM90A=0 (and "auto" before it is resolved) keeps sm_90 and the plain flags; =1 turns 9.0 into
    9.0a and adds the define."""
    config = build_config
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0;10.0+PTX")
    for unresolved in ("0", "auto", ""):
        monkeypatch.setenv(config.SM90A_ENV, unresolved)
        assert config.arch_list() == ["8.0", "9.0", "10.0+PTX"] and config.nvcc_flags() == config.NVCC_FLAGS
    monkeypatch.setenv(config.SM90A_ENV, "1")
    assert config.arch_list() == ["8.0", "9.0a", "10.0+PTX"]
    assert config.nvcc_flags() == [*config.NVCC_FLAGS, config.SM90A_DEFINE]
    assert config.gencode_flags(["9.0a"]) == ["-gencode=arch=compute_90a,code=sm_90a"]
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0+PTX")
    with pytest.raises(RuntimeError, match=r"9\.0\+PTX would ship compute_90a PTX"):
        config.arch_list()
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "Hopper")
    with pytest.raises(RuntimeError, match=r"needs numeric capabilities .* got 'Hopper'"):
        config.arch_list()
    monkeypatch.setenv(config.SM90A_ENV, "yes")
    with pytest.raises(RuntimeError, match="HOT_KERNELS_SM90A must be 0, 1 or auto, got 'yes'"):
        config.arch_list()


def test_sm90a_auto_builds_it_where_hopper_is_built_with_cuda_12(build_config, monkeypatch, tmp_path: Path) -> None:
    """The default, "auto": sm_90a where 9.0 is in the list and nvcc is CUDA 12+ (then settled as "1" for the rest of
    the build); not for a list without 9.0, not with CUDA 11.8's nvcc; explicit 0 and 1 stay."""
    config = build_config
    # recorded first, so the teardown removes what resolve_sm90a writes into os.environ itself
    monkeypatch.setenv(config.SM90A_ENV, "auto")
    nvcc = {}
    for release in ("11.8", "12.4"):
        fake = tmp_path / release / "nvcc"
        fake.parent.mkdir()
        fake.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
        fake.chmod(0o755)
        nvcc[release] = str(fake)
    cases = [("8.0;9.0", None, "12.4", True), ("8.0;9.0", "auto", "12.4", True), ("8.0;8.6", None, "12.4", False),
             ("8.0;9.0", None, "11.8", False), ("8.0;9.0", "0", "12.4", False), ("8.0", "1", "11.8", True)]  # fmt: skip
    for arches, setting, release, expected in cases:
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", arches)
        if setting is None:
            monkeypatch.delenv(config.SM90A_ENV, raising=False)
        else:
            monkeypatch.setenv(config.SM90A_ENV, setting)
        assert config.resolve_sm90a(nvcc[release]) is expected, (arches, setting, release)
        assert config.sm90a_requested() is expected
        assert ("9.0a" in config.arch_list()) is (expected and "9.0" in arches)


def test_sm90a_needs_cuda_12(build_config, nvcc: str, tmp_path: Path) -> None:
    config = build_config
    version = config.nvcc_version(nvcc)
    assert version is not None and version >= (11, 0)
    if version >= (12, 0):
        config.check_sm90a_toolkit(nvcc)
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 11.8, V11.8.89'\n")
    fake.chmod(0o755)
    assert config.nvcc_version(str(fake)) == (11, 8)
    with pytest.raises(RuntimeError, match=r"needs nvcc from CUDA 12 or newer; .* is 11\.8"):
        config.check_sm90a_toolkit(str(fake))
