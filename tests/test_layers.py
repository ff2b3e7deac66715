import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hot
from hot import HOTConfig
from hot.modules import HOTConv2d, HOTLinear


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def exact_grads(layer, x, g):
    x = x.detach().clone().requires_grad_(True)
    layer.zero_grad()
    layer(x).backward(g)
    return x.grad, layer.weight.grad.clone(), layer.bias.grad.clone()


def hot_grads(layer, config, x, g):
    converted = (
        HOTLinear.from_float(layer, config, 0)
        if isinstance(layer, nn.Linear)
        else HOTConv2d.from_float(layer, config, 0)
    )
    return exact_grads(converted, x, g)


def linear_case(tokens=64, in_f=96, out_f=128, batch=4):
    layer = nn.Linear(in_f, out_f)
    x = torch.randn(batch, tokens, in_f)
    g = torch.randn(batch, tokens, out_f)
    return layer, x, g


@pytest.mark.parametrize("config", [HOTConfig(), HOTConfig(abc=True), HOTConfig(method="luq")])
def test_forward_is_exact(config):
    layer, x, _ = linear_case()
    hot_layer = HOTLinear.from_float(layer, config, 0)
    assert torch.equal(hot_layer(x.requires_grad_()), layer(x))


def test_forward_is_exact_under_autocast_and_grads_keep_dtypes():
    layer, x, g = linear_case()
    hot_layer = HOTLinear.from_float(layer, HOTConfig(abc=True), 0)
    x = x.requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y_ref = layer(x)
        y = hot_layer(x)
    assert y.dtype == torch.bfloat16 and torch.equal(y, y_ref)
    y.backward(g.bfloat16())
    assert x.grad.dtype == torch.float32 and hot_layer.weight.grad.dtype == torch.float32


@pytest.mark.parametrize(
    "layer_factory",
    [
        lambda: nn.Conv2d(6, 32, 3, stride=2, padding=1),
        lambda: nn.Conv2d(6, 16, (3, 1), stride=1, padding=(2, 0), dilation=2),
        lambda: nn.Conv2d(6, 16, 1),
    ],
)
def test_fp_method_reproduces_autograd_for_conv(layer_factory):
    layer = layer_factory().double()
    x = torch.randn(2, 6, 11, 9, dtype=torch.float64)
    g = torch.randn_like(layer(x))
    ref = exact_grads(layer, x, g)
    got = hot_grads(layer, HOTConfig(method="fp"), x, g)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b)


def test_fp_method_reproduces_autograd_for_linear():
    layer, x, g = linear_case()
    ref = exact_grads(layer, x, g)
    got = hot_grads(layer, HOTConfig(method="fp"), x, g)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_hot_gradients_close_to_exact_and_error_scales_with_bits():
    layer, x, g = linear_case()
    gx, gw, gb = exact_grads(layer, x, g)
    gx4, _, gb4 = hot_grads(layer, HOTConfig(), x, g)
    gx8, _, _ = hot_grads(layer, HOTConfig(gx_bits=8), x, g)
    assert torch.equal(gb4, gb)  # bias gradient is exact
    e4, e8 = rel(gx4, gx), rel(gx8, gx)
    assert e4 < 0.35
    # 18x finer levels (7 -> 127): the error must shrink by far more than an order of magnitude
    assert e8 < e4 / 8
    # g_w: at rank 16 HLA is exact, leaving only INT8 error
    _, gw16, _ = hot_grads(layer, HOTConfig(hla_rank=16), x, g)
    assert rel(gw16, gw) < 0.03


def test_hot_gw_at_rank8_equals_fp_hla_up_to_int8_error():
    layer, x, g = linear_case()
    _, gw_hla, _ = hot_grads(layer, HOTConfig(method="hla_filter", keep_ratio=0.5), x, g)
    _, gw_hot, _ = hot_grads(layer, HOTConfig(), x, g)
    assert rel(gw_hot, gw_hla) < 0.03


