import pytest
import torch
from torch import nn

from hot import HOTConfig
from hot.config import METHODS
from hot.hla import TokenGrid, hla_basis, hla_lowpass, hla_windows
from hot.methods import Keys, LayerState, create_method
from hot.modules import HOTLinear


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def case(tokens=32, batch=3, in_f=48, out_f=64):
    g = torch.randn(batch * tokens, out_f)
    x = torch.randn(batch * tokens, in_f)
    w = torch.randn(out_f, in_f)
    return g, x, w, hla_windows(tokens, "paper")


@pytest.mark.parametrize("method", METHODS)
def test_every_method_gives_finite_gradients_of_the_right_shape(method):
    g, x, w, windows = case()
    m = create_method(HOTConfig(method=method))
    keys = Keys(0, 0, 0)
    gx = m.grad_input(g, w, windows, LayerState(0), keys)
    gw = m.grad_weight(g, m.pack_input(x, windows, keys), windows, keys)
    assert gx.shape == (g.shape[0], w.shape[1]) and gw.shape == w.shape
    assert torch.isfinite(gx).all() and torch.isfinite(gw).all()
    # every method estimates the true gradient: positively aligned with it
    assert torch.nn.functional.cosine_similarity(gw.flatten(), (g.t() @ x).flatten(), dim=0) > 0.4
    assert torch.nn.functional.cosine_similarity(gx.flatten(), (g @ w).flatten(), dim=0) > 0.4


def test_lbp_wht_is_the_projection_along_tokens_on_both_gemms():
    g, x, w, windows = case(tokens=16, batch=1)
    m = create_method(HOTConfig(method="lbp_wht"))
    p = hla_basis(8)
    proj = p.t() @ p / 16
    keys = Keys(0, 0, 0)
    torch.testing.assert_close(m.grad_input(g, w, windows, LayerState(0), keys), proj @ g @ w, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m.grad_weight(g, (x,), windows, keys), g.t() @ proj @ x, rtol=1e-4, atol=1e-4)


