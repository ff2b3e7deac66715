"""One frozen dataclass holds every knob of HOT and of the baselines that share its harness."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .hadamard import is_power_of_two
from .hla import BLOCKINGS, HLA_BLOCK
from .quant import ROUNDINGS, SUPPORTED_BITS
from .rounding import HASHES, SPEC_HASH

METHODS = ("fp", "hot", "int4", "luq", "lbp_wht", "hla_filter", "grad_dropout")
# auto: the real backend for tensors on a CUDA device where the hot-kernels extension loads, else fake (per call).
BACKENDS = ("auto", "fake", "real")
# The real backend's integer GEMMs (docs/kernels.md): ``auto`` picks by the GPU's architecture.
GEMMS = ("auto", "cutlass", "cutlass-int4", "cublas", "cutlass-sm90", "reference")
GX_GRANULARITIES = ("per_token", "per_tensor")
GW_GRANULARITIES = ("per_tensor", "per_channel")
RECOMPUTE_INPUTS = ("none", "activations", "all")


@dataclass(frozen=True)
class HOTConfig:
    """How converted layers compute their backward pass. The forward pass is never changed.

    method: ``hot`` (HQ on g_x, HLA on g_w), or a baseline in the same harness: ``fp`` (exact),
        ``int4`` (plain per-tensor INT4, stochastic), ``luq``, ``lbp_wht``, and the follow-up's
        ``hla_filter`` (HLA on g_w in floating point) with its control ``grad_dropout``.
    gx_bits / gw_bits: integer widths of the g_x path (HQ, 4) and the g_w path (HLA, 8).
    hq_block: Hadamard block along O on the g_x path (the largest power of two dividing O, at most this).
    hla_rank: basis vectors kept of 16 on the g_w path (LP_L1 order).
    hla_blocking: where HLA's 16-position blocks sit along L (:mod:`hot.hla`): ``spatial`` (4×4 windows of
        the layer's H×W grid, prefix tokens exact; 1×16 strips where the grid is unknown), ``paper`` (16
        consecutive positions, samples zero-padded) or ``official`` (the authors' code: the largest power
        of two dividing T, which is 1 for ViT's T = 197).
    abc: activation buffer compression, the forward saves only Q8(P x).
    lqs / lqs_ratio: layer-wise choice of per-token or per-tensor scales for Q4(HT(g_y)); per-token wins
        when its error is below ``lqs_ratio`` times the per-tensor one.
    gx_granularity: the g_x scale used without LQS (and while LQS calibrates).
    gw_granularity: scales on the g_w path, ``per_tensor`` or ``per_channel`` (O for P g_y, I for P x).
    gy_rounding: rounding of g_y on both paths (``stochastic`` in the paper).
    rounding_hash: how each stochastic code of g_y draws its uniform number from the key and its index
        (:mod:`hot.rounding`): ``fmix32x2`` (the spec's two MurmurHash3 finalisers, the default) or ``fmix32``
        (one finaliser: fewer instructions a code in the kernels' g_y passes, which are bound by instruction
        issue; other numbers, so other training runs, measured beside the default). Method ``hot`` only.
    keep_ratio: kept fraction for ``hla_filter`` (rank = round(16·keep)) and ``grad_dropout``.
    seed: the stochastic-rounding hash seed (the same on every data-parallel rank: each rank draws its own
        numbers from it, :mod:`hot.rounding`).
    backend: ``auto`` (the default: ``real`` for each call whose tensors are on a CUDA device where the hot-kernels
        extension loads, else ``fake``; the layer records which ran in ``layer.hot_state.backend``), ``fake``
        (integers in float tensors, PyTorch ops, any device; the reference) or ``real`` (hot-kernels, method ``hot``).
        Baselines always run ``fake``.
    gemm: the ``real`` backend's integer GEMMs (:data:`GEMMS`; ``auto``: INT4 CUTLASS on sm_8x, FP8/INT8
        cuBLASLt on sm_90+, g_w on the sm_90a CUTLASS GEMM on compute capability 9.0 where the build has it);
        ``cutlass-sm90`` needs a build with the sm_90a GEMM (``HOT_KERNELS_SM90A``: by default where 9.0 is built
        with CUDA 12+).
    fused_grad_output: the ``real`` backend quantises g_y for both paths in one fused two-pass kernel (else the
        two quantisers run one after the other; the codes are the same).
    side_stream: in a CUDA graph (``torch.compile(mode="reduce-overhead")``, ``torch.cuda.graph``), the ``real``
        backend queues a backward's g_w chain on a second CUDA stream beside its g_x chain (the same kernels on
        the same inputs: the same bits); eager backwards, and all of them when off, run both on one stream.
    recompute_inputs: HOT layers whose input is made by a module that keeps its own input (or x itself) for its
        backward anyway keep that instead of x's codes, and their backward makes x and the codes again
        (:mod:`hot.recompute`): eagerly the same gradients bit for bit, for one more LayerNorm or activation a
        backward. ``none``; ``activations``: after an elementwise activation (timm MLPs' fc2), and where x is a
        fused attention's output (timm attention's proj, which keeps x itself: nothing is made again); ``all``:
        also after a LayerNorm (timm blocks' qkv and fc1). Set at :func:`hot.convert`, which pairs layers and
        sources.
    """

    method: str = "hot"
    gx_bits: int = 4
    gw_bits: int = 8
    hq_block: int = 16
    hla_rank: int = 8
    hla_blocking: str = "spatial"
    abc: bool = False
    lqs: bool = False
    lqs_ratio: float = 0.5
    gx_granularity: str = "per_token"
    gw_granularity: str = "per_tensor"
    gy_rounding: str = "stochastic"
    rounding_hash: str = SPEC_HASH
    keep_ratio: float = 0.5
    seed: int = 0
    backend: str = "auto"
    gemm: str = "auto"
    fused_grad_output: bool = False
    side_stream: bool = True
    recompute_inputs: str = "none"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # exact types: a string 'no' is no bool, 4.0 no bit width
            check_type(f.name, getattr(self, f.name), _FIELD_TYPES[f.type])
        check_one_of("method", self.method, METHODS)
        check_one_of("gx_bits", self.gx_bits, SUPPORTED_BITS)
        check_one_of("gw_bits", self.gw_bits, SUPPORTED_BITS)
        if not is_power_of_two(self.hq_block):
            raise ValueError(f"hq_block must be a power of two (1, 2, 4, …), got {self.hq_block!r}")
        if not 1 <= self.hla_rank <= HLA_BLOCK:
            raise ValueError(f"hla_rank must be an integer in 1..{HLA_BLOCK}, got {self.hla_rank!r}")
        check_one_of("hla_blocking", self.hla_blocking, BLOCKINGS)
        check_one_of("gx_granularity", self.gx_granularity, GX_GRANULARITIES)
        check_one_of("gw_granularity", self.gw_granularity, GW_GRANULARITIES)
        check_one_of("gy_rounding", self.gy_rounding, ROUNDINGS)
        check_one_of("rounding_hash", self.rounding_hash, HASHES)
        if self.rounding_hash != SPEC_HASH and self.method != "hot":
            raise ValueError(
                f"rounding_hash applies to method 'hot' only (baselines draw with the spec's hash), "
                f"got method={self.method!r}"
            )
        check_one_of("recompute_inputs", self.recompute_inputs, RECOMPUTE_INPUTS)
        check_one_of("backend", self.backend, BACKENDS)
        if not 0.0 < self.lqs_ratio < math.inf:
            raise ValueError(f"lqs_ratio must be a positive finite number, got {self.lqs_ratio!r}")
        if not 0.0 < self.keep_ratio <= 1.0:
            raise ValueError(f"keep_ratio must be in (0, 1], got {self.keep_ratio!r}")
        if self.abc and self.method != "hot":
            raise ValueError(
                f"abc applies to method 'hot' only (HLA codes are what it saves), got method={self.method!r}"
            )
        if self.lqs and self.method != "hot":
            raise ValueError(f"lqs applies to method 'hot' only, got method={self.method!r}")
        if self.backend == "real" and self.method != "hot":
            raise ValueError(
                f"backend 'real' runs method 'hot' only; baselines are fake-quant, got method={self.method!r}"
            )
        check_one_of("gemm", self.gemm, GEMMS)
        if self.backend == "fake" and (self.gemm != "auto" or self.fused_grad_output or not self.side_stream):
            raise ValueError(
                "gemm, fused_grad_output and side_stream are options of backend 'real' (or 'auto', where real runs), "
                f"got backend={self.backend!r} with gemm={self.gemm!r}, fused_grad_output={self.fused_grad_output!r}, "
                f"side_stream={self.side_stream!r}"
            )
        if self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> HOTConfig:
        """Build from a mapping (a config file section), rejecting unknown keys by name."""
        check_known_keys(cls, values)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> HOTConfig:
        return dataclasses.replace(self, **changes)


def check_known_keys(cls: type, values: Mapping[str, Any]) -> None:
    """Reject keys that are not fields of the dataclass ``cls``, naming them."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} key(s) {unknown}; known keys: {sorted(known)}")


