import pytest
import torch

import hot.hla
from hot.hadamard import hadamard_matrix
from hot.hla import (
    HLAWindows,
    TokenGrid,
    hla_basis,
    hla_lowpass,
    hla_project,
    hla_project_matmul,
    hla_unproject,
    hla_windows,
    lp_l1_pairs,
    lp_l1_rows,
    official_block,
    projected_rows,
)

WALSH = torch.tensor([[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, -1, 1], [1, -1, 1, -1]], dtype=torch.float32)


def paper(tokens: int) -> HLAWindows:
    return hla_windows(tokens, "paper")


def spatial(prefix: int, height: int, width: int) -> HLAWindows:
    grid = TokenGrid(prefix, height, width)
    return hla_windows(grid.tokens, "spatial", grid)


def test_lp_l1_order_rank8():
    assert lp_l1_pairs()[:8] == ((0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (2, 0), (1, 2), (2, 1))


def test_basis_rows_are_kron_of_sequency_walsh_functions():
    p = hla_basis(16)
    for k, (i, j) in enumerate(lp_l1_pairs()):
        assert torch.equal(p[k], torch.kron(WALSH[i], WALSH[j]))
    assert sorted(lp_l1_rows(16)) == list(range(16))
    assert torch.equal(p @ p.t(), 16 * torch.eye(16))


def test_rank4_is_prefix_of_rank8():
    assert lp_l1_rows(8)[:4] == lp_l1_rows(4)


def test_paper_projection_equals_explicit_p_per_block():
    tokens, channels, rank = 32, 5, 8
    x = torch.randn(3 * tokens, channels, dtype=torch.float64)
    p = hla_basis(rank, torch.float64)
    blocks = x.reshape(3, tokens // 16, 16, channels)
    explicit = torch.einsum("rk,sbkc->sbrc", p, blocks).reshape(-1, channels)
    torch.testing.assert_close(hla_project(x, paper(tokens), rank), explicit)


def explicit_spatial(t: torch.Tensor, prefix: int, height: int, width: int, rank: int) -> torch.Tensor:
    """Each 4×4 window of the zero-padded grid, flattened row by row, times P; then the prefix rows times 4."""
    samples, channels = t.shape[0] // (prefix + height * width), t.shape[1]
    x = t.reshape(samples, -1, channels)
    grid = x[:, prefix:].reshape(samples, height, width, channels)
    padded = grid.new_zeros(samples, -(-height // 4) * 4, -(-width // 4) * 4, channels)
    padded[:, :height, :width] = grid
    p = hla_basis(rank, t.dtype)
    rows = []
    for s in range(samples):
        for a in range(padded.shape[1] // 4):
            for b in range(padded.shape[2] // 4):
                window = padded[s, 4 * a : 4 * a + 4, 4 * b : 4 * b + 4].reshape(16, channels)
                rows.append(p @ window)
    return torch.cat([torch.cat(rows), 4 * x[:, :prefix].reshape(-1, channels)])


@pytest.mark.parametrize(
    ("prefix", "height", "width", "rank"), [(1, 7, 7, 8), (0, 8, 8, 4), (2, 5, 9, 16), (1, 14, 14, 1)]
)
def test_spatial_projection_is_kron_basis_over_4x4_windows(prefix, height, width, rank):
    t = torch.randn(3 * (prefix + height * width), 6, dtype=torch.float64)
    windows = spatial(prefix, height, width)
    got = hla_project(t, windows, rank)
    torch.testing.assert_close(got, explicit_spatial(t, prefix, height, width, rank))
    assert got.shape[0] == projected_rows(t.shape[0], windows, rank)


def test_spatial_index_map_reads_every_grid_token_once():
    w = spatial(1, 7, 9)  # pads to 8×12: 2×3 windows
    assert w.windows == 6 and w.block == 16
    index = w.index_map
    inside = index[index >= 0]
    assert sorted(inside.tolist()) == list(range(1, 64))  # every grid token once, the class token never
    assert (index < 0).sum() == 6 * 16 - 63
    assert index[0].tolist()[:8] == [1, 2, 3, 4, 10, 11, 12, 13]  # window (0, 0): rows 0 and 1 of the grid


def _hla_gw(g, x, windows, rank):
    return hla_project(g, windows, rank).t() @ hla_project(x, windows, rank) / windows.block


@pytest.mark.parametrize("windows", [paper(197), spatial(1, 14, 14), spatial(2, 3, 5)], ids=str)
def test_rank16_is_exact_padding_and_prefix_included(windows):
    g = torch.randn(2 * windows.tokens, 7, dtype=torch.float64)
    x = torch.randn(2 * windows.tokens, 9, dtype=torch.float64)
    torch.testing.assert_close(_hla_gw(g, x, windows, 16), g.t() @ x)


def test_prefix_term_is_exact_at_every_rank():
    w = spatial(1, 6, 6)
    g = torch.randn(2 * w.tokens, 3, dtype=torch.float64)
    x = torch.randn(2 * w.tokens, 4, dtype=torch.float64)
    cls = torch.zeros(w.tokens, dtype=torch.bool)
    cls[0] = True
    cls = cls.repeat(2)
    only_grid = _hla_gw(g * ~cls[:, None], x, w, 2)
    # the prefix rows add exactly g_clsᵀ x_cls to whatever the windows give
    torch.testing.assert_close(_hla_gw(g, x, w, 2), only_grid + g[cls].t() @ x[cls])


def test_padding_is_exact_at_low_rank():
    # appending explicit zero rows to each sample gives the same g_w as implicit padding
    tokens = 20
    g = torch.randn(2 * tokens, 4, dtype=torch.float64)
    x = torch.randn(2 * tokens, 6, dtype=torch.float64)
    pad = lambda t: torch.cat([t.reshape(2, tokens, -1), t.new_zeros(2, 12, t.shape[1])], 1).reshape(-1, t.shape[1])  # noqa: E731
    torch.testing.assert_close(_hla_gw(g, x, paper(tokens), 8), _hla_gw(pad(g), pad(x), paper(32), 8))


def test_rank8_equals_projector_form():
    g = torch.randn(16, 4, dtype=torch.float64)
    x = torch.randn(16, 6, dtype=torch.float64)
    p = hla_basis(8, torch.float64)
    torch.testing.assert_close(_hla_gw(g, x, paper(16), 8), g.t() @ (p.t() @ p / 16) @ x)


def test_rank1_keeps_a_field_constant_on_windows_only_with_spatial_windows():
    # A feature map constant on each 4×4 window: rank 1 (the window mean) keeps it exactly on 2-D windows;
    # 1×16 strips of the same raster order mix rows of different windows and lose it.
    coarse = torch.randn(2, 2, 3, dtype=torch.float64)
    field = coarse.repeat_interleave(4, 0).repeat_interleave(4, 1).reshape(64, 3)
    torch.testing.assert_close(hla_lowpass(field, spatial(0, 8, 8), 1), field)
    assert not torch.allclose(hla_lowpass(field, paper(64), 1), field)


def test_lowpass_passes_prefix_tokens_through():
    w = spatial(1, 5, 5)
    t = torch.randn(3 * w.tokens, 2, dtype=torch.float64)
    out = hla_lowpass(t, w, 3).reshape(3, w.tokens, 2)
    torch.testing.assert_close(out[:, 0], t.reshape(3, w.tokens, 2)[:, 0])
    torch.testing.assert_close(hla_lowpass(t, w, 16), t)


def test_official_blocking_is_identity_for_vit_tokens():
    tokens = 197
    g = torch.randn(tokens, 4, dtype=torch.float64)
    x = torch.randn(tokens, 6, dtype=torch.float64)
    assert official_block(tokens) == 1
    torch.testing.assert_close(_hla_gw(g, x, hla_windows(tokens, "official"), 8), g.t() @ x)
    assert official_block(3136) == 64 and official_block(48) == 16


def test_official_blocking_keeps_lowest_sequency_rows():
    tokens = 64  # block 64, keeps round(8·64/16) = 32 lowest-sequency rows of H_64
    x = torch.randn(tokens, 3, dtype=torch.float64)
    h = hadamard_matrix(64, torch.float64)
    changes = (h[:, 1:] != h[:, :-1]).sum(1)
    kept = h[changes < 32]
    got = hla_project(x, hla_windows(tokens, "official"), 8)
    assert got.shape == (32, 3)
    torch.testing.assert_close(got, kept[changes[changes < 32].argsort()] @ x)


BLOCKINGS_UNDER_TEST = [paper(197), paper(20), spatial(1, 7, 7), spatial(2, 5, 9), hla_windows(64, "official")]


@pytest.mark.parametrize("windows", BLOCKINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("rank", [1, 4, 8, 16])
def test_projection_as_gemm_is_the_butterfly_projection(windows, rank):
    # integer-valued inputs: every sum of ±1 multiples is exact in float32, so the two orders agree bit for bit
    t = torch.randint(-50, 50, (3 * windows.tokens, 6), generator=torch.Generator().manual_seed(rank)).float()
    assert torch.equal(hla_project_matmul(t, windows, rank), hla_project(t, windows, rank))


@pytest.mark.parametrize("windows", BLOCKINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("rank", [1, 8, 16])
def test_unproject_is_the_transpose_scattered_back(windows, rank):
    t = torch.randn(2 * windows.tokens, 5, dtype=torch.float64)
    p = hla_project(t, windows, rank)
    q = torch.randn_like(p)
    # the adjoint of (project / block) on the grid, the inverse scale on prefix rows: <unproject(q), t> = <q, P t>/block
    back = hla_unproject(q, windows, rank)
    prefix_rows = 2 * windows.prefix
    grid_q, prefix_q = q[: q.shape[0] - prefix_rows], q[q.shape[0] - prefix_rows :]
    grid_p, prefix_p = p[: p.shape[0] - prefix_rows], p[p.shape[0] - prefix_rows :]
    expected = (grid_q * grid_p).sum() / windows.block + (prefix_q * prefix_p).sum() / 16
    torch.testing.assert_close((back * t).sum(), expected)
    if rank == 16:  # every row kept: project then unproject is the identity
        torch.testing.assert_close(hla_unproject(hla_project_matmul(t, windows, 16), windows, 16), t)


@pytest.mark.parametrize("windows", BLOCKINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("rank", [1, 8, 16])
def test_unproject_by_butterflies_is_the_gemm_unprojection(windows, rank, monkeypatch):
    # integer-valued rows: both orders add exactly, so they agree bit for bit; on random floats they differ in rounding
    q = torch.randint(-50, 50, (2 * windows.rows_per_sample(rank), 6), generator=torch.Generator().manual_seed(rank))
    q = q.float()
    assert torch.equal(hla_unproject(q, windows, rank, butterflies=True), hla_unproject(q, windows, rank))
    r = torch.randn(2 * windows.rows_per_sample(rank), 6, generator=torch.Generator().manual_seed(rank + 1))
    by_butterflies, by_gemm = hla_unproject(r, windows, rank, butterflies=True), hla_unproject(r, windows, rank)
    torch.testing.assert_close(by_butterflies, by_gemm)
    if rank > 1 and windows.block <= hot.hla.MATMUL_MAX_BLOCK:  # rank 1: one ±1 coefficient, exact both ways
        assert not torch.equal(by_butterflies, by_gemm)  # the flag chose the other order
    monkeypatch.setattr(hot.hla, "MATMUL_MAX_BLOCK", 0)  # every block by butterflies
    assert torch.equal(hla_unproject(r, windows, rank), by_butterflies)


def test_unproject_rejects_rows_that_are_not_whole_samples():
    with pytest.raises(ValueError, match=r"projected rows, got shape \(7, 3\)"):
        hla_unproject(torch.zeros(7, 3), paper(20), 8)


def test_spatial_without_grid_reads_strips():
    assert hla_windows(50, "spatial") == paper(50)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="whole number of samples"):
        hla_project(torch.zeros(10, 3), paper(4), 8)
    with pytest.raises(ValueError, match="rank"):
        lp_l1_rows(0)
    with pytest.raises(ValueError, match="hla_blocking must be one of"):
        hla_windows(16, "tiles")
    with pytest.raises(ValueError, match=r"token grid \(1 prefix \+ 7x7 grid = 50 tokens\) does not match T = 49"):
        hla_windows(49, "spatial", TokenGrid(1, 7, 7))
    with pytest.raises(ValueError, match="prefix"):
        TokenGrid(-1, 2, 2)


def test_projected_rows_count_windows_padding_and_prefix() -> None:
    assert projected_rows(128 * 197, paper(197), 8) == 128 * 13 * 8  # 197 positions pad to 13 blocks of 16
    assert projected_rows(64, paper(32), 8) == 32  # whole blocks: exactly L/2 at rank 8
    assert projected_rows(64, paper(32), 4) == 16
    assert projected_rows(2 * 24, hla_windows(24, "official"), 8) == 2 * 3 * 4  # official block 8
    # ViT-B/16: 14×14 patches pad to 16×16 = 16 windows, plus the class token's row
    assert projected_rows(128 * 197, spatial(1, 14, 14), 8) == 128 * (16 * 8 + 1)
    vit_b = spatial(1, 14, 14)
    assert vit_b.prefix + vit_b.windows * vit_b.block == 257  # positions read, padding included