def test_abc_changes_memory_not_math():
    layer, x, g = linear_case()
    plain = hot_grads(layer, HOTConfig(), x, g)
    abc = hot_grads(layer, HOTConfig(abc=True), x, g)
    for a, b in zip(plain, abc, strict=True):
        assert torch.equal(a, b)


def saved_bytes(module, x):
    """Bytes autograd saves for backward, parameters excluded."""
    params = {p.data_ptr() for p in module.parameters()}
    total = []

    def pack(t):
        if t.data_ptr() not in params:
            total.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x.requires_grad_())
    return sum(total)


def test_abc_stores_one_eighth_of_fp32_activations():
    layer, x, _ = linear_case(tokens=64)
    fp = saved_bytes(HOTLinear.from_float(layer, HOTConfig(), 0), x)
    abc = saved_bytes(HOTLinear.from_float(layer, HOTConfig(abc=True), 1), x)
    step = 8  # the forward's hash step (one int64), kept for its backward
    assert fp == x.numel() * 4 + step
    # r = 8 of 16 positions, one byte each, plus one float32 scale
    assert abc == x.numel() * 4 // 8 + 4 + step


def test_abc_in_a_model_shrinks_saved_bytes():
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    x = torch.randn(8, 32, 64)
    fp = saved_bytes(hot.convert(nn.Sequential(*[m for m in model]), HOTConfig()), x)
    model2 = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    abc = saved_bytes(hot.convert(model2, HOTConfig(abc=True)), x)
    assert abc < fp * 0.75


def test_frozen_weight_skips_gw_and_saves_no_input(monkeypatch):
    layer, x, g = linear_case()
    layer.weight.requires_grad_(False)
    hot_layer = HOTLinear.from_float(layer, HOTConfig(), 0)

    def forbidden(*args, **kwargs):
        raise AssertionError("g_w must not be computed for a frozen weight")

    monkeypatch.setattr(hot_layer.hot_method, "grad_weight", forbidden)
    monkeypatch.setattr(hot_layer.hot_method, "pack_input", forbidden)
    assert saved_bytes(hot_layer, x) == 8  # the (frozen) weight itself and the hash step: nothing of x
    xx = x.detach().clone().requires_grad_()
    hot_layer(xx).backward(g)
    assert xx.grad is not None and hot_layer.weight.grad is None and hot_layer.bias.grad is not None


def test_conv1x1_equals_linear_over_pixels():
    conv = nn.Conv2d(32, 48, 1)
    lin = nn.Linear(32, 48)
    lin.weight.data = conv.weight.data.reshape(48, 32).clone()
    lin.bias.data = conv.bias.data.clone()
    x = torch.randn(2, 32, 8, 8)
    g = torch.randn(2, 48, 8, 8)
    cfg = HOTConfig()
    gx_c, gw_c, gb_c = hot_grads(conv, cfg, x, g)
    # channels-last (B, H, W, C): the Linear's grid is its input's H×W, so HLA windows it as the conv
    x_tok = x.permute(0, 2, 3, 1)
    g_tok = g.permute(0, 2, 3, 1)
    gx_l, gw_l, gb_l = hot_grads(lin, cfg, x_tok, g_tok)
    torch.testing.assert_close(gx_c.permute(0, 2, 3, 1), gx_l)
    torch.testing.assert_close(gw_c.reshape(48, 32), gw_l)
    torch.testing.assert_close(gb_c, gb_l)
    # the same pixels as a (B, T, C) sequence with no known grid: 1×16 strips, a different estimate
    with pytest.warns(UserWarning, match="no token grid is known"):
        _, gw_seq, _ = hot_grads(lin, cfg, x_tok.reshape(2, 64, 32), g_tok.reshape(2, 64, 48))
    assert not torch.allclose(gw_seq, gw_l)
    _, gw_paper, _ = hot_grads(
        lin, cfg.replace(hla_blocking="paper"), x_tok.reshape(2, 64, 32), g_tok.reshape(2, 64, 48)
    )
    torch.testing.assert_close(gw_paper, gw_seq)


