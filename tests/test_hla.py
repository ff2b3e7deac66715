import pytest
import torch

from hot.hadamard import hadamard_matrix
from hot.hla import hla_basis, hla_project, lp_l1_pairs, lp_l1_rows, official_block, projected_rows

WALSH = torch.tensor([[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, -1, 1], [1, -1, 1, -1]], dtype=torch.float32)


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


def test_projection_equals_explicit_p_per_block():
    tokens, channels, rank = 32, 5, 8
    x = torch.randn(3 * tokens, channels, dtype=torch.float64)
    p = hla_basis(rank, torch.float64)
    blocks = x.reshape(3, tokens // 16, 16, channels)
    explicit = torch.einsum("rk,sbkc->sbrc", p, blocks).reshape(-1, channels)
    torch.testing.assert_close(hla_project(x, tokens, rank), explicit)


def _hla_gw(g, x, tokens, rank, blocking="paper"):
    block = 16 if blocking == "paper" else official_block(tokens)
    return hla_project(g, tokens, rank, blocking).t() @ hla_project(x, tokens, rank, blocking) / block


def test_rank16_is_exact_and_padding_changes_nothing():
    tokens = 197  # ViT-B: not a multiple of 16, padded to 208 per sample
    g = torch.randn(2 * tokens, 7, dtype=torch.float64)
    x = torch.randn(2 * tokens, 9, dtype=torch.float64)
    torch.testing.assert_close(_hla_gw(g, x, tokens, 16), g.t() @ x)


def test_padding_is_exact_at_low_rank():
    # appending explicit zero rows to each sample gives the same g_w as implicit padding
    tokens = 20
    g = torch.randn(2 * tokens, 4, dtype=torch.float64)
    x = torch.randn(2 * tokens, 6, dtype=torch.float64)
    pad = lambda t: torch.cat([t.reshape(2, tokens, -1), t.new_zeros(2, 12, t.shape[1])], 1).reshape(-1, t.shape[1])  # noqa: E731
    torch.testing.assert_close(_hla_gw(g, x, tokens, 8), _hla_gw(pad(g), pad(x), 32, 8))


def test_rank8_equals_projector_form():
    tokens = 16
    g = torch.randn(tokens, 4, dtype=torch.float64)
    x = torch.randn(tokens, 6, dtype=torch.float64)
    p = hla_basis(8, torch.float64)
    torch.testing.assert_close(_hla_gw(g, x, tokens, 8), g.t() @ (p.t() @ p / 16) @ x)


def test_official_blocking_is_identity_for_vit_tokens():
    tokens = 197
    g = torch.randn(tokens, 4, dtype=torch.float64)
    x = torch.randn(tokens, 6, dtype=torch.float64)
    assert official_block(tokens) == 1
    torch.testing.assert_close(_hla_gw(g, x, tokens, 8, "official"), g.t() @ x)
    assert official_block(3136) == 64 and official_block(48) == 16


def test_official_blocking_keeps_lowest_sequency_rows():
    tokens = 64  # block 64, keeps round(8·64/16) = 32 lowest-sequency rows of H_64
    x = torch.randn(tokens, 3, dtype=torch.float64)
    h = hadamard_matrix(64, torch.float64)
    changes = (h[:, 1:] != h[:, :-1]).sum(1)
    kept = h[changes < 32]
    got = hla_project(x, tokens, 8, "official")
    assert got.shape == (32, 3)
    torch.testing.assert_close(got, kept[changes[changes < 32].argsort()] @ x)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="whole number of samples"):
        hla_project(torch.zeros(10, 3), 4, 8)
    with pytest.raises(ValueError, match="rank"):
        lp_l1_rows(0)


def test_projected_rows_are_blocks_times_rank_per_sample() -> None:
    assert projected_rows(128 * 197, 197, 8) == 128 * 13 * 8  # 197 positions pad to 13 blocks of 16
    assert projected_rows(64, 32, 8) == 32  # whole blocks: exactly L/2 at rank 8
    assert projected_rows(64, 32, 4) == 16
    assert projected_rows(2 * 24, 24, 8, "official") == 2 * 3 * 4  # official block 8: rank round(8·8/16)
