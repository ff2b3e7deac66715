"""Build the hot-kernels CUDA extension: `pip install --no-build-isolation ./kernels`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_config
from setuptools import setup
from setuptools.command.build_py import build_py
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension

# The nvcc torch compiles with; HOT_KERNELS_SM90A's default, "auto", is settled against it (sm_90a where 9.0 is built
# with CUDA 12+) before the architectures, which torch.utils.cpp_extension reads from this variable when it compiles.
NVCC = os.path.join(CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(build_config.arch_list(build_config.resolve_sm90a(NVCC)))
if build_config.sm90a_requested():
    build_config.check_sm90a_toolkit(NVCC)


def _write_build_info(package_dir: Path) -> None:
    import torch

    info = build_config.build_info(build_config.arch_list(), build_config.sm90a_requested(), torch.__version__)
    build_config.write_build_info(package_dir, info)


class BuildPyWithInfo(build_py):
    """Copies the package, and records beside the extension what it is built from and for (build_config.BUILD_INFO)."""

    def run(self) -> None:
        super().run()
        _write_build_info(Path(self.build_lib) / "hot_kernels")


class BuildExtWithInfo(BuildExtension):
    """An in-place build (``setup.py build_ext --inplace``, as kernels/bench/gpu_session.sh makes) leaves its
    extension in the source package, so it records the build there too: the workflow's kernels rule checks it."""

    def run(self) -> None:
        super().run()
        if self.inplace:
            _write_build_info(Path(__file__).resolve().parent / "hot_kernels")


sources = [f"csrc/{name}" for name in (*build_config.CXX_SOURCES, *build_config.CUDA_SOURCES)]
setup(
    name="hot-kernels",
    version="0.1.0",
    description="CUDA kernels of HOT (Hadamard-based Optimized Training): fused Hadamard/HLA quantisers, int GEMMs",
    packages=["hot_kernels"],
    ext_modules=[
        CUDAExtension(
            "hot_kernels._C",
            sources,
            include_dirs=[str(build_config.CSRC), str(build_config.cutlass_include())],
            extra_compile_args={"cxx": build_config.CXX_FLAGS, "nvcc": build_config.nvcc_flags()},
        )
    ],
    cmdclass={"build_ext": BuildExtWithInfo, "build_py": BuildPyWithInfo},
    python_requires=">=3.10",
)
