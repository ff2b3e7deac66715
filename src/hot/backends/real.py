"""The ``real`` backend (``HOTConfig(backend="real")``): HOT's quantisers and GEMMs on the compiled ``hot_kernels`` ops.

The ops (``hot_kernels._C``, built from ``kernels/``) are fused block-Hadamard + INT4 quantisation of g_y,
Hadamard + SAWB INT4 of W, HLA projection + INT8 quantisation along tokens, and integer GEMMs. This module
chooses among them; the GEMM family is ``HOTConfig.gemm`` (``auto``: by the device's architecture):

- ``cutlass-int4`` (sm_80/86/89, the default there): the g_x GEMM is a CUTLASS INT4 tensor-op GEMM,
  operands packed two per byte along K (element 2k in the low nibble of byte k), int32 accumulate; the
  g_w GEMM is a CUTLASS INT8 one. ``cutlass`` uses the INT8 GEMM for both paths. Both are sm80 kernels;
  their exactness was verified on an H100 (which runs sm80 ``mma.sync``, INT4 emulated), not on sm_8x;
- ``cublas`` (sm_90 and newer, no INT4 tensor cores; a torch built for CUDA 12+, else ``auto`` takes
  ``cutlass`` there): INT4 codes on FP8 e4m3 tensor cores via ``torch._scaled_mm`` (exact: -8..7 are e4m3
  values, products are exact, fp32 accumulation of integers below 2^24 is exact) and INT8 via
  ``torch._int_mm`` (cuBLASLt). The g_x quantisers then write their 4-bit codes as ``float8_e4m3fn`` (same
  values) where O and I are multiples of 16, so the GEMM reads them with no conversion pass;
- ``cutlass-sm90`` (compute capability 9.0; ``auto``'s choice there when the build has it): g_x as ``cublas``; the
  g_w GEMM is a CUTLASS 3.x sm_90a INT8 GEMM (TMA, wgmma, warp-specialised, stream-K), on an H100 1.3-2.1x as fast
  as cuBLASLt's ``_int_mm`` at ViT-B's g_w shapes. Only in builds that have it (``HOT_KERNELS_SM90A``, by default
  where 9.0 is built with CUDA 12+);
- ``reference``: an exact float64 GEMM of the codes (any GPU; odd shapes on the other paths).

Dequantisation is one light pass, ``(acc · row_scale) · (col_scale / block)`` in the reference's float32
operation order, except on the FP8 path, where row-wise ``_scaled_mm`` scales apply it in the GEMM's
epilogue (equal up to fp32 rounding of the scale products). Codes come back as int8 (or e4m3, above)
tensors holding the reference's integer values; the weight and HLA codes are transposed views of the
layouts the GEMMs read (K contiguous). The HLA codes' rows lie R rounded up to 16 bytes apart
(:func:`hla_codes_pitch`): the sm_90a GEMM reads them as they lie at any R; at R % 16 != 0 the other integer GEMMs
(CUTLASS sm80, cuBLASLt) get both operands padded in one launch. The 4-bit g_x GEMMs (INT4, FP8) take only codes
known to lie in -8..7: those of the 4-bit quantisers, or codes passed through :func:`mark_4bit`; other int8
codes (``gx_bits=8``) use the exact INT8 GEMM.

HLA's windows are an index map inside the HLA quantisers (each thread computes the rows its 16 slots read), so
the gather costs no pass over memory. Options the kernels do not cover (blocks other than 16, i.e. the
authors' blocking where T is not an odd multiple of 16, per-token HLA or per-channel g_x scales) run the
reference ops on the tensor's device, whose codes and scales equal the CPU's bit for bit.

Tensor arguments are checked by the ops' C++ bindings, which raise ``ValueError`` naming the tensor and the
problem; specs are checked when they are made (:class:`hot.backends.HQSpec`, :class:`hot.backends.HLASpec`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from types import ModuleType

import torch

from ..config import GEMMS
from ..hla import HLAWindows, lp_l1_rows, projected_rows
from ..rounding import SPEC_HASH, StepKey, hash_rounds
from . import (
    GradientFrom,
    HLASpec,
    HQSpec,
    InputCodes,
    QuantizedGradOutput,
    WeightCodesFrom,
    WeightGradientFrom,
    XCodesFrom,
    gradients_in_order,
    layer_gradients_in_parts,
)
from . import column_sums as _column_sums
from .reference import ReferenceBackend

__all__ = [
    "RealBackend",
    "fp8_gemm_available",
    "hash_uniform",
    "hash_uniform_built",
    "hla_one_launch",
    "hla_rolled_transform",
    "load_ops",
    "mark_4bit",
    "sm90_balanced_grid",
    "sm90_programmatic_launch",
]

_E4M3 = torch.float8_e4m3fn
# Below this many multiply-adds a float32 4-bit g_x GEMM on int8 codes runs on the sm_90a INT8 ping-pong kernel (its
# dequantising epilogue, launched as a programmatic dependent) rather than cuBLAS's FP8 GEMM, where the build has the
# former: faster alone at each of the latency figure's 16 g_x shapes on an H200, by 0.2-4.1 us (kernels/results/
# h200_2026-11-29_s18/gx_route_29e300a.json); in the captured backward slower on ResNet-50's layer2.conv2 and
# layer4.conv2 (h200_2026-11-29_s19/ab_4cbc611.json), and 13 us faster summed over the 16. Larger products, bf16/fp16
# g_x (the FP8 GEMM writes them in its epilogue; the INT8 one writes float32) and codes already e4m3 keep the FP8
# GEMM. Where K and N are multiples of 16, only the launches that make W's and g_y's codes together write int8 codes
# (RealBackend._int8_gx_codes); a quantiser called alone writes e4m3 ones.
_SMALL_GX_MACS = 1 << 30
# ... and only where N is at most 4 K. A rule fitted to the latency figure's 16 layers: in the captured backward
# the FP8 GEMM was faster on exactly its four of N = 9 K (ResNet-50's conv2s), 4.8 us summed over the 16, the other
# 12 within noise (an H200: kernels/results/h200_2026-11-29_s21/ab_436309a.json, where this rule is `narrow_gx`, and
# ab_3e390ad.json, where it is the default and `wide_gx` the other side).
_SMALL_GX_MAX_WIDTH = 4.0
_4BIT = "_hot_4bit_codes"
_REFERENCE = ReferenceBackend()


def load_ops() -> ModuleType:
    """The compiled ops (``hot_kernels._C``); ``RuntimeError`` saying how to build them where they are missing."""
    try:
        from hot_kernels import _C
    except ImportError as err:
        raise RuntimeError(
            "backend 'real' needs the hot-kernels CUDA extension, which is not installed "
            f"({err}): build it with `pip install --no-build-isolation ./kernels` on a machine with nvcc, "
            "or use backend 'fake'"
        ) from err
    return _C


@contextlib.contextmanager
def _kernel_setting(
    set_it: Callable[[bool | float], None], value: bool | float, default: bool | float = True
) -> Iterator[None]:
    """Within: a process-wide setting of the compiled ops at ``value``; at ``default`` (on) again after."""
    set_it(value)
    try:
        yield
    finally:
        set_it(default)


def hla_one_launch(backend: RealBackend, enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Within: the compiled HLA quantiser takes its one-launch path where a tensor fits (``enabled``, the default) or
    always its two passes; on again after. Process-wide, for A/B tests and timings in one process."""
    return _kernel_setting(backend.ops.set_hla_one_launch, enabled)