def padded_projector(tokens: int, rank: int) -> torch.Tensor:
    """(T, T): 1×16 strips of a sample zero-padded to whole strips, each projected onto the kept rows and back."""
    strips = -(-tokens // 16)
    p = hla_basis(rank, torch.float64)
    full = torch.block_diag(*[p.t() @ p / 16] * strips)
    return full[:tokens, :tokens]


@pytest.mark.parametrize(("tokens", "samples", "rank"), [(197, 2, 8), (64, 3, 8), (50, 1, 4), (16, 4, 16)])
def test_lbp_wht_at_padded_lengths_is_the_dense_projector(tokens, samples, rank):
    g = torch.randn(tokens * samples, 48, dtype=torch.float64)
    x = torch.randn(tokens * samples, 32, dtype=torch.float64)
    w = torch.randn(48, 32, dtype=torch.float64)
    m = create_method(HOTConfig(method="lbp_wht", hla_blocking="paper", hla_rank=rank))
    proj = torch.block_diag(*[padded_projector(tokens, rank)] * samples)
    windows, keys = hla_windows(tokens, "paper"), Keys(0, 0, 0)
    torch.testing.assert_close(m.grad_input(g, w, windows, LayerState(0), keys), proj @ g @ w)
    torch.testing.assert_close(m.grad_weight(g, (x,), windows, keys), g.t() @ proj @ x)
    if rank == 16:  # every row kept: the exact backward
        torch.testing.assert_close(m.grad_input(g, w, windows, LayerState(0), keys), g @ w)


def test_lowpass_with_padding_and_full_rank():
    t = torch.randn(2 * 20, 5, dtype=torch.float64)
    torch.testing.assert_close(hla_lowpass(t, hla_windows(20, "paper"), 16), t)
    t32 = torch.randn(2 * 65, 5, dtype=torch.float64)
    windows = hla_windows(65, "spatial", TokenGrid(1, 8, 8))  # whole windows: a projector
    low = hla_lowpass(t32, windows, 8)
    torch.testing.assert_close(hla_lowpass(low, windows, 8), low)  # a projector: idempotent


@pytest.mark.parametrize("method", ["hla_filter", "grad_dropout"])
def test_keep_ratio_one_is_exact(method):
    g, x, _, windows = case()
    m = create_method(HOTConfig(method=method, keep_ratio=1.0))
    torch.testing.assert_close(m.grad_weight(g, (x,), windows, Keys(0, 0, 0)), g.t() @ x, rtol=1e-4, atol=1e-4)


def test_grad_dropout_is_unbiased_and_keeps_the_ratio():
    g, x, _, windows = case()
    m = create_method(HOTConfig(method="grad_dropout", keep_ratio=0.6))
    mean = sum(m.grad_weight(g, (x,), windows, Keys(0, 0, s)) for s in range(200)) / 200
    assert rel(mean, g.t() @ x) < 0.1
    single = m.grad_weight(g, (x,), windows, Keys(0, 0, 0))
    assert rel(single, g.t() @ x) > 0.3


def test_hot_error_is_lower_than_plain_int4_on_outlier_gradients():
    # one outlier channel in every block of 16: the Hadamard transform spreads each over its block
    layer = nn.Linear(64, 128)
    x = torch.randn(4, 32, 64)
    g = torch.randn(4, 32, 128)
    g[..., ::16] *= 20
    errors = {}
    for method in ("hot", "int4"):
        m = HOTLinear.from_float(layer, HOTConfig(method=method, gx_granularity="per_tensor"), 0)
        xx = x.clone().requires_grad_()
        m(xx).backward(g)
        errors[method] = rel(xx.grad, g @ layer.weight.detach())
    assert errors["hot"] < errors["int4"] / 2


def test_backend_options_are_config_fields_and_layers_of_equal_options_share_a_backend():
    from hot.backends.reference import ReferenceBackend

    cpu = torch.device("cpu")
    a, b = create_method(HOTConfig(backend="fake")), create_method(HOTConfig(backend="fake", abc=True))
    assert isinstance(a.backend_for(cpu), ReferenceBackend) and a.backend_for(cpu) is b.backend_for(cpu)
    with pytest.raises(ValueError, match="gemm, fused_grad_output and side_stream are options of backend 'real'"):
        HOTConfig(backend="fake", gemm="cublas")
    with pytest.raises(ValueError, match="side_stream=False"):
        HOTConfig(backend="fake", side_stream=False)
    # auto takes the real backend's options: they apply where it runs real
    assert HOTConfig(gemm="cublas", fused_grad_output=True).backend == "auto"
    with pytest.raises(ValueError, match="gemm must be one of"):
        HOTConfig(backend="real", gemm="cublass")
    with pytest.raises(ValueError, match="fused_grad_output must be of type bool"):
        HOTConfig(backend="real", fused_grad_output="yes")


def test_real_backend_without_the_extension_says_how_to_build_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "hot_kernels", None)  # an import of it fails, as where it is not built
    with pytest.raises(RuntimeError, match=r"pip install --no-build-isolation \./kernels"):
        create_method(HOTConfig(backend="real", gemm="cutlass", fused_grad_output=True))


def test_specs_reject_bad_fields_by_name():
    from hot.backends import HLASpec, HQSpec
    from hot.hla import hla_windows

    windows = hla_windows(16, "paper")
    with pytest.raises(ValueError, match=r"HQSpec\.block must be a power of two, got 12"):
        HQSpec(12, 4)
    with pytest.raises(ValueError, match=r"HQSpec.bits must be one of \[4, 8\], got 3"):
        HQSpec(16, 3)
    with pytest.raises(ValueError, match="hash key must be an integer in"):
        HQSpec(16, 4, "per_token", -1)
    with pytest.raises(ValueError, match=r"HLASpec\.rank must be an integer in 1\.\.16, got 17"):
        HLASpec(windows, 17, 8, "nearest", "per_tensor")
    with pytest.raises(ValueError, match=r"HLASpec\.key is needed for stochastic rounding"):
        HLASpec(windows, 8, 8, "stochastic", "per_tensor")
    with pytest.raises(ValueError, match=r"HLASpec\.windows must be a hot\.hla\.HLAWindows, got int"):
        HLASpec(16, 8, 8, "nearest", "per_tensor")


