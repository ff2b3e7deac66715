"""Where CUTLASS comes from and how the sources are compiled: shared by setup.py and the CPU build test."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"
CUDA_SOURCES = ("quant_kernels.cu", "cutlass_gemm.cu")
CXX_SOURCES = ("bindings.cpp",)
DEFAULT_ARCH_LIST = "8.0;8.6;8.9;9.0"
# No fast-math: the quantisers must round exactly like the float32 CPU reference.
NVCC_FLAGS = ["-O3", "-std=c++17", "--fmad=false", "--expt-relaxed-constexpr", "-DNDEBUG"]
CXX_FLAGS = ["-O3", "-std=c++17"]


def _has_headers(include: Path) -> bool:
    return (include / "cutlass" / "cutlass.h").is_file()


def cutlass_include() -> Path:
    """CUTLASS v4.2.0 headers: $CUTLASS_DIR, else the third_party/cutlass submodule, else the nvidia-cutlass wheel."""
    override = os.environ.get("CUTLASS_DIR")
    if override:
        for include in (Path(override) / "include", Path(override)):
            if _has_headers(include):
                return include
        raise RuntimeError(f"CUTLASS_DIR={override} holds no include/cutlass/cutlass.h")
    submodule = HERE.parent / "third_party" / "cutlass" / "include"
    if _has_headers(submodule):
        return submodule
    spec = importlib.util.find_spec("cutlass_library")
    if spec is not None and spec.origin is not None:
        wheel = Path(spec.origin).parent / "source" / "include"
        if _has_headers(wheel):
            return wheel
    raise RuntimeError(
        "CUTLASS headers not found: run `git submodule update --init third_party/cutlass`, "
        "`pip install nvidia-cutlass==4.2.0.0`, or set CUTLASS_DIR"
    )


def arch_list() -> list[str]:
    """Compute capabilities from TORCH_CUDA_ARCH_LIST ("8.0;9.0", "8.6+PTX"), default 8.0;8.6;8.9;9.0."""
    raw = os.environ.get("TORCH_CUDA_ARCH_LIST") or DEFAULT_ARCH_LIST
    return [a for a in raw.replace(" ", ";").split(";") if a]


def gencode_flags(arches: list[str]) -> list[str]:
    """nvcc -gencode flags for capabilities such as "9.0" or "8.6+PTX"."""
    flags = []
    for arch in arches:
        ptx = arch.endswith("+PTX")
        num = arch.removesuffix("+PTX").replace(".", "")
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags
