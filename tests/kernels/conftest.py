"""Shared set-up of the hot-kernels tests: the `build` marker and the GPU/extension skips."""

from __future__ import annotations

import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "build: compiles the CUDA sources with nvcc (needs nvcc, no GPU)")


@pytest.fixture(scope="session")
def kernel_backend():
    """The real backend; skips without a GPU or without the built extension."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    hot_kernels = pytest.importorskip("hot_kernels", reason="hot-kernels extension not built")
    return hot_kernels.KernelBackend()
