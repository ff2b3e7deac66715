import torch

from hot import rounding


def test_fmix32_matches_python_reference():
    values = [0, 1, 2, 0xDEADBEEF, 0xFFFFFFFF, 123456789]
    got = rounding.fmix32(torch.tensor(values, dtype=torch.int64)).tolist()
    assert got == [rounding.fmix32_int(v) for v in values]
    # MurmurHash3 fmix32 known answers
    assert rounding.fmix32_int(0) == 0
    assert rounding.fmix32_int(1) == 0x514E28B7


def test_cpu_fast_path_equals_the_int64_definition():
    key = rounding.hash_key(seed=9, layer=4, step=2, stream=1)
    index = torch.arange(5000, dtype=torch.int64)
    by_definition = (rounding.fmix32(rounding.fmix32(index) ^ key) >> 8).float() * 2.0**-24
    assert torch.equal(rounding.uniform((50, 100), key), by_definition.reshape(50, 100))


def test_uniform_is_deterministic_and_in_range():
    key = rounding.hash_key(seed=3, layer=1, step=7, stream=0)
    u1 = rounding.uniform((1000, 33), key)
    u2 = rounding.uniform((1000, 33), key)
    assert torch.equal(u1, u2)
    assert u1.dtype == torch.float32 and u1.min() >= 0 and u1.max() < 1
    # 24-bit grid: exact in float32
    assert torch.equal(u1 * 2**24, torch.floor(u1 * 2**24))


def test_uniform_statistics():
    u = rounding.uniform((200_000,), rounding.hash_key(0, 0, 0, 0)).double()
    n = u.numel()
    assert abs(u.mean().item() - 0.5) < 5 * (1 / 12 / n) ** 0.5
    assert abs(u.var().item() - 1 / 12) < 0.002
    hist = torch.histc(u, bins=16, min=0, max=1)
    expected = n / 16
    chi2 = ((hist - expected) ** 2 / expected).sum().item()
    assert chi2 < 50  # 15 degrees of freedom: p ~ 1e-5
    # neighbouring elements are uncorrelated
    corr = torch.corrcoef(torch.stack([u[:-1], u[1:]]))[0, 1].item()
    assert abs(corr) < 5 / n**0.5


def test_keys_differ_by_every_component():
    base = rounding.hash_key(1, 2, 3, 0)
    others = [
        rounding.hash_key(2, 2, 3, 0),
        rounding.hash_key(1, 3, 3, 0),
        rounding.hash_key(1, 2, 4, 0),
        rounding.hash_key(1, 2, 3, 1),
    ]
    assert len({base, *others}) == 5
    a = rounding.uniform((64,), base)
    for k in others:
        assert not torch.equal(a, rounding.uniform((64,), k))
