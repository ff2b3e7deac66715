import pytest
import torch

from hot.hadamard import block_hadamard, hadamard_matrix, largest_block


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64])
def test_sylvester_matrix_is_orthogonal_up_to_n(n):
    h = hadamard_matrix(n, torch.float64)
    assert torch.equal(h @ h.t(), n * torch.eye(n, dtype=torch.float64))
    assert set(h.unique().tolist()) <= {-1.0, 1.0}


@pytest.mark.parametrize("n", [2, 4, 16, 32])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_butterfly_equals_dense_block_diagonal_product(n, dim):
    x = torch.randn(64, 32, 96, dtype=torch.float64)
    h = hadamard_matrix(n, torch.float64)
    moved = x.movedim(dim, -1)
    dense = (moved.reshape(*moved.shape[:-1], -1, n) @ h).reshape(moved.shape).movedim(-1, dim)
    torch.testing.assert_close(block_hadamard(x, n, dim), dense, rtol=1e-12, atol=1e-12)


def test_transform_twice_is_n_times_identity():
    x = torch.randn(10, 48, dtype=torch.float64)
    torch.testing.assert_close(block_hadamard(block_hadamard(x, 16), 16), 16 * x)


def test_largest_block():
    assert largest_block(768, 16) == 16
    assert largest_block(100, 16) == 4
    assert largest_block(7, 16) == 1
    assert largest_block(2304, 8) == 8


def test_bad_sizes_raise():
    with pytest.raises(ValueError, match="power of two"):
        block_hadamard(torch.zeros(4, 12), 12)
    with pytest.raises(ValueError, match="not a multiple"):
        block_hadamard(torch.zeros(4, 12), 8)
