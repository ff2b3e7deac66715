import pytest
import torch

from hot import rounding
from hot.quant import absmax_scale, fake_quantize, qmax, quantize, quantize_luq, sawb_scale


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_token", "per_channel"])
def test_codes_are_integers_within_levels(bits, granularity):
    t = torch.randn(64, 48) * 3
    scale = absmax_scale(t, bits, granularity)
    expected_shape = {"per_tensor": (), "per_token": (64, 1), "per_channel": (1, 48)}[granularity]
    assert scale.shape == expected_shape
    for mode in ("nearest", "stochastic"):
        q = quantize(t, scale, bits, mode, key=5)
        assert torch.equal(q, q.round())
        assert q.abs().max() <= qmax(bits)
    # round-to-nearest hits the extreme level exactly at the absmax
    assert quantize(t, scale, bits, "nearest").abs().max() == qmax(bits)


def test_zero_tensor_gets_unit_scale_and_zero_codes():
    t = torch.zeros(4, 5)
    t[1] = 2.0
    scale = absmax_scale(t, 4, "per_token")
    assert scale[0].item() == 1.0 and scale[1].item() == pytest.approx(2 / 7)
    assert torch.equal(quantize(t, scale, 4, "stochastic", key=1)[0], torch.zeros(5))


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_token", "per_channel"])
def test_non_finite_group_gets_a_non_finite_scale(granularity, value):
    t = torch.randn(4, 5)
    t[1, 2] = value
    scale = absmax_scale(t, 4, granularity).expand(4, 5)
    bad = {
        "per_tensor": torch.ones(4, 5),
        "per_token": t.isfinite().all(1, keepdim=True).logical_not().expand(4, 5),
        "per_channel": t.isfinite().all(0, keepdim=True).logical_not().expand(4, 5),
    }[granularity].bool()
    assert not scale[bad].isfinite().any() and scale[~bad].isfinite().all()


def test_stochastic_rounding_is_bit_identical_for_same_key_and_differs_otherwise():
    t = torch.randn(128, 64)
    s = absmax_scale(t, 4)
    a, b = quantize(t, s, 4, "stochastic", key=11), quantize(t, s, 4, "stochastic", key=11)
    assert torch.equal(a, b)
    assert not torch.equal(a, quantize(t, s, 4, "stochastic", key=12))


def test_stochastic_rounding_is_unbiased():
    t = torch.randn(4096) * 2
    scale = absmax_scale(t, 4)
    draws = 400
    mean = torch.zeros_like(t, dtype=torch.float64)
    for seed in range(draws):
        mean += quantize(t, scale, 4, "stochastic", rounding.hash_key(seed, 0, 0, 0)).double()
    mean /= draws
    v = (t / scale).double()
    frac = v - v.floor()
    # per element: Bernoulli(frac) mean; the average of the standardised errors must be ~N(0, 1/n)
    sd = (frac * (1 - frac) / draws).sqrt().clamp_min(1e-12)
    z = ((mean - v) / sd)[frac.gt(0.01) & frac.lt(0.99)]
    assert abs(z.mean().item()) < 5 / z.numel() ** 0.5
    assert z.std().item() == pytest.approx(1.0, abs=0.1)


def test_nearest_rounds_half_to_even():
    scale = torch.tensor(1.0)
    q = quantize(torch.tensor([0.5, 1.5, 2.5, -0.5, -3.5]), scale, 4, "nearest")
    assert q.tolist() == [0.0, 2.0, 2.0, -0.0, -4.0]


def test_sawb_scale_formula_and_fallback():
    w = torch.randn(256, 256)
    clip = 12.1 * w.square().mean().sqrt() - 12.2 * w.abs().mean()
    assert sawb_scale(w, 4).item() == pytest.approx(clip.item() / 7, rel=1e-6)
    # equal magnitudes: 12.1·rms − 12.2·mean|w| = −0.1·|w| < 0, so the clip falls back to max|w|
    signs = torch.randint(0, 2, (1000,)).float() * 2 - 1
    assert sawb_scale(0.3 * signs, 4).item() == pytest.approx(0.3 / 7)
    assert sawb_scale(w, 8).item() == pytest.approx(w.abs().max().item() / 127)


def test_luq_levels_and_unbiasedness():
    t = torch.randn(2048) * torch.logspace(-4, 0, 2048)
    alpha = t.abs().max()
    q = quantize_luq(t, 4, key=1)
    levels = {0.0} | {float(alpha * 2.0**-k) for k in range(7)}
    assert all(min(abs(abs(v) - lv) for lv in levels) < 1e-6 * alpha for v in q.tolist())
    mean = sum(quantize_luq(t, 4, rounding.hash_key(s, 0, 0, 0)).double() for s in range(300)) / 300
    rel = (mean - t.double()).norm() / t.double().norm()
    assert rel < 0.05


def test_fake_quantize_error_shrinks_with_bits():
    t = torch.randn(512, 64)
    e4 = (fake_quantize(t, 4) - t).norm() / t.norm()
    e8 = (fake_quantize(t, 8) - t).norm() / t.norm()
    assert e8 < e4 / 10


def test_bad_bits_raise():
    with pytest.raises(ValueError, match="bits"):
        qmax(3)
    with pytest.raises(ValueError, match="granularity"):
        absmax_scale(torch.ones(2, 2), 4, "per_row")