def test_layer_specs_are_what_the_hot_layer_quantises_with():
    from hot.backends import HLASpec
    from hot.hla import hla_windows
    from hot.methods import Keys, layer_specs
    from hot.rounding import Stream

    config, keys = HOTConfig(hq_block=8, gw_granularity="per_channel", seed=3), Keys(3, 1, 2)
    windows = hla_windows(16, "paper")
    specs = layer_specs(config, 24, windows, keys, "per_tensor")
    assert (specs.grad_output.block, specs.grad_output.granularity) == (8, "per_tensor")  # 24 = 8 · 3
    assert specs.grad_output.key == keys(Stream.GX_GRAD_OUTPUT)
    assert specs.grad_output_hla == HLASpec(windows, 8, 8, "stochastic", "per_channel", keys(Stream.GW_GRAD_OUTPUT))
    assert specs.input_hla == HLASpec(windows, 8, 8, "nearest", "per_channel")
    assert layer_specs(config, 24, windows, keys).grad_output.granularity == "per_token"


def test_auto_backend_is_real_on_cuda_where_the_kernels_load_else_fake(monkeypatch):
    """``auto`` (the default) resolves per call from the tensors' device; the layer records which ran."""
    import hot.backends as backends
    from hot.backends.reference import ReferenceBackend

    assert HOTConfig().backend == "auto"
    method = create_method(HOTConfig(fused_grad_output=True))
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert isinstance(method.backend_for(cpu), ReferenceBackend)
    monkeypatch.setattr(backends, "real_available", lambda: False)
    assert isinstance(method.backend_for(cuda), ReferenceBackend)
    sentinel = object()
    monkeypatch.setattr(backends, "real_available", lambda: True)
    monkeypatch.setattr(backends, "_backend", lambda name, gemm, fused, side=True: (name, gemm, fused, side, sentinel))
    assert method.backend_for(cuda) == ("real", "auto", True, True, sentinel)
    assert method.backend_for(cpu)[0] == "fake"  # CPU tensors never take the kernels
    monkeypatch.undo()
    layer = HOTLinear.from_float(nn.Linear(16, 16), HOTConfig(), 0)
    assert layer.hot_state.backend is None
    layer(torch.randn(2, 16, 16, requires_grad=True)).sum().backward()
    assert layer.hot_state.backend == "fake"
    baseline = HOTLinear.from_float(nn.Linear(16, 16), HOTConfig(method="int4"), 0)
    baseline(torch.randn(2, 16, 16, requires_grad=True)).sum().backward()
    assert baseline.hot_state.backend == "fake"


def test_lbp_wht_backward_projects_g_y_once_and_gives_both_gradients(monkeypatch):
    import hot.methods as methods_module

    g, x, w, windows = case(tokens=20, batch=3)
    m = create_method(HOTConfig(method="lbp_wht", hla_blocking="paper"))
    keys = Keys(0, 0, 0)
    expected = (m.grad_input(g, w, windows, LayerState(0), keys), m.grad_weight(g, (x,), windows, keys))
    projected = []
    project = methods_module.hla_project_matmul
    monkeypatch.setattr(methods_module, "hla_project_matmul", lambda t, *a: projected.append(t.shape) or project(t, *a))
    g_x, g_w, g_b = m.backward_gemms(g, w, (x,), windows, LayerState(0), keys)
    assert projected == [g.shape, x.shape]  # g_y once, shared by both GEMMs; x once
    assert torch.equal(g_x, expected[0]) and torch.equal(g_w, expected[1]) and g_b is None


def test_the_rounding_hash_draws_other_dither_around_the_same_estimate():
    """``rounding_hash`` reaches both g_y quantisers: one step's g_x and g_w differ between the hashes (other numbers),
    while their means over 64 steps (each step new dither, scales and W's codes fixed) agree as two unbiased
    estimates of one value do, about 1/8 of one step's difference apart."""
    from hot.methods import layer_specs

    g, x, w, windows = case()
    specs = layer_specs(HOTConfig(rounding_hash="fmix32"), w.shape[0], windows, Keys(0, 0, 0))
    assert specs.grad_output.hash == specs.grad_output_hla.hash == "fmix32"
    runs = {}
    for hash in ("fmix32x2", "fmix32"):
        m = create_method(HOTConfig(rounding_hash=hash))
        steps = [Keys(0, 0, step) for step in range(64)]
        gx = torch.stack([m.grad_input(g, w, windows, LayerState(0), keys) for keys in steps])
        gw = torch.stack([m.grad_weight(g, m.pack_input(x, windows, keys), windows, keys) for keys in steps])
        runs[hash] = gx, gw
    for a, b in zip(runs["fmix32x2"], runs["fmix32"], strict=True):
        assert not torch.equal(a[0], b[0])
        assert rel(a.mean(0), b.mean(0)) < 0.25 * rel(a[0], b[0])