# What each HOTConfig field's annotation (a string, with postponed annotations) admits: bool is no int here.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "bool": (bool,), "float": (float, int)}


def check_type(name: str, value: object, types: tuple[type, ...]) -> None:
    """``value`` must be an instance of ``types``, a bool only where ``bool`` is one of them."""
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        wanted = " or ".join(t.__name__ for t in types)
        raise ValueError(f"{name} must be of type {wanted}, got {value!r} ({type(value).__name__})")


def check_one_of(name: str, value: object, allowed: tuple) -> None:
    """``value`` must be one of ``allowed`` (and a bool only where the allowed values are bools)."""
    if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


# The methods of the paper's tables, by the names the experiment configs use.
PRESETS: dict[str, HOTConfig] = {
    "fp": HOTConfig(method="fp"),
    "hot": HOTConfig(),
    "hot_abc": HOTConfig(abc=True),
    "hot_abc_lqs": HOTConfig(abc=True, lqs=True),
    "int4": HOTConfig(method="int4"),
    "luq": HOTConfig(method="luq"),
    "lbp_wht": HOTConfig(method="lbp_wht"),
}


def preset(name: str, **changes: Any) -> HOTConfig:
    """A named method of the paper's tables, optionally with some fields changed."""
    if name not in PRESETS:
        raise ValueError(f"unknown method preset {name!r}; known: {sorted(PRESETS)}")
    return PRESETS[name].replace(**changes)
