"""hot-kernels: the compiled CUDA ops of HOT (``_C``), and nothing else.

The ops are fused block-Hadamard + INT4/INT8 quantisers of g_y and W, the HLA projection + quantiser along
tokens (both g_y paths in one fused kernel too), INT4/INT8 CUTLASS GEMMs (sm_80, and sm_90a in builds for 9.0
with CUDA 12+ unless ``HOT_KERNELS_SM90A=0``), dequantisation and code-layout helpers. Each checks its tensors and
raises ``ValueError`` naming the problem. ``hot.backends.real`` is their one caller in ``hot``; this package imports
nothing from ``hot``.
"""

import torch  # noqa: F401  (loads the torch libraries _C links against: libc10, libtorch)

from . import _C

__all__ = ["_C"]
