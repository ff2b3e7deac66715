"""hot-kernels: the real-quant backend of ``hot`` (``HOTConfig(backend="real")``).

:class:`KernelBackend` implements :class:`hot.backends.Backend` with the compiled kernels in ``_C``:
fused block-Hadamard + INT4 quantisation of g_y, Hadamard + SAWB INT4 of W, HLA projection + INT8
quantisation along tokens, and integer GEMMs chosen by architecture (``gemm="auto"``):

- ``cutlass-int4`` (sm_80/86/89, the default there): the g_x GEMM is a CUTLASS INT4 tensor-op GEMM,
  operands packed two per byte along K (element 2k in the low nibble of byte k), int32 accumulate; the
  g_w GEMM is a CUTLASS INT8 one. ``cutlass`` uses the INT8 GEMM for both paths. Both are sm80 kernels;
  their exactness was verified on an H100 (which runs sm80 ``mma.sync``, INT4 emulated), not on sm_8x;
- ``cublas`` (sm_90 and newer, no INT4 tensor cores): INT4 codes on FP8 e4m3 tensor cores via
  ``torch._scaled_mm`` (exact: -8..7 are e4m3 values, products are exact, fp32 accumulation of
  integers below 2^24 is exact) and INT8 via ``torch._int_mm`` (cuBLASLt). The g_x quantisers then
  write their 4-bit codes as ``float8_e4m3fn`` (same values) where O and I are multiples of 16, so the
  GEMM reads them with no conversion pass;
- ``cutlass-sm90`` (opt-in, compute capability 9.0): g_x as ``cublas``; the g_w GEMM is a CUTLASS 3.x
  sm_90a INT8 GEMM (TMA, wgmma, warp-specialised, stream-K). Only in builds made with
  ``HOT_KERNELS_SM90A=1`` (it doubles the build time);
- ``reference``: an exact float64 GEMM of the codes (any GPU; odd shapes on the other paths).

Dequantisation is one light pass, ``(acc · row_scale) · (col_scale / block)`` in the reference's float32
operation order, except on the FP8 path, where row-wise ``_scaled_mm`` scales apply it in the GEMM's
epilogue (equal up to fp32 rounding of the scale products). Codes come back as int8 (or e4m3, above)
tensors holding the reference's integer values; the weight and HLA codes are transposed views of the
layouts the GEMMs read (K contiguous), so no copy is needed.
The 4-bit g_x GEMMs (INT4, FP8) take only codes known to lie in -8..7: those of the 4-bit quantisers,
or codes passed through :func:`mark_4bit`. Other int8 codes (``gx_bits=8``) use the exact INT8 GEMM.
HLA's windows (``hot.hla.HLAWindows``: 4×4 windows of a grid with exact prefix tokens, or 1×16 strips) are an
index map inside the HLA quantisers: each thread computes the rows its 16 slots read, so the gather costs no
pass over memory. Options the kernels do not cover (blocks other than 16, i.e. the authors' blocking where
T is not an odd multiple of 16, per-token HLA or per-channel g_x scales) run the reference ops on the
CPU (torch's CUDA division by a scalar multiplies by the reciprocal, so only the CPU ops give the
reference's bits) and move the result back.
"""

from __future__ import annotations

import functools

import torch

from hot.backends import HLASpec, HQSpec, quantize_grad_output_separately

from . import _C

__all__ = ["GEMMS", "KernelBackend", "mark_4bit"]

GEMMS = ("auto", "cutlass", "cutlass-int4", "cublas", "cutlass-sm90", "reference")
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_MASK32 = 0xFFFFFFFF
_E4M3 = torch.float8_e4m3fn
_4BIT = "_hot_4bit_codes"


