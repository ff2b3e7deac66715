"""The real-quant backend: the compiled ``hot_kernels`` extension (built from ``kernels/``)."""

from __future__ import annotations

from . import Backend


def load_kernel_backend() -> Backend:
    try:
        import hot_kernels
    except ImportError as err:
        raise RuntimeError(
            "backend 'real' needs the hot-kernels CUDA extension, which is not installed: "
            "build it with `pip install --no-build-isolation ./kernels` on a machine with nvcc, "
            "or use backend 'fake'"
        ) from err
    return hot_kernels.KernelBackend()