def test_hot_conv_gradients_close_to_exact():
    conv = nn.Conv2d(16, 64, 3, padding=1)
    x = torch.randn(4, 16, 12, 12)
    g = torch.randn(4, 64, 12, 12)
    gx, gw, _ = exact_grads(conv, x, g)
    gx_h, gw_h, _ = hot_grads(conv, HOTConfig(hla_rank=16), x, g)
    assert rel(gx_h, gx) < 0.35 and rel(gw_h, gw) < 0.03


def test_step_counter_changes_rounding_and_is_saved_in_state_dict():
    layer, x, g = linear_case()
    hot_layer = HOTLinear.from_float(layer, HOTConfig(), 0)
    grads = []
    for _ in range(2):
        xx = x.detach().clone().requires_grad_()
        hot_layer(xx).backward(g)
        grads.append(xx.grad)
    assert not torch.equal(grads[0], grads[1])
    assert hot_layer.state_dict()["_extra_state"][0].item() == 2
    with torch.no_grad():
        hot_layer(x)  # evaluation does not advance the counter
    assert hot_layer.hot_state.step == 2


def test_same_seed_same_gradients_across_fresh_layers():
    layer, x, g = linear_case()
    a = hot_grads(layer, HOTConfig(seed=4), x, g)
    b = hot_grads(layer, HOTConfig(seed=4), x, g)
    c = hot_grads(layer, HOTConfig(seed=5), x, g)
    assert all(torch.equal(p, q) for p, q in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_functional_linear_2d_input_uses_batch_as_sequence():
    layer = nn.Linear(16, 10)
    x = torch.randn(40, 16)
    g = torch.randn(40, 10)
    _, gw, _ = exact_grads(layer, x, g)
    _, gw16, _ = hot_grads(layer, HOTConfig(hla_rank=16, gw_bits=8), x, g)
    assert rel(gw16, gw) < 0.03
    assert F.linear(x, layer.weight).shape == (40, 10)


NON_FINITE_CONFIGS = {
    **{m: HOTConfig(method=m) for m in hot.METHODS},
    "hot_abc_lqs": HOTConfig(abc=True, lqs=True),
    "hot_per_tensor_per_channel": HOTConfig(gx_granularity="per_tensor", gw_granularity="per_channel"),
    "hot_int8_nearest": HOTConfig(gx_bits=8, gy_rounding="nearest"),
}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("config", NON_FINITE_CONFIGS.values(), ids=NON_FINITE_CONFIGS.keys())
@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_non_finite_grad_output_gives_non_finite_gradients(kind, config, value):
    """One NaN or infinity in g_y makes g_x and g_w non-finite: a quantiser's scale never masks it (the
    training loop's gradient check relies on it)."""
    if kind == "linear":
        layer, x, g = linear_case(tokens=16, in_f=32, out_f=48, batch=2)
    else:
        layer, x = nn.Conv2d(8, 16, 3, padding=1), torch.randn(2, 8, 4, 4)
        g = torch.randn(2, 16, 4, 4)
    g.view(-1)[5] = value
    gx, gw, _ = hot_grads(layer, config, x, g)
    assert not torch.isfinite(gx).all() and not torch.isfinite(gw).all()


def test_extra_state_round_trips_and_reads_the_earlier_dict_form():
    layer = HOTLinear.from_float(nn.Linear(4, 4), HOTConfig(lqs=True), 0)
    layer.hot_state.step, layer.hot_state.gx_granularity = 7, "per_tensor"
    state = layer.state_dict()
    assert state["_extra_state"].dtype == torch.int64
    fresh = HOTLinear.from_float(nn.Linear(4, 4), HOTConfig(lqs=True), 0)
    fresh.load_state_dict(state)
    assert (fresh.hot_state.step, fresh.hot_state.gx_granularity) == (7, "per_tensor")
    fresh.load_state_dict({**state, "_extra_state": {"step": 3, "gx_granularity": None}})
    assert (fresh.hot_state.step, fresh.hot_state.gx_granularity) == (3, None)