def hla_rolled_transform(backend: RealBackend, enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Within: the one-launch HLA quantisers transform a unit's channels in a loop (``enabled``, the default: one copy
    of the code, which an SM running one CTA fetches once) or unrolled; on again after. The same bits either way.
    Process-wide, for A/B timings."""
    return _kernel_setting(backend.ops.set_hla_rolled_transform, enabled)


def sm90_balanced_grid(backend: RealBackend, enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Within: the sm_90a ping-pong g_w GEMM launches its balanced persistent grid (``enabled``, the default: the
    full grid's waves on the fewest SMs) or CUTLASS's full one; on again after. Process-wide, for A/B timings."""
    return _kernel_setting(backend.ops.set_sm90_balanced_grid, enabled)


def sm90_pingpong_sm_share(backend: RealBackend, share: float) -> contextlib.AbstractContextManager[None]:
    """Within: a small sm_90a product (below 2^30 multiply-adds) whose ping-pong grid would take more than
    ``share`` of the SMs takes the cooperative kernel, data-parallel, instead; every small product takes the
    ping-pong kernel again after (share 1, the default). Process-wide, for A/B timings."""
    return _kernel_setting(backend.ops.set_sm90_pingpong_sm_share, share, 1.0)


def sm90_programmatic_launch(backend: RealBackend, enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Within: the sm_90a GEMMs launch as programmatic dependents of the kernel before them (``enabled``, the
    default: their launch overlaps that kernel's completion) or after it ends; on again after. Process-wide, for A/B
    timings."""
    return _kernel_setting(backend.ops.set_sm90_programmatic_launch, enabled)


@functools.cache
def _side_stream(device: torch.device, index: int = 0) -> torch.cuda.Stream:
    """Side stream ``index`` of a CUDA device, made once: :func:`_side_streams` draws on them."""
    return torch.cuda.Stream(device)


def _side_streams(device: torch.device, current: torch.cuda.Stream, count: int) -> list[torch.cuda.Stream]:
    """``count`` distinct side streams of ``device`` for :meth:`RealBackend.gradients` (the g_w chain's, then x's
    codes' and W's codes' where they have one), none of them ``current``: the first such of :func:`_side_stream`'s.
    torch hands out its streams from a pool of 32 a priority, round robin, so a stream made after the side streams
    (a capture's, say) can be one of them; a side section queued on the capturing stream itself runs after the rest
    of the backward instead of beside it (ViT-B qkv's backward took 42 µs against 31 in the one capture of
    ``python -m hot.bench.latency_ab`` whose stream was the g_w chain's)."""
    streams: list[torch.cuda.Stream] = []
    index = 0
    while len(streams) < count:  # each new index takes the pool's next stream: the loop ends within 32 + count
        stream = _side_stream(device, index)
        if stream != current and stream not in streams:
            streams.append(stream)
        index += 1
    return streams


@dataclasses.dataclass(frozen=True, eq=False)
class WeightCodes:
    """The :data:`WeightCodesFrom` of :meth:`RealBackend._layer_gradients_in_parts`: W's codes and scale (and, with
    ``column_scales``, the FP8 GEMM's column scales) from ``RealBackend._weight_codes``, as data: a captured backward
    can then make them in one launch with g_y's HQ codes (the same bits)."""

    backend: RealBackend
    weight: torch.Tensor
    spec: HQSpec
    column_scales: bool
    # In one launch with g_y's HQ codes, both as int8 codes for the sm_90a INT8 g_x GEMM (else e4m3 where the FP8
    # GEMM reads them): RealBackend._int8_gx_codes, which the eager one-call backward follows too
    int8_codes: bool = False

    def __call__(self) -> tuple[torch.Tensor, ...]:
        return self.backend._weight_codes(self.weight, self.spec, self.column_scales)


def fp8_gemm_available() -> bool:
    """Whether this torch runs FP8 GEMMs (``torch._scaled_mm``): builds for CUDA 12 and later; CUDA 11.8 has none."""
    cuda = torch.version.cuda
    return cuda is not None and int(cuda.split(".")[0]) >= 12 and hasattr(torch, "_scaled_mm")


@functools.cache
def hash_uniform_built() -> bool:
    """Whether the loaded extension has the ``hash_uniform`` kernel (a build older than it has not)."""
    return hasattr(load_ops(), "hash_uniform")


def hash_uniform(numel: int, key: int | StepKey, device: torch.device, hash: str = SPEC_HASH) -> torch.Tensor:
    """:func:`hot.rounding.uniform`'s numbers for ``numel`` row-major indices under ``key`` and ``hash``: float32 on
    the CUDA ``device``, from one kernel (the kernels' ``hash_uniform``, the same function bit for bit; a StepKey's
    step read there, with no copy to the host)."""
    parts, step = _key_arg(key)
    return load_ops().hash_uniform(numel, parts, _device_index(device), step, hash_rounds(hash))


def mark_4bit(codes: torch.Tensor) -> torch.Tensor:
    """Declares that ``codes`` (int8) lie in -8..7, so :meth:`RealBackend.hq_matmul` may feed them to the 4-bit
    GEMMs (packed INT4 or FP8); returns ``codes``. Unmarked int8 codes take the INT8 GEMM."""
    setattr(codes, _4BIT, True)
    return codes


def _marked(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """``codes``, marked 4-bit (:func:`mark_4bit`) where ``bits`` is 4."""
    return mark_4bit(codes) if bits == 4 else codes


def _is_4bit(codes: torch.Tensor) -> bool:
    return codes.dtype == _E4M3 or getattr(codes, _4BIT, False)


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """Contiguous with a 16-byte aligned start (the kernels use vector loads)."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def hla_codes_pitch(rows: int) -> int:
    """The row pitch of the kernels' HLA codes_t (C, rows): rows rounded up to 16 bytes, the extension's
    ``hla_codes_pitch`` (a GPU test checks they agree). Arithmetic here, so that a size torch.compile keeps symbolic
    stays so (a call into the extension would fix it, and recompile for each batch size)."""
    return (rows + 15) // 16 * 16


def _hla_in_kernel(spec: HLASpec) -> bool:
    """Whether the kernels quantise ``spec``'s HLA: other blocks (the authors' blocking, the largest power of two
    dividing T) and per-token HLA scales run the reference's code."""
    return spec.windows.block == 16 and spec.granularity != "per_token"


def _pairable(spec: HLASpec) -> bool:
    """Whether the paired HLA launch (x's and g_y's quantisers at once) takes ``spec``: per-tensor scales over
    blocks of 16."""
    return spec.windows.block == 16 and spec.granularity == "per_tensor"


def _key_arg(key: int | StepKey) -> tuple[list[int], torch.Tensor | None]:
    """A hash key as the ops take it: [key], or a :class:`StepKey`'s [seed, layer, stream, rank] and its step tensor,
    which the kernels read (so a CUDA graph's replays each use their own step)."""
    return (key.parts(), key.step) if isinstance(key, StepKey) else ([key], None)


def _one_hash(hq: HQSpec, hla: HLASpec) -> bool:
    """Whether one hash serves both quantisers of a call (the composed ops take one): equal hashes, or an HLA spec
    that rounds to nearest. HOTConfig makes such specs; others run the quantisers one by one."""
    return hla.rounding != "stochastic" or hq.hash == hla.hash


def _shared_step(*steps: torch.Tensor | None) -> torch.Tensor | None:
    """The one step tensor of a call's keys (one layer's backward: its quantisers share the step)."""
    given = {id(s): s for s in steps if s is not None}
    if len(given) > 1:
        raise ValueError("the HQ and HLA keys of one layer backward must share their step tensor")
    return next(iter(given.values()), None)


def _hla_args(spec: HLASpec) -> tuple[list[int], list[int], int, bool, list[int], torch.Tensor | None]:
    """The HLA spec as the ops take it: windows, kept basis rows, bits, stochastic, hash key and its step."""
    w = spec.windows
    stochastic = spec.rounding == "stochastic"
    key, step = _key_arg(spec.key) if stochastic and spec.key is not None else ([0], None)
    return _windows_arg(w), list(lp_l1_rows(spec.rank)), spec.bits, stochastic, key, step


def _windows_arg(w: HLAWindows) -> list[int]:
    """HLA windows as the ops take them."""
    return [w.tokens, w.prefix, w.height, w.width, w.window_w]


def _flat(scale: torch.Tensor) -> torch.Tensor:
    return scale.reshape(-1).contiguous()


def _reference_acc(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b of int8 codes, exact (float64 holds every int32 sum), as int32."""
    return (a.double() @ b.double()).to(torch.int32)


class RealBackend:
    """The ``real`` backend. ``gemm`` picks the integer GEMMs (:data:`hot.config.GEMMS`; ``auto``: by the device's
    architecture); ``fused_grad_output`` lets :meth:`quantize_grad_output` run the fused two-pass g_y kernel."""

    name = "real"

    def __init__(self, gemm: str = "auto", fused_grad_output: bool = False, side_stream: bool = True) -> None:
        if gemm not in GEMMS:
            raise ValueError(f"gemm must be one of {list(GEMMS)}, got {gemm!r}")
        self.ops = load_ops()
        self.gemm = gemm
        self.fused_grad_output = fused_grad_output
        self.side_stream = side_stream
        self.small_gx_macs = _SMALL_GX_MACS  # 0: every 4-bit g_x product on the FP8 GEMM (an A/B's other side)
        self.small_gx_max_width = _SMALL_GX_MAX_WIDTH  # N / K; inf: every small product (an A/B's other side)
        self._sm90: dict[int, bool] = {}
        self._gemms: dict[int, str] = {}

    def __reduce__(self) -> tuple:
        # The compiled ops are a module, which pickle cannot copy: a copy (copy.deepcopy, pickle, timm's
        # ModelEmaV2) is the shared instance of the same options, rebuilt where it is loaded.
        from . import _backend

        return _backend, ("real", self.gemm, self.fused_grad_output, self.side_stream)

    def _sm90_available(self, index: int) -> bool:
        """Whether this build holds the sm_90a INT8 GEMM and CUDA device ``index`` runs it."""
        if index not in self._sm90:
            with torch.cuda.device(index):
                self._sm90[index] = bool(self.ops.cutlass_sm90_available())
        return self._sm90[index]

    def gemm_for(self, device: torch.device) -> str:
        """The GEMM family used on ``device`` (chosen once per device: every backward asks)."""
        index = _device_index(device)
        gemm = self._gemms.get(index)
        if gemm is None:
            gemm = self._gemms[index] = self._choose_gemm(index)
        return gemm

    def _choose_gemm(self, index: int) -> str:
        if self.gemm == "cutlass-sm90" and not self._sm90_available(index):
            raise RuntimeError(
                f"gemm 'cutlass-sm90' is not available on cuda:{index}: it needs a compute capability 9.0 GPU "
                "and hot-kernels built with its sm_90a GEMM (for 9.0 with CUDA 12+; HOT_KERNELS_SM90A=1 forces it)"
            )
        if self.gemm in ("cublas", "cutlass-sm90") and not fp8_gemm_available():
            raise RuntimeError(
                f"gemm {self.gemm!r} needs FP8 GEMMs (torch._scaled_mm), which this torch (CUDA {torch.version.cuda}) "
                "lacks: they need a CUDA 12+ build; use gemm 'cutlass' (INT8 tensor cores) or 'auto'"
            )
        if self.gemm != "auto":
            return self.gemm
        major, minor = torch.cuda.get_device_capability(index)
        if major == 8:
            return "cutlass-int4"
        if major >= 9:
            # Hopper has no INT4 tensor cores: 4-bit codes go to FP8 ones where this torch has FP8 GEMMs, else
            # (a CUDA 11.8 build, as the image's) to the INT8 ones, exact for any int8 codes. g_w takes the sm_90a
            # INT8 GEMM where the build has it: faster than cuBLASLt's at every ViT-B shape measured on an H100.
            if not fp8_gemm_available():
                return "cutlass"
            if (major, minor) == (9, 0) and self._sm90_available(index):
                return "cutlass-sm90"
            return "cublas"
        return "reference"

    def _gx_gemm(self, device: torch.device) -> str:
        """The family of the g_x GEMM on ``device``: ``cutlass-sm90`` differs from ``cublas`` only in g_w."""
        gemm = self.gemm_for(device)
        return "cublas" if gemm == "cutlass-sm90" else gemm

    def _fp8_codes(self, device: torch.device, bits: int, *dims: int) -> bool:
        """Whether the quantisers write e4m3 codes: the FP8 GEMM reads 4-bit ones as they are (K, N % 16 == 0)."""
        return bits == 4 and self._gx_gemm(device) == "cublas" and all(d % 16 == 0 for d in dims)

    @staticmethod
    def _on_reference(
        t: torch.Tensor, quantise: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """An option the kernels do not cover, through the reference ops on ``t``'s device: the fake backend's
        numbers, which equal the CPU's bit for bit (on the CPU, ViT-B's ``official`` blocking took a minute a step)."""
        codes, scale = quantise(t)
        return codes.to(torch.int8), scale

    # --- g_x path -------------------------------------------------------------------------------

    def hq_quantize_grad_output(self, g_y: torch.Tensor, spec: HQSpec) -> tuple[torch.Tensor, torch.Tensor]:
        self.ops.check_float_matrix(g_y, "g_y")
        if spec.granularity == "per_channel":  # no config selects it for g_x
            return self._on_reference(g_y, lambda g: _REFERENCE.hq_quantize_grad_output(g, spec))
        g = _aligned(g_y)
        fp8 = self._fp8_codes(g.device, spec.bits, g.shape[-1])
        key, step = _key_arg(spec.key)
        codes, scale = self.ops.hq_quantize_grad_output(
            g, spec.block, spec.bits, spec.granularity == "per_token", key, fp8, step, hash_rounds(spec.hash)
        )
        return _marked(codes, spec.bits), scale

    def hq_quantize_weight(self, weight: torch.Tensor, spec: HQSpec) -> tuple[torch.Tensor, torch.Tensor]:
        codes, scale = self._weight_codes(weight, spec)
        return codes, scale

    def _weight_codes(
        self, weight: torch.Tensor, spec: HQSpec, column_scales: bool = False
    ) -> tuple[torch.Tensor, ...]:
        """Q(HT(W)): its codes (O, I), a view of the kernel's transposed ones, marked 4-bit where they are, and its
        scale; with ``column_scales`` also the FP8 GEMM's column scales (I), scale / block, for :meth:`hq_matmul`'s
        ``b_columns``."""
        self.ops.check_float_matrix(weight, "weight")
        w = _aligned(weight)
        fp8 = self._fp8_codes(w.device, spec.bits, *w.shape)
        codes_t, *scales = self.ops.hq_quantize_weight(w, spec.block, spec.bits, fp8, column_scales)
        return _marked(codes_t.t(), spec.bits), *scales

    def hq_matmul(
        self,
        a_codes: torch.Tensor,
        a_scale: torch.Tensor,
        b_codes: torch.Tensor,
        b_scale: torch.Tensor,
        spec: HQSpec,
        out_dtype: torch.dtype = torch.float32,
        b_columns: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The Backend's ``hq_matmul``. ``b_columns``: b's scale over the block for each of its columns, as W's
        quantiser writes them (``_weight_codes(..., column_scales=True)``); the FP8 route's row-wise GEMM (a_scale
        per row) takes them in place of a launch that makes them, with the same bits. Unused elsewhere."""
        self.ops.check_hq_matmul(a_codes, a_scale, b_codes, b_scale, spec.block)
        if out_dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise ValueError(f"out_dtype must be float32, float16 or bfloat16, got {out_dtype}")
        narrow = _is_4bit(a_codes) and _is_4bit(b_codes)
        e4m3 = _E4M3 in (a_codes.dtype, b_codes.dtype)  # the FP8 GEMM reads them as they are: no conversion pass
        route = self._gx_route(a_codes.device, narrow, *a_codes.shape, b_codes.shape[1], out_dtype, e4m3)
        a, b_t = _aligned(a_codes), _aligned(b_codes.t())  # b_t (I, O): K contiguous; hq_quantize_weight's as is
        if route == "fp8" and b_columns is not None and a_scale.numel() > 1:
            # over the block already: fp8_matmul's division by a block of 1 launches nothing (one row scale and one
            # column scale would make the GEMM tensor-wise, another epilogue: those keep the path below)
            return self.ops.fp8_matmul(a, _flat(a_scale), b_t, b_columns, 1, out_dtype)
        if route == "fp8":
            return self.ops.fp8_matmul(a, _flat(a_scale), b_t, _flat(b_scale), spec.block, out_dtype)
        return self._integer_product(a, b_t, a_scale, b_scale, float(spec.block), route).to(out_dtype)

    def _integer_product(
        self, a: torch.Tensor, b_t: torch.Tensor, row: torch.Tensor, col: torch.Tensor, divisor: float, route: str
    ) -> torch.Tensor:
        """(a · b_tᵀ) dequantised, float32: the compiled ops' integer GEMM of ``route``, or the exact float64
        product on the ``reference`` route."""
        if route == "reference":
            return self.ops.dequantize(_reference_acc(a, b_t.t()), _flat(row), _flat(col), divisor)
        return self.ops.int_matmul(a, b_t, row, col, divisor, route)

    def _gx_route(
        self,
        device: torch.device,
        narrow: bool,
        m: int,
        k: int,
        n: int,
        out_dtype: torch.dtype = torch.float32,
        e4m3: bool = False,
    ) -> str:
        """The g_x GEMM for (m, k) · (k, n) codes on ``device``, 4-bit on both sides where ``narrow``, written as
        ``out_dtype``, the codes already e4m3 where ``e4m3``: ``fp8`` (row-wise ``_scaled_mm``, dequantisation in its
        epilogue), ``int8_sm90`` (the sm_90a INT8 GEMM with its dequantising epilogue, in place of ``fp8`` where the
        auto family holds it for float32 products below ``_SMALL_GX_MACS`` on int8 codes, N at most
        ``small_gx_max_width`` (``_SMALL_GX_MAX_WIDTH``) times K), ``int4`` or ``int8``
        (CUTLASS sm80), else ``reference``. 8-bit codes take the INT8 sm80 GEMM, exact for any int8 (it also runs on
        sm_90)."""
        gemm = self._gx_gemm(device)
        if not narrow and gemm in ("cublas", "cutlass-int4"):
            gemm = "cutlass"
        if m > 0 and gemm == "cublas" and n % 16 == 0:
            small = m * k * n < self.small_gx_macs and out_dtype == torch.float32 and not e4m3
            small = small and n <= self.small_gx_max_width * k
            return "int8_sm90" if small and self.gemm_for(device) == "cutlass-sm90" else "fp8"
        if m > 0 and gemm == "cutlass-int4" and n % 4 == 0:
            return "int4"
        if m > 0 and gemm == "cutlass" and n % 4 == 0:
            return "int8"
        return "reference"

    # --- both paths -----------------------------------------------------------------------------

    def fuses_grad_output(self, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec) -> bool:
        """Whether :meth:`quantize_grad_output` runs the fused two-pass kernel (else the two quantisers)."""
        return (
            self.fused_grad_output
            and g_y.dim() == 2
            and g_y.shape[1] % 4 == 0
            and hq.granularity in ("per_token", "per_tensor")
            and hla.windows.block == 16
            and hla.granularity in ("per_tensor", "per_channel")
            and _one_hash(hq, hla)
        )

    def quantize_grad_output(
        self, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec, column_sums: bool = False
    ) -> QuantizedGradOutput:
        """Q(HT(g_y)) for g_x and Q(P g_y) for g_w, bit-identical to the two quantisers, and with ``column_sums``
        the bias gradient, from per-tile partial sums of the statistics pass over g_y (HLA's amax pass). By default
        the two quantisers; with ``fused_grad_output`` two passes over g_y (a statistics pass, then one that writes
        both code sets)."""
        if not self.fuses_grad_output(g_y, hq, hla):
            a_codes, a_scale = self.hq_quantize_grad_output(g_y, hq)  # each quantiser checks g_y
            return QuantizedGradOutput(a_codes, a_scale, *self._hla_quantize(g_y, hla, column_sums))
        self.ops.check_float_matrix(g_y, "g_y")
        g = _aligned(g_y)
        windows, rows, hla_bits, stochastic, hla_key, hla_step = _hla_args(hla)
        hq_key, hq_step = _key_arg(hq.key)
        fp8 = self._fp8_codes(g.device, hq.bits, g.shape[1])
        codes, scale, g_codes_t, g_scale, sums = self.ops.quantize_grad_output(
            g,
            windows,
            hq.block,
            hq.bits,
            hq.granularity == "per_token",
            hq_key,
            fp8,
            rows,
            hla_bits,
            hla.granularity == "per_channel",
            stochastic,
            hla_key,
            column_sums,
            _shared_step(hq_step, hla_step),
            hash_rounds(hq.hash),  # the HLA spec's too: fuses_grad_output checks
        )
        codes = _marked(codes, hq.bits)
        g_scale = g_scale.reshape(1, -1) if hla.granularity == "per_channel" else g_scale
        return QuantizedGradOutput(codes, scale, g_codes_t.t(), g_scale, sums if column_sums else None)

    def gradients(
        self,
        g_y: torch.Tensor,
        hq: HQSpec,
        hla: HLASpec,
        column_sums: bool,
        g_x_from: GradientFrom,
        g_w_from: WeightGradientFrom,
        weight_codes_from: WeightCodesFrom,
        x_codes_from: XCodesFrom,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """While a CUDA graph is captured: the g_w chain (HLA quantiser with the bias gradient, g_w_from) on a side
        stream and the g_x chain (HQ quantiser, g_x_from once W's codes are there) on the current one, then the
        current stream waits for all. x's codes given as :class:`InputCodes` (x kept, quantised here) come from one
        cooperative launch with g_y's HLA codes in the g_w chain, and W's given as :class:`WeightCodes` from W's
        statistics pass and one launch with g_y's HQ codes in the g_x chain, where the kernels take them (each chain
        then one stream, no wait across streams until the join); other x's codes (stored, or x made again) run on a
        third stream beside the g_w chain, other W's on a fourth. A small layer's kernels fill a fraction of the GPU,
        and each branch a graph forks starts about 1.5 µs after the one before it and each wait across streams costs
        about as much (measured on an H200, ``hot.bench.latency_timeline``): two branches, each one stream, took
        410 µs summed over the latency figure's 16 layers against 475 with four. Eager calls keep one stream:
        there a HOT step is bound by its host time, which the other streams' events and switches add to (measured
        on an H100: 84.6 against 72.0 ms a ViT-B step eager, 49.5 against 50.8 in CUDA graphs). The fused
        quantiser writes both code sets in one pass, so it keeps one stream, as does ``side_stream=False``."""
        if (
            not self.side_stream
            or g_y.device.type != "cuda"
            or not torch.cuda.is_current_stream_capturing()
            or self.fuses_grad_output(g_y, hq, hla)
        ):
            return gradients_in_order(
                self, g_y, hq, hla, column_sums, g_x_from, g_w_from, weight_codes_from, x_codes_from
            )
        current = torch.cuda.current_stream(g_y.device)
        pair_x = self._pairs_with_grad_output(x_codes_from, g_y, hla)
        w_with_gy = self._weight_with_grad_output(weight_codes_from, g_y, hq)
        streams = _side_streams(g_y.device, current, 1 + (not pair_x) + (not w_with_gy))
        side, rest = streams[0], iter(streams[1:])
        operand = None if pair_x else next(rest)
        weight_stream = None if w_with_gy else next(rest)
        # Every side section starts after all the current stream has queued, and the current stream waits for
        # them before anything reads their results: the caching allocator's per-stream reuse then needs no
        # record_stream (which graph capture does not take), for the side sections' blocks or for g_y.
        for stream in streams:
            stream.wait_stream(current)
        try:
            if weight_stream is not None:
                with torch.cuda.stream(weight_stream):
                    w_codes = weight_codes_from()
            if operand is not None:
                with torch.cuda.stream(operand):
                    x_codes = x_codes_from()
            with torch.cuda.stream(side):
                if operand is None:
                    x_codes, (codes, scale, sums) = self._hla_quantize_pair(x_codes_from, g_y, hla, column_sums)
                else:
                    codes, scale, sums = self._hla_quantize(g_y, hla, column_sums)
                    side.wait_stream(operand)
                g_w = g_w_from(codes, scale, *x_codes)
            if weight_stream is None:
                w_codes, (a_codes, a_scale) = self._weight_and_grad_output_codes(weight_codes_from, g_y, hq)
            else:
                a_codes, a_scale = self.hq_quantize_grad_output(g_y, hq)
                current.wait_stream(weight_stream)
            g_x = g_x_from(a_codes, a_scale, *w_codes)
        finally:  # joined on an error too: an unjoined capture would end with a CUDA error in place of this one
            for stream in reversed(streams):
                current.wait_stream(stream)
        return g_x, g_w, sums

    def _pairs_with_grad_output(self, x_codes_from: XCodesFrom, g_y: torch.Tensor, hla: HLASpec) -> bool:
        """Whether :meth:`gradients` quantises x with g_y's HLA quantiser (:meth:`_hla_quantize_pair`): x given as
        :class:`InputCodes` of this backend, both on the kernels' per-tensor quantiser, one hash, and the kernels
        taking both in one launch (the same type, channels in fours, all tiles resident at once; elsewhere x keeps
        its own stream, beside g_y's quantiser)."""
        if not isinstance(x_codes_from, InputCodes) or x_codes_from.backend is not self:
            return False
        x, spec = x_codes_from.x, x_codes_from.spec
        both = (spec, hla)
        stochastic = {s.hash for s in both if s.rounding == "stochastic"}
        if not (
            x.is_cuda
            and x.device == g_y.device
            and x.dim() == 2
            and g_y.dim() == 2
            and all(_pairable(s) for s in both)
            and len(stochastic) <= 1
        ):
            return False
        args = []
        for t, s in ((x, spec), (g_y, hla)):
            windows, rows, _, is_stochastic, _, _ = _hla_args(s)
            args += [t, windows, rows, is_stochastic]  # a question of dtype and shape: no copy to align t
        return self.ops.hla_pair_in_one_launch(*args)

    def _hla_quantize_pair(
        self, x_codes: InputCodes, g_y: torch.Tensor, hla: HLASpec, column_sums: bool
    ) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
        """x's HLA codes and scale, and g_y's with its column sums (``column_sums``), as :meth:`hla_quantize` and
        :meth:`_hla_quantize` make them, from one cooperative launch where the kernels take both at once (else
        two calls on the current stream)."""
        x, spec = x_codes.x, x_codes.spec
        if not all(_pairable(s) for s in (spec, hla)):
            raise ValueError("the paired HLA launch takes per-tensor scales over blocks of 16 (_pairable)")
        self.ops.check_float_matrix(x, "t")
        self.ops.check_float_matrix(g_y, "t")
        args = []
        for t, s, sums in ((x, spec, False), (g_y, hla, column_sums)):
            windows, rows, bits, stochastic, key, step = _hla_args(s)
            args += [_aligned(t), windows, rows, bits, stochastic, key, sums, step]
        hashes = [s.hash for s in (spec, hla) if s.rounding == "stochastic"]
        rounds = hash_rounds(hashes[0] if hashes else SPEC_HASH)
        x_c, x_s, _, g_c, g_s, g_sums = self.ops.hla_quantize_pair(*args, rounds)
        return (x_c.t(), x_s), (g_c.t(), g_s, g_sums if column_sums else None)

    def _weight_with_grad_output(self, weight_codes_from: WeightCodesFrom, g_y: torch.Tensor, hq: HQSpec) -> bool:
        """Whether :meth:`gradients` makes W's codes and g_y's HQ codes in one launch after W's statistics pass
        (:meth:`_weight_and_grad_output_codes`): W given as :class:`WeightCodes` of this backend and of g_y's spec,
        per-token scales, rows the kernels' launch takes."""
        if not isinstance(weight_codes_from, WeightCodes) or weight_codes_from.backend is not self:
            return False
        w = weight_codes_from.weight
        return (
            weight_codes_from.spec == hq
            and w.is_cuda
            and w.device == g_y.device
            and w.dim() == 2
            and g_y.dim() == 2
            and g_y.shape[1] == w.shape[0]
            and self._shares_weight_launch(g_y, hq)
        )

    def _shares_weight_launch(self, g_y: torch.Tensor, hq: HQSpec) -> bool:
        """Whether the kernels take W's code pass and 2-D g_y's HQ rows in one launch: per-token scales, rows the
        launch takes."""
        return hq.granularity == "per_token" and self.ops.weight_and_grad_output_in_one_launch(hq.block, g_y.shape[1])

    def _weight_and_grad_output_codes(
        self, weight_codes: WeightCodes, g_y: torch.Tensor, hq: HQSpec
    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, torch.Tensor]]:
        """``weight_codes()`` and :meth:`hq_quantize_grad_output`'s codes and scale, from W's statistics pass and
        one launch for both code sets (the same bits)."""
        w, column_scales = weight_codes.weight, weight_codes.column_scales
        if hq.granularity != "per_token" or weight_codes.spec != hq:
            raise ValueError(
                "the shared W/HQ launch takes g_y's per-token scales and W's spec (_weight_with_grad_output)"
            )
        self.ops.check_float_matrix(w, "weight")
        self.ops.check_float_matrix(g_y, "g_y")
        w, g = _aligned(w), _aligned(g_y)
        key, step = _key_arg(hq.key)
        fp8 = not weight_codes.int8_codes  # int8 codes for the INT8 GEMM, which ignores the column scales
        *w_out, codes, scale = self.ops.hq_quantize_weight_and_grad_output(
            w,
            g,
            hq.block,
            hq.bits,
            self._fp8_codes(w.device, hq.bits, *w.shape) and fp8,
            column_scales,
            key,
            self._fp8_codes(g.device, hq.bits, g.shape[-1]) and fp8,
            step,
            hash_rounds(hq.hash),
        )
        codes_t, *scales = w_out
        return (_marked(codes_t.t(), hq.bits), *scales), (_marked(codes, hq.bits), scale)

    def layer_gradients(
        self,
        g_y: torch.Tensor,
        weight: torch.Tensor,
        x_codes_from: XCodesFrom,
        hq: HQSpec,
        hla: HLASpec,
        gx_dtype: torch.dtype,
        column_sums: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """One call of the compiled ops (``layer_gradients``) where the backward runs on one stream with the
        kernels' quantisers and GEMMs: the kernels of :func:`layer_gradients_in_parts` on the same inputs (so the
        same bits), without a Python call per kernel (an eager HOT step is bound by its host time). Elsewhere (a
        capture with the side streams, the fused g_y quantiser, options or shapes on the reference ops) that
        composition, as :meth:`_layer_gradients_in_parts` runs it."""
        gx_route = self._one_call_gx_route(g_y, weight, hq, hla, gx_dtype)
        if gx_route is None:
            return self._layer_gradients_in_parts(g_y, weight, x_codes_from, hq, hla, gx_dtype, column_sums)
        x_codes, x_scale = x_codes_from()
        device, out_f, in_f = g_y.device, g_y.shape[1], weight.shape[1]
        gw_route = self._gw_route(device, out_f, *x_codes.shape) if x_codes.dim() == 2 else "reference"
        if gw_route == "reference":
            codes = x_codes, x_scale
            return self._layer_gradients_in_parts(g_y, weight, lambda: codes, hq, hla, gx_dtype, column_sums)
        windows, rows, bits, stochastic, hla_key, hla_step = _hla_args(hla)
        hq_key, hq_step = _key_arg(hq.key)
        g_x, g_w, sums = self.ops.layer_gradients(
            g_y,
            weight,
            x_codes,
            x_scale,
            hq.block,
            hq.bits,
            hq.granularity == "per_token",
            hq_key,
            self._fp8_codes(device, hq.bits, out_f) and gx_route == "fp8",  # int8 codes for the INT8 routes
            self._fp8_codes(device, hq.bits, out_f, in_f) and gx_route == "fp8",
            gx_route,
            gx_dtype,
            windows,
            rows,
            bits,
            stochastic,
            hla.granularity == "per_channel",
            hla_key,
            column_sums,
            gw_route,
            _shared_step(hq_step, hla_step),
            hash_rounds(hq.hash),  # the HLA spec's too: _one_call_gx_route checks
        )
        return g_x, g_w, sums if column_sums else None

    def _layer_gradients_in_parts(
        self,
        g_y: torch.Tensor,
        weight: torch.Tensor,
        x_codes_from: XCodesFrom,
        hq: HQSpec,
        hla: HLASpec,
        gx_dtype: torch.dtype,
        column_sums: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """:func:`layer_gradients_in_parts`, except where g_x takes the FP8 route with per-token scales: there W's
        quantiser also writes the GEMM's column scales (scale / block for each of the I columns, as the one-call
        backward has it), which :meth:`hq_matmul` takes, so the g_x chain launches no kernel to make them (the same
        bits: one float multiply by the same factor)."""
        columns = self._gx_columns_from_quantiser(g_y, weight, hq, gx_dtype)
        int8 = self._int8_gx_codes(g_y, weight, hq, hla, gx_dtype)
        weight_codes = WeightCodes(self, weight, hq, columns, int8)
        return layer_gradients_in_parts(self, g_y, weight, x_codes_from, hq, hla, gx_dtype, column_sums, weight_codes)

    def _gx_columns_from_quantiser(
        self, g_y: torch.Tensor, weight: torch.Tensor, hq: HQSpec, gx_dtype: torch.dtype
    ) -> bool:
        """Whether :meth:`_layer_gradients_in_parts` takes W's column scales from its quantiser: g_x on the FP8 route
        (4-bit codes) with g_y's per-token scales, on the kernels' quantisers, and more than one token (one token's
        one scale and W's one make ``fp8_matmul`` tensor-wise, another epilogue than the row-wise one I column
        scales would take). Codes made alone are e4m3 there, whatever the product's size; where the shared W/HQ
        launch writes int8 codes for the INT8 GEMM, that GEMM ignores the column scales."""
        return (
            g_y.is_cuda
            and g_y.dim() == 2
            and weight.dim() == 2
            and gx_dtype in (torch.float32, torch.float16, torch.bfloat16)
            and hq.bits == 4
            and hq.granularity == "per_token"
            and g_y.shape[0] > 1
            and self._gx_route(g_y.device, True, *g_y.shape, weight.shape[1], gx_dtype, e4m3=True) == "fp8"
        )

    def _one_call_gx_route(
        self,
        g_y: torch.Tensor,
        weight: torch.Tensor,
        hq: HQSpec,
        hla: HLASpec,
        gx_dtype: torch.dtype,
        capturing: bool | None = None,
    ) -> str | None:
        """The g_x GEMM route where :meth:`layer_gradients` can run as one call (given a g_w route off the
        reference GEMM), else None: 2-D CUDA tensors, the kernels' quantisers (the per-channel HQ and per-token HLA
        scales, and blocks other than 16, are the reference's), g_x on the kernels or torch's FP8 GEMM, one stream
        (``capturing``: whether a CUDA graph is being captured, by default the current stream's state). The sm_90a
        INT8 GEMM only where a captured backward takes it too (:meth:`_int8_gx_codes`), so eager and captured steps
        give the same bits."""
        if capturing is None:
            capturing = torch.cuda.is_current_stream_capturing()
        if not (
            g_y.is_cuda
            and g_y.dim() == 2
            and weight.dim() == 2
            and gx_dtype in (torch.float32, torch.float16, torch.bfloat16)
            and hq.granularity != "per_channel"
            and hla.windows.block == 16
            and hla.granularity != "per_token"
            and not self.fuses_grad_output(g_y, hq, hla)
            and not (self.side_stream and capturing)
            and _one_hash(hq, hla)
        ):
            return None
        device, out_f, in_f = g_y.device, g_y.shape[1], weight.shape[1]
        route = self._gx_route(device, hq.bits == 4, *g_y.shape, in_f, gx_dtype)
        # A captured backward makes int8 codes in the launch W's codes share with g_y's per-token HQ rows; where they
        # cannot share it, the quantisers alone write e4m3 codes where K and N allow, and the FP8 GEMM reads them.
        if route == "int8_sm90" and not self._shares_weight_launch(g_y, hq):
            if self._fp8_codes(device, hq.bits, out_f) or self._fp8_codes(device, hq.bits, out_f, in_f):
                route = "fp8"
        return None if route == "reference" else route

    def _int8_gx_codes(
        self, g_y: torch.Tensor, weight: torch.Tensor, hq: HQSpec, hla: HLASpec, gx_dtype: torch.dtype
    ) -> bool:
        """Whether a layer's backward makes g_x's codes (W's and g_y's HQ ones) as int8 codes for the sm_90a INT8
        GEMM: where its eager one-call backward takes that GEMM. A captured backward then makes them in the launch W
        shares with g_y's HQ rows (:class:`WeightCodes`'s ``int8_codes``). Elsewhere the quantisers make them alone:
        e4m3 where K and N are multiples of 16, which the FP8 GEMM reads as they are, else int8."""
        return self._one_call_gx_route(g_y, weight, hq, hla, gx_dtype, capturing=False) == "int8_sm90"

    def grad_output_bytes(self, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec) -> int:
        """Device-memory bytes :meth:`quantize_grad_output` reads and writes (its kernels, not the minimum)."""
        length, channels = g_y.shape
        proj_rows = projected_rows(length, hla.windows, hla.rank)
        codes = length * channels + proj_rows * channels + 4 * (length + channels)  # codes, scales
        reads = 2 if self.fuses_grad_output(g_y, hq, hla) else 3  # the unfused HLA path reads g_y twice too
        return reads * g_y.numel() * g_y.element_size() + codes

    # --- g_w path -------------------------------------------------------------------------------

    def hla_quantize(self, t: torch.Tensor, spec: HLASpec) -> tuple[torch.Tensor, torch.Tensor]:
        codes, scale, _ = self._hla_quantize(t, spec, column_sums=False)
        return codes, scale

    def hla_codes_like(self, x: torch.Tensor, spec: HLASpec) -> torch.Tensor:
        if not _hla_in_kernel(spec):
            return _REFERENCE.hla_codes_like(x, spec)
        # the kernels' codes: the transpose of (C, rows), rows at a pitch the sm_90a GEMM reads them at
        rows = projected_rows(x.shape[0], spec.windows, spec.rank)
        return x.new_empty((x.shape[1], hla_codes_pitch(rows)), dtype=torch.int8)[:, :rows].t()

    def _hla_quantize(
        self, t: torch.Tensor, spec: HLASpec, column_sums: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """:meth:`hla_quantize`'s codes and scale, and with ``column_sums`` t's column sums from its amax pass."""
        self.ops.check_float_matrix(t, "t")
        if not _hla_in_kernel(spec):
            codes, scale = self._on_reference(t, lambda x: _REFERENCE.hla_quantize(x, spec))
            return codes, scale, _column_sums(t) if column_sums else None
        x = _aligned(t)
        windows, rows, bits, stochastic, key, step = _hla_args(spec)
        per_channel = spec.granularity == "per_channel"
        codes_t, scale, sums = self.ops.hla_quantize(
            x, windows, rows, bits, stochastic, per_channel, key, column_sums, step, hash_rounds(spec.hash)
        )
        return codes_t.t(), scale.reshape(1, -1) if per_channel else scale, sums if column_sums else None

    def hla_project(self, t: torch.Tensor, windows: HLAWindows, rank: int) -> torch.Tensor:
        self.ops.check_float_matrix(t, "t")
        if windows.block != 16:  # other blocks are not in the kernel
            return _REFERENCE.hla_project(t, windows, rank)
        return self.ops.hla_project(_aligned(t), _windows_arg(windows), list(lp_l1_rows(rank)))

    def hla_unproject(self, p: torch.Tensor, windows: HLAWindows, rank: int, length: int) -> torch.Tensor:
        if windows.block != 16:
            return _REFERENCE.hla_unproject(p, windows, rank, length)
        return self.ops.hla_unproject(_aligned(p.float()), length, _windows_arg(windows), list(lp_l1_rows(rank)))

    def hla_matmul(
        self, g_codes: torch.Tensor, g_scale: torch.Tensor, x_codes: torch.Tensor, x_scale: torch.Tensor, spec: HLASpec
    ) -> torch.Tensor:
        self.ops.check_hla_matmul(g_codes, g_scale, x_codes, x_scale)
        (r, o), i = g_codes.shape, x_codes.shape[1]
        # (O, R) and (I, R) views: int_matmul's GEMMs read an HLA quantiser's codes where they lie (rows at a pitch
        # of 16 bytes) or pad them, and copy transposed layouts
        a, b_t = g_codes.t(), x_codes.t()
        route = self._gw_route(a.device, o, r, i)
        return self._integer_product(a, b_t, g_scale, x_scale, float(spec.windows.block), route)

    def _gw_route(self, device: torch.device, o: int, r: int, i: int) -> str:
        """The g_w GEMM for (o, r) · (r, i) int8 codes on ``device``: ``int8_sm90`` (CUTLASS sm_90a), ``int8_lt``
        (cuBLASLt), ``int8`` (CUTLASS sm80), else ``reference``."""
        gemm = self.gemm_for(device)
        # The sm_90a GEMM takes every K: it dequantises in its epilogue and reads HLA codes where they lie (rows at
        # a 16-byte pitch), other operands with K not a multiple of 16 zero-padded, both in one launch; cuBLASLt
        # (K % 8) needs a separate dequantisation pass.
        if gemm == "cutlass-sm90" and i % 4 == 0 and o > 0 and r > 0:
            return "int8_sm90"
        if gemm == "cublas" and o > 16 and i % 8 == 0 and r > 0:
            return "int8_lt"
        if gemm in ("cutlass", "cutlass-int4") and i % 4 == 0 and o > 0 and r > 0:
            return "int8"
        return "reference"
