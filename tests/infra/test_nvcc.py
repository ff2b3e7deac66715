"""The hot-kernels CUDA sources compile with nvcc 11.8 (the image's compiler) for every architecture the image
builds (TORCH_CUDA_ARCH_LIST 8.0;8.6;8.9;9.0), with the flags of kernels/build_config.py and the host compiler
CUDA 11.8 supports (g++-11). No GPU is needed: this is the Docker build's kernel step without Docker.
tests/infra/cuda118_toolkit.sh assembles the compiler (cached in $HOT_INFRA_CACHE, default ~/.cache/hot-infra).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
IMAGE_ARCHES = "8.0;8.6;8.9;9.0"

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def nvcc() -> Path:
    if not (KERNELS / "csrc").is_dir() or not list((KERNELS / "csrc").glob("*.cu")):
        pytest.skip("no kernels/csrc/*.cu yet")
    if not shutil.which("g++-11"):
        pytest.skip("no g++-11 (CUDA 11.8's newest supported host compiler): apt-get install g++-11")
    if not (shutil.which("apt-get") and shutil.which("dpkg")):
        pytest.skip("assembling nvcc 11.8 needs apt-get and dpkg (Debian/Ubuntu)")
    cache = Path(os.environ.get("HOT_INFRA_CACHE", Path.home() / ".cache" / "hot-infra")) / "cuda-11.8"
    env = {**os.environ, "PYTHON": sys.executable}
    out = subprocess.run(
        ["bash", str(ROOT / "tests/infra/cuda118_toolkit.sh"), str(cache)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return Path(out.stdout.strip().splitlines()[-1])


def test_nvcc_is_11_8(nvcc):
    version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    assert "release 11.8" in version


@pytest.mark.parametrize("source", sorted(p.name for p in (KERNELS / "csrc").glob("*.cu")) or ["none"])
def test_kernel_source_compiles_with_nvcc_11_8(nvcc, source, tmp_path, build_config):
    cfg = build_config
    arches = [a for a in IMAGE_ARCHES.split(";")]
    cmd = [
        str(nvcc),
        "-ccbin",
        "g++-11",
        "--threads",
        str(os.cpu_count() or 2),
        *cfg.NVCC_FLAGS,
        *cfg.gencode_flags(arches),
        "-I",
        str(cfg.CSRC),
        "-I",
        str(cfg.cutlass_include()),
        "-c",
        str(KERNELS / "csrc" / source),
        "-o",
        str(tmp_path / (source + ".o")),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stderr[-6000:]}"
    # Every image architecture is in the object's fat binary.
    cuobjdump = nvcc.parent / "cuobjdump"
    if cuobjdump.exists():
        listing = subprocess.run(
            [str(cuobjdump), "--list-elf", str(tmp_path / (source + ".o"))], capture_output=True, text=True
        ).stdout
        for arch in arches:
            assert f"sm_{arch.replace('.', '')}" in listing, listing
