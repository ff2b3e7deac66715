"""CPU-only build check: the CUDA sources compile with nvcc for sm_80 and sm_90 (objects only, no loading), and
the opt-in sm_90a INT8 GEMM compiles to wgmma (IGMMA) instructions."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
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


def test_cuda_sources_compile_for_sm80_and_sm90(tmp_path: Path, build_config, nvcc: str) -> None:
    config = build_config
    cutlass = _cutlass_include(config)
    flags = [*config.NVCC_FLAGS, *config.gencode_flags(["8.0", "9.0"]), f"-I{config.CSRC}", f"-I{cutlass}"]

    def compile_one(name: str) -> subprocess.CompletedProcess:
        out = tmp_path / (Path(name).stem + ".o")
        cmd = [nvcc, *flags, "-c", str(config.CSRC / name), "-o", str(out)]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    # One nvcc per source, both architectures in one call (one host pass); two at a time for 2-core CI.
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(config.CUDA_SOURCES, pool.map(compile_one, config.CUDA_SOURCES), strict=True))
    for name, result in results.items():
        assert result.returncode == 0, f"nvcc failed on {name}:\n{result.stderr[-4000:]}"
        assert (tmp_path / (Path(name).stem + ".o")).stat().st_size > 0


def test_bindings_compile(tmp_path: Path, build_config, nvcc: str) -> None:
    """The torch adapter (host code) compiles against the installed torch headers."""
    cpp_extension = pytest.importorskip("torch.utils.cpp_extension")
    config = build_config
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    includes = [*cpp_extension.include_paths(), str(_cuda_include(nvcc)), str(config.CSRC)]
    python_include = Path(sys.base_prefix, "include", f"python{sys.version_info.major}.{sys.version_info.minor}")
    cmd = [
        cxx,
        *config.CXX_FLAGS,
        "-fsyntax-only",
        "-DTORCH_EXTENSION_NAME=_C",
        *[f"-I{path}" for path in (*includes, str(python_include))],
        str(config.CSRC / config.CXX_SOURCES[0]),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"bindings.cpp does not compile:\n{result.stderr[-4000:]}"


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


def test_sm90a_is_opt_in(build_config, monkeypatch) -> None:
    """Default builds keep sm_90 and the plain flags; HOT_KERNELS_SM90A=1 turns 9.0 into 9.0a and adds the define."""
    config = build_config
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0;10.0+PTX")
    monkeypatch.delenv(config.SM90A_ENV, raising=False)
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
    with pytest.raises(RuntimeError, match="HOT_KERNELS_SM90A must be 0 or 1, got 'yes'"):
        config.arch_list()


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
