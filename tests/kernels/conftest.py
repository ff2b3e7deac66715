"""Shared set-up of the hot-kernels tests: the `build` marker and the GPU/extension skips."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "build: compiles the CUDA sources with nvcc (needs nvcc, no GPU)")


@pytest.fixture(scope="session")
def kernel_backend():
    """The real backend; skips without a GPU or without the built extension."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    pytest.importorskip("hot_kernels", reason="hot-kernels extension not built")
    from hot.backends.real import RealBackend

    return RealBackend()


@pytest.fixture(scope="session")
def nvcc() -> str:
    """nvcc from $CUDA_HOME / $CUDA_PATH, else from PATH; skips without one."""
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidate = Path(cuda_home, "bin", "nvcc") if cuda_home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    found = shutil.which("nvcc")
    if found is None:
        pytest.skip("nvcc not found")
    return found
