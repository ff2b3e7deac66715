"""The layout the real backend says its HLA codes have, which torch.compile traces with (no GPU needed: the ops are
a stand-in that cannot be called). The kernels' codes_t (C, R) lie in rows R rounded up to 16 bytes apart; the
pitch is plain arithmetic, so a batch size torch.compile keeps symbolic stays so; specs the kernels do not take
(the authors' blocking, per-token scales) are laid out as the reference's codes."""

from __future__ import annotations

import types

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from hot.backends import HLASpec, real
from hot.backends.reference import ReferenceBackend
from hot.hla import TokenGrid, hla_windows, projected_rows

GRID = TokenGrid(1, 14, 14)  # ViT's class token and 14 x 14 patches: 16 windows of 8 rows and 1 prefix row a sample


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> real.RealBackend:
    monkeypatch.setattr(real, "load_ops", lambda: types.SimpleNamespace())
    return real.RealBackend()


def _spec(blocking: str, granularity: str = "per_tensor") -> HLASpec:
    grid = GRID if blocking == "spatial" else None
    return HLASpec(hla_windows(GRID.tokens, blocking, grid), 8, 8, "nearest", granularity)


@pytest.mark.parametrize(("samples", "rows", "pitch"), [(1, 129, 144), (16, 2064, 2064), (3, 387, 400)])
def test_the_kernels_codes_lie_at_a_pitch_of_16_bytes(backend, samples: int, rows: int, pitch: int) -> None:
    x = torch.empty(samples * GRID.tokens, 96)
    codes = backend.hla_codes_like(x, _spec("spatial"))
    assert codes.shape == (rows, 96) and codes.stride() == (1, pitch) and codes.dtype == torch.int8
    assert real.hla_codes_pitch(rows) == pitch


@pytest.mark.parametrize(("blocking", "granularity"), [("official", "per_tensor"), ("spatial", "per_token")])
def test_specs_the_kernels_do_not_take_are_laid_out_as_the_references(backend, blocking, granularity) -> None:
    x, spec = torch.empty(3 * GRID.tokens, 96), _spec(blocking, granularity)
    codes = backend.hla_codes_like(x, spec)
    want = ReferenceBackend().hla_quantize(torch.randn(3 * GRID.tokens, 96), spec)[0]
    assert (codes.shape, codes.stride()) == (want.shape, want.stride())


def test_a_symbolic_batch_size_stays_symbolic(backend) -> None:
    """Traced with a symbolic batch (as torch.compile's fake tensors carry it) at 3 samples, the layout is right at 5:
    the pitch is traced arithmetic. A call that needs an integer (the extension's own hla_codes_pitch) would fix the
    traced batch, and torch.compile would recompile for every batch size."""
    spec = _spec("spatial")
    like = make_fx(lambda x: backend.hla_codes_like(x, spec), tracing_mode="symbolic")
    traced = like(torch.empty(3 * GRID.tokens, 64))
    codes = traced(torch.empty(5 * GRID.tokens, 64))
    rows = projected_rows(5 * GRID.tokens, spec.windows, spec.rank)
    assert (rows, real.hla_codes_pitch(rows)) == (645, 656)
    assert codes.shape == (rows, 64) and codes.stride() == (1, 656)