def mark_4bit(codes: torch.Tensor) -> torch.Tensor:
    """Declares that ``codes`` (int8) lie in -8..7, so :meth:`KernelBackend.hq_matmul` may feed them to
    the 4-bit GEMMs (packed INT4 or FP8); returns ``codes``. Unmarked int8 codes take the INT8 GEMM."""
    setattr(codes, _4BIT, True)
    return codes


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.cache
def _sm90_available(index: int) -> bool:
    """Whether this build holds the sm_90a INT8 GEMM and CUDA device ``index`` runs it."""
    available = getattr(_C, "cutlass_sm90_available", None)  # absent from builds older than the GEMM
    with torch.cuda.device(index):
        return available is not None and bool(available())


def _is_4bit(codes: torch.Tensor) -> bool:
    return codes.dtype == _E4M3 or getattr(codes, _4BIT, False)


def _float_input(t: object, name: str, dims: int = 2) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise ValueError(f"{name} must be on a CUDA device for backend 'real', got {t.device}")
    if t.dtype not in _FLOATS:
        raise ValueError(f"{name} must be float32, float16 or bfloat16, got {t.dtype}")
    if t.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D, got shape {tuple(t.shape)}")
    return _aligned(t)


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """Contiguous with a 16-byte aligned start (the kernels use vector loads)."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _codes(t: object, name: str, fp8: bool = False) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise ValueError(f"{name} must be on a CUDA device, got {t.device}")
    if t.dtype != torch.int8 and not (fp8 and t.dtype == _E4M3):
        raise ValueError(f"{name} must be int8 codes{' (or float8_e4m3fn)' if fp8 else ''}, got {t.dtype}")
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    return t


def _scale(t: object, name: str, allowed: tuple[int, ...]) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or not t.is_cuda:
        raise ValueError(f"{name} must be a float32 CUDA tensor")
    if t.numel() not in allowed:
        raise ValueError(f"{name} has {t.numel()} elements, expected one of {sorted(set(allowed))}")
    return t.reshape(-1).contiguous()


def _check_block(block: object, size: int, what: str) -> int:
    if not isinstance(block, int) or block < 1 or block > 16 or block & (block - 1):
        raise ValueError(f"Hadamard block must be 1, 2, 4, 8 or 16, got {block!r}")
    if size % block:
        raise ValueError(f"{what} = {size} is not a multiple of the Hadamard block {block}")
    return block


def _check_bits(bits: object) -> int:
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
    return int(bits)


def _check_key(key: object) -> int:
    if not isinstance(key, int) or not 0 <= key <= _MASK32:
        raise ValueError(f"hash key must be an integer in [0, 2**32), got {key!r}")
    return key


def _hla_options(length: int, spec: HLASpec) -> tuple[list[int], tuple[int, ...], int, bool]:
    """Checked HLA arguments: the windows as the kernels take them, the kept basis rows, the bit width and
    whether rounding is stochastic."""
    from hot.hla import HLAWindows, lp_l1_rows

    w = spec.windows
    if not isinstance(w, HLAWindows):
        raise ValueError(f"HLASpec.windows must be a hot.hla.HLAWindows, got {type(w).__name__}")
    if length % w.tokens:
        raise ValueError(f"L = {length} is not a whole number of samples of T = {w.tokens} positions")
    rows = lp_l1_rows(spec.rank)  # validates rank
    bits = _check_bits(spec.bits)
    if spec.rounding not in ("nearest", "stochastic"):
        raise ValueError(f"rounding must be 'nearest' or 'stochastic', got {spec.rounding!r}")
    stochastic = spec.rounding == "stochastic"
    if stochastic and spec.key is None:
        raise ValueError("stochastic rounding needs a hash key")
    return [w.tokens, w.prefix, w.height, w.width, w.window_w], rows, bits, stochastic


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def _int8(codes: torch.Tensor) -> torch.Tensor:
    return codes if codes.dtype == torch.int8 else codes.to(torch.int8)


def _e4m3(codes: torch.Tensor, k_pad: int) -> torch.Tensor:
    """The FP8 GEMM's operand, K zero-padded to k_pad: as is when the quantiser already wrote it."""
    if codes.dtype == _E4M3 and codes.shape[1] == k_pad:
        return codes
    return _C.codes_to_e4m3(_int8(codes), k_pad)


