"""hot latency's LBP-WHT column: the batched-GEMM formulation computes the training code's estimate."""

import pytest
import torch

from hot.bench.latency import lbp_wht_backward
from hot.config import HOTConfig
from hot.hla import hla_windows
from hot.methods import LayerState, LBPWHTMethod


@pytest.mark.parametrize(("tokens", "samples", "rank"), [(197, 2, 8), (64, 3, 8), (50, 1, 4), (16, 4, 16)])
def test_lbp_wht_as_gemms_is_the_methods_estimate(tokens, samples, rank):
    g = torch.Generator().manual_seed(tokens)
    g_y = torch.randn(tokens * samples, 48, generator=g, dtype=torch.float32)
    x = torch.randn(tokens * samples, 32, generator=g, dtype=torch.float32)
    w = torch.randn(48, 32, generator=g, dtype=torch.float32)
    method = LBPWHTMethod(HOTConfig(method="lbp_wht", hla_blocking="paper", hla_rank=rank))
    windows = hla_windows(tokens, "paper")
    g_x, g_w = lbp_wht_backward(g_y, w, x, tokens, rank)()
    # the same sums in two orders: equal to fp32 rounding
    torch.testing.assert_close(g_x, method.grad_input(g_y, w, windows, LayerState(index=0), None), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(g_w, method.grad_weight(g_y, (x,), windows, None), rtol=1e-5, atol=1e-4)
    # rank 16 keeps every row: LBP-WHT is then the exact backward
    if rank == 16:
        torch.testing.assert_close(g_x, g_y @ w, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(g_w, g_y.t() @ x, rtol=1e-5, atol=1e-4)