def _reference_acc(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b of int8 codes, exact (float64 holds every int32 sum), as int32."""
    return (a.double() @ b.double()).to(torch.int32)


class KernelBackend:
    """The ``real`` backend. ``gemm`` picks the integer GEMMs (``auto``: by the device's architecture).

    ``fused_grad_output`` lets :meth:`quantize_grad_output` run the fused two-pass g_y kernel. It is off by
    default until that kernel has passed its GPU tests (``tests/kernels``); off, the two proven quantisers
    run, with the same results.
    """

    name = "real"
    codes_transposed = True

    def __init__(self, gemm: str = "auto", fused_grad_output: bool = False) -> None:
        if gemm not in GEMMS:
            raise ValueError(f"gemm must be one of {list(GEMMS)}, got {gemm!r}")
        self.gemm = gemm
        self.fused_grad_output = fused_grad_output

    def gemm_for(self, device: torch.device) -> str:
        """The GEMM family used on ``device``."""
        if self.gemm == "cutlass-sm90" and not _sm90_available(_device_index(device)):
            raise RuntimeError(
                f"gemm 'cutlass-sm90' is not available on {device}: it needs a compute capability 9.0 GPU "
                "and hot-kernels built with HOT_KERNELS_SM90A=1 (CUDA 12+)"
            )
        if self.gemm != "auto":
            return self.gemm
        major, _ = torch.cuda.get_device_capability(device)
        if major == 8:
            return "cutlass-int4"
        return "cublas" if major >= 9 else "reference"

    def _gx_gemm(self, device: torch.device) -> str:
        """The family of the g_x GEMM on ``device``: ``cutlass-sm90`` differs from ``cublas`` only in g_w."""
        gemm = self.gemm_for(device)
        return "cublas" if gemm == "cutlass-sm90" else gemm

    def _fp8_codes(self, device: torch.device, bits: int, *dims: int) -> bool:
        """Whether the quantisers write e4m3 codes: the FP8 GEMM reads 4-bit ones as they are (K, N % 16 == 0)."""
        return bits == 4 and self._gx_gemm(device) == "cublas" and all(d % 16 == 0 for d in dims)

    # --- g_x path -------------------------------------------------------------------------------

    def hq_quantize_grad_output(
        self, g_y: torch.Tensor, block: int, bits: int, granularity: str, key: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        g = _float_input(g_y, "g_y")
        _check_block(block, g.shape[1], "O (columns of g_y)")
        bits, key = _check_bits(bits), _check_key(key)
        if granularity == "per_channel":  # no config selects it for g_x; exact through the reference ops
            from hot.backends.reference import ReferenceBackend

            codes, scale = ReferenceBackend().hq_quantize_grad_output(g.cpu(), block, bits, granularity, key)
            return codes.to(g.device, torch.int8), scale.to(g.device)
        if granularity not in ("per_token", "per_tensor"):
            raise ValueError(f"granularity must be 'per_token' or 'per_tensor', got {granularity!r}")
        fp8 = self._fp8_codes(g.device, bits, g.shape[1])
        codes, scale = _C.hq_quantize_grad_output(g, block, bits, granularity == "per_token", key, fp8)
        return mark_4bit(codes) if bits == 4 else codes, scale

    def hq_quantize_weight(self, weight: torch.Tensor, block: int, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = _float_input(weight, "weight")
        _check_block(block, w.shape[0], "O (rows of the weight)")
        bits = _check_bits(bits)
        fp8 = self._fp8_codes(w.device, bits, *w.shape)
        codes_t, scale = _C.hq_quantize_weight(w, block, bits, fp8)
        return mark_4bit(codes_t.t()) if bits == 4 else codes_t.t(), scale

    def hq_matmul(
        self,
        a_codes: torch.Tensor,
        a_scale: torch.Tensor,
        b_codes: torch.Tensor,
        b_scale: torch.Tensor,
        block: int,
        out_dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        if out_dtype not in _FLOATS:
            raise ValueError(f"out_dtype must be float32, float16 or bfloat16, got {out_dtype}")
        a, b = _codes(a_codes, "a_codes", fp8=True), _codes(b_codes, "b_codes", fp8=True)
        narrow = _is_4bit(a) and _is_4bit(b)
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2:
            raise ValueError(f"a_codes {tuple(a.shape)} and b_codes {tuple(b.shape)} do not agree in O")
        if a.device != b.device:
            raise ValueError(f"a_codes on {a.device} and b_codes on {b.device}")
        _check_block(block, k, "O")
        row = _scale(a_scale, "a_scale", (m, 1))
        col = _scale(b_scale, "b_scale", (1,))
        a = _aligned(a)
        b_t = _aligned(b.t())  # (I, O): K contiguous; a no-op for hq_quantize_weight's codes
        gemm = self._gx_gemm(a.device)
        if not narrow and gemm in ("cublas", "cutlass-int4"):
            gemm = "cutlass"  # 8-bit codes: the INT8 sm80 GEMM is exact for any int8 (it also runs on sm_90)
        if gemm == "cublas" and n % 16 == 0 and m > 0:
            kp = _round_up(k, 16)
            # Row-wise scales fold the dequantisation into the GEMM's epilogue (no pass over the fp32
            # output): the reference's (acc · row) · (col / block) up to fp32 rounding of the scale
            # products (measured at most 1.9e-7 relative).
            col_block = col / torch.full((), float(block), device=col.device)
            return torch._scaled_mm(
                _e4m3(a, kp),
                _e4m3(b_t, kp).t(),
                scale_a=row.expand(m).reshape(m, 1).contiguous(),
                scale_b=col_block.expand(n).reshape(1, n).contiguous(),
                out_dtype=out_dtype,  # the epilogue rounds once to the output type: no float32 pass
                use_fast_accum=False,
            )
        if gemm == "cutlass-int4" and n % 4 == 0 and m > 0:
            kp = _round_up(k, 32)  # zero codes pad K to the INT4 GEMM's alignment (32 elements, 16 bytes)
            acc = _C.cutlass_gemm_s4(_C.pack_int4(_int8(a), kp), _C.pack_int4(_int8(b_t), kp))
        elif gemm == "cutlass" and n % 4 == 0 and m > 0:
            acc = _C.cutlass_gemm_s8(*self._pad_k(_int8(a), _int8(b_t), 16))
        else:
            acc = _reference_acc(a, b_t.t())
        return _C.dequantize(acc, row, col, float(block)).to(out_dtype)

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
        )

    def quantize_grad_output(
        self, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q(HT(g_y)) for g_x and Q(P g_y) for g_w from two passes over g_y (a statistics pass, then one
        that writes both code sets), bit-identical to the two quantisers; other options run those."""
        if not self.fuses_grad_output(g_y, hq, hla):
            return quantize_grad_output_separately(self, g_y, hq, hla)
        g = _float_input(g_y, "g_y")
        _check_block(hq.block, g.shape[1], "O (columns of g_y)")
        hq_bits, hq_key = _check_bits(hq.bits), _check_key(hq.key)
        windows, rows, hla_bits, stochastic = _hla_options(g.shape[0], hla)
        fp8 = self._fp8_codes(g.device, hq_bits, g.shape[1])
        codes, scale, g_codes_t, g_scale = _C.quantize_grad_output(
            g,
            windows,
            hq.block,
            hq_bits,
            hq.granularity == "per_token",
            hq_key,
            fp8,
            list(rows),
            hla_bits,
            hla.granularity == "per_channel",
            stochastic,
            _check_key(hla.key) if stochastic else 0,
        )
        codes = mark_4bit(codes) if hq_bits == 4 else codes
        g_scale = g_scale.reshape(1, -1) if hla.granularity == "per_channel" else g_scale
        return codes, scale, g_codes_t.t(), g_scale

    def grad_output_bytes(self, g_y: torch.Tensor, hq: HQSpec, hla: HLASpec) -> int:
        """Device-memory bytes :meth:`quantize_grad_output` reads and writes (its kernels, not the minimum)."""
        from hot.hla import projected_rows

        length, channels = g_y.shape
        proj_rows = projected_rows(length, hla.windows, hla.rank)
        codes = length * channels + proj_rows * channels + 4 * (length + channels)  # codes, scales
        reads = 2 if self.fuses_grad_output(g_y, hq, hla) else 3  # the unfused HLA path reads g_y twice too
        return reads * g_y.numel() * g_y.element_size() + codes

    # --- g_w path -------------------------------------------------------------------------------

    def hla_quantize(self, t: torch.Tensor, spec: HLASpec) -> tuple[torch.Tensor, torch.Tensor]:
        x = _float_input(t, "t")
        windows, rows, bits, stochastic = _hla_options(x.shape[0], spec)
        granularity = spec.granularity
        if spec.windows.block != 16 or granularity == "per_token":
            # Other blocks (the authors' blocking: the largest power of two dividing T) and per-token HLA
            # scales are not in the kernel: exact through the reference ops on the CPU.
            from hot.backends.reference import ReferenceBackend

            codes, scale = ReferenceBackend().hla_quantize(x.cpu(), spec)
            return codes.to(x.device, torch.int8), scale.to(x.device)
        if granularity not in ("per_tensor", "per_channel"):
            raise ValueError(f"granularity must be 'per_tensor' or 'per_channel', got {granularity!r}")
        per_channel = granularity == "per_channel"
        seed = _check_key(spec.key) if stochastic else 0
        codes_t, scale = _C.hla_quantize(x, windows, list(rows), bits, stochastic, per_channel, seed)
        return codes_t.t(), scale.reshape(1, -1) if per_channel else scale

    def hla_matmul(
        self, g_codes: torch.Tensor, g_scale: torch.Tensor, x_codes: torch.Tensor, x_scale: torch.Tensor, block: int
    ) -> torch.Tensor:
        g, x = _codes(g_codes, "g_codes"), _codes(x_codes, "x_codes")
        (r, o), (r2, i) = g.shape, x.shape
        if r != r2:
            raise ValueError(f"g_codes {tuple(g.shape)} and x_codes {tuple(x.shape)} do not agree in projected rows")
        if g.device != x.device:
            raise ValueError(f"g_codes on {g.device} and x_codes on {x.device}")
        if not isinstance(block, int) or block < 1:
            raise ValueError(f"HLA block must be a positive integer, got {block!r}")
        row = _scale(g_scale, "g_scale", (o, 1))
        col = _scale(x_scale, "x_scale", (i, 1))
        a = _aligned(g.t())  # (O, R): K contiguous; a no-op for hla_quantize's codes
        b_t = _aligned(x.t())  # (I, R)
        gemm = self.gemm_for(a.device)
        if gemm == "cutlass-sm90" and i % 4 == 0 and o > 0 and r > 0:
            acc = _C.cutlass_gemm_s8_sm90(*self._pad_k(a, b_t, 16))
        elif gemm == "cublas" and o > 16 and i % 8 == 0 and r > 0:
            a, b_t = self._pad_k(a, b_t, 8)
            acc = torch._int_mm(a, b_t.t())
        elif gemm in ("cutlass", "cutlass-int4") and i % 4 == 0 and o > 0 and r > 0:
            a, b_t = self._pad_k(a, b_t, 16)
            acc = _C.cutlass_gemm_s8(a, b_t)
        else:
            acc = _reference_acc(a, b_t.t())
        return _C.dequantize(acc, row, col, float(block))

    @staticmethod
    def _pad_k(a: torch.Tensor, b_t: torch.Tensor, multiple: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero codes appended along K add nothing to the product."""
        pad = (-a.shape[1]) % multiple
        if pad == 0:
            return a, b_t
        return torch.nn.functional.pad(a, (0, pad)), torch.nn.functional.pad(b_t, (0, pad))
