import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from torch import nn

import hot
from hot import rounding
from hot.methods import Keys
from hot.rounding import Stream


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
    one_finaliser = (rounding.fmix32(index ^ key) >> 8).float() * 2.0**-24
    assert torch.equal(rounding.uniform((50, 100), key, hash="fmix32"), one_finaliser.reshape(50, 100))


@pytest.mark.parametrize("hash", rounding.HASHES)
def test_uniform_at_is_uniform_element_by_element_mod_2_32(hash: str):
    key = rounding.hash_key(seed=3, layer=1, step=7, stream=0)
    whole = rounding.uniform((4096,), key, hash=hash)
    picked = torch.tensor([0, 1, 17, 4095, 2048])
    assert torch.equal(rounding.uniform_at(picked.numpy(), key, hash), whole[picked])
    assert torch.equal(rounding.uniform_at(picked.numpy() + 2**32, key, hash), whole[picked])  # the low 32 bits
    far = torch.tensor([2**32 - 1, 2**31 + 5], dtype=torch.int64)
    mixed = rounding.fmix32(far) if hash == rounding.SPEC_HASH else far
    by_definition = (rounding.fmix32(mixed ^ key) >> 8).float() * 2.0**-24
    assert torch.equal(rounding.uniform_at(far.numpy(), key, hash), by_definition)


def test_the_hashes_are_named_and_draw_other_numbers():
    assert [rounding.hash_rounds(h) for h in rounding.HASHES] == [2, 1]
    with pytest.raises(ValueError, match="rounding_hash must be one of"):
        rounding.uniform((4,), 1, hash="philox")
    key = rounding.hash_key(1, 2, 3, 0)
    spec, single = rounding.uniform((10_000,), key), rounding.uniform((10_000,), key, hash="fmix32")
    assert (spec == single).float().mean() < 0.01
    assert abs(torch.corrcoef(torch.stack([spec, single]))[0, 1].item()) < 0.05


def test_uniform_on_cuda_takes_the_kernel_where_the_extension_makes_it(monkeypatch):
    import hot.backends

    asked = []

    def made_by_kernel(numel, key, device, hash):
        asked.append((numel, key, device, hash))
        return torch.arange(numel, dtype=torch.float32)

    monkeypatch.setattr(hot.backends, "device_uniform", made_by_kernel)
    u = rounding.uniform((2, 3), 77, "cuda")
    assert rounding.uniform((2, 3), 77, "cuda", hash="fmix32").shape == (2, 3)
    assert asked == [(6, 77, torch.device("cuda"), "fmix32x2"), (6, 77, torch.device("cuda"), "fmix32")]
    assert torch.equal(u, torch.arange(6, dtype=torch.float32).reshape(2, 3))


def test_device_uniform_leaves_cpu_and_a_missing_extension_to_the_caller(monkeypatch):
    import hot.backends
    import hot.backends.real

    assert hot.backends.device_uniform(8, 1, torch.device("cpu")) is None
    # an extension built before the kernel existed: the torch ops compute the numbers
    monkeypatch.setattr(hot.backends, "real_available", lambda: True)
    monkeypatch.setattr(hot.backends.real, "hash_uniform_built", lambda: False)
    assert hot.backends.device_uniform(8, 1, torch.device("cuda")) is None
    monkeypatch.setattr(hot.backends, "real_available", lambda: False)
    assert hot.backends.device_uniform(8, 1, torch.device("cuda")) is None


def test_uniform_is_deterministic_and_in_range():
    key = rounding.hash_key(seed=3, layer=1, step=7, stream=0)
    u1 = rounding.uniform((1000, 33), key)
    u2 = rounding.uniform((1000, 33), key)
    assert torch.equal(u1, u2)
    assert u1.dtype == torch.float32 and u1.min() >= 0 and u1.max() < 1
    # 24-bit grid: exact in float32
    assert torch.equal(u1 * 2**24, torch.floor(u1 * 2**24))


@pytest.mark.parametrize("hash", rounding.HASHES)
def test_uniform_statistics(hash: str):
    u = rounding.uniform((200_000,), rounding.hash_key(0, 0, 0, 0), hash=hash).double()
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


@pytest.mark.parametrize("hash", rounding.HASHES)
def test_an_element_draws_independent_numbers_step_after_step(hash: str):
    """Stochastic rounding is unbiased only if each step's dither is new: over 64 steps of one layer and stream, the
    numbers of each of 4096 elements have the uniform's mean and variance, and consecutive steps are uncorrelated,
    as are neighbouring elements within a step."""
    steps = torch.stack(
        [rounding.uniform((4096,), rounding.hash_key(5, 3, step, 0), hash=hash).double() for step in range(64)]
    )
    n = steps.numel()
    assert abs(steps.mean().item() - 0.5) < 5 * (1 / 12 / n) ** 0.5
    assert abs(steps.var().item() - 1 / 12) < 0.002
    across_steps = torch.corrcoef(torch.stack([steps[:-1].reshape(-1), steps[1:].reshape(-1)]))[0, 1].item()
    within = torch.corrcoef(torch.stack([steps[:, :-1].reshape(-1), steps[:, 1:].reshape(-1)]))[0, 1].item()
    assert abs(across_steps) < 5 / n**0.5 and abs(within) < 5 / n**0.5
    # a stochastically rounded value averages to itself over the steps, element by element
    v = torch.linspace(-3.7, 3.7, 4096, dtype=torch.float64)
    mean_code = torch.floor(v + steps).mean(0)
    assert (mean_code - v).abs().max() < 6 * (0.25 / 64) ** 0.5
    assert abs((mean_code - v).mean().item()) < 5 * (0.25 / n) ** 0.5


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


def _key_without_rank(seed: int, layer: int, step: int, stream: int) -> int:
    """The key as the chain of (seed, layer, step, stream) alone, written out."""
    f = rounding.fmix32_int
    return f(f(f(f(seed) ^ layer) ^ step) ^ stream)


def test_rank_zero_keys_are_the_keys_of_seed_layer_step_stream():
    for seed, layer, step, stream in [(0, 0, 0, 0), (1, 2, 3, 1), (7, 31, 123456, 4), (2**31, 5, 2**32 - 1, 2)]:
        expected = _key_without_rank(seed, layer, step, stream)
        assert rounding.hash_key(seed, layer, step, stream) == expected
        assert rounding.hash_key(seed, layer, step, stream, rank=0) == expected
        assert Keys(seed, layer, step)(Stream(stream)) == expected
        assert Keys(seed, layer, step, rank=0)(Stream(stream)) == expected


def test_a_nonzero_rank_adds_one_round_and_gives_every_rank_its_own_key():
    keys = {rounding.hash_key(1, 2, 3, 0, rank=r) for r in range(64)}
    assert len(keys) == 64
    for rank in (1, 2, 1023):
        assert rounding.hash_key(1, 2, 3, 0, rank) == rounding.fmix32_int(_key_without_rank(1, 2, 3, 0) ^ rank)
        assert Keys(1, 2, 3, rank)(Stream.GX_GRAD_OUTPUT) == rounding.hash_key(1, 2, 3, 0, rank)


def test_a_step_held_in_a_tensor_gives_the_integer_key():
    """A layer's step as its forward saved it (a 1-element int64 tensor; a CPU one for reference code): the key is
    the integer key of that step, and a StepKey (what the real backend gets for a GPU step) reads its step where it
    is used, not when it was made."""
    step = torch.tensor([2**32 + 9], dtype=torch.int64)
    keys = Keys(7, 3, step, rank=2)
    expected = rounding.hash_key(7, 3, 2**32 + 9, Stream.GW_GRAD_OUTPUT, 2)
    assert keys.spec_key(Stream.GW_GRAD_OUTPUT) == keys(Stream.GW_GRAD_OUTPUT) == expected
    step_key = rounding.StepKey(step, 7 + 2**32, 3, int(Stream.GW_GRAD_OUTPUT), 2)
    assert step_key.parts() == [7, 3, int(Stream.GW_GRAD_OUTPUT), 2]
    assert step_key.value() == rounding.key_value(step_key) == expected
    step.add_(1)
    assert step_key.value() == rounding.hash_key(7, 3, 2**32 + 10, Stream.GW_GRAD_OUTPUT, 2)
    assert torch.equal(rounding.uniform((50,), step_key), rounding.uniform((50,), step_key.value()))
    assert Keys(7, 3, 5).spec_key(Stream.GX_GRAD_OUTPUT) == rounding.hash_key(7, 3, 5, Stream.GX_GRAD_OUTPUT)


def test_layer_state_advances_its_step_counter():
    from hot.methods import LayerState

    state = LayerState(index=0)
    state.step = 4  # a checkpoint's step, before the layer ever ran
    taken = [state.advance(torch.device("cpu")) for _ in range(3)]
    assert [t.item() for t in taken] == [4, 5, 6] and state.step == 7
    state.step = 2  # in place once the counter exists
    assert state.advance(torch.device("cpu")).item() == 2 and state.step == 3


@pytest.fixture
def rank_override():
    yield rounding.set_rounding_rank
    rounding.set_rounding_rank(None)


def test_rounding_rank_is_zero_without_a_process_group_unless_set(rank_override):
    assert not dist.is_initialized() and rounding.rounding_rank() == 0
    rank_override(3)
    assert rounding.rounding_rank() == 3
    rank_override(None)
    assert rounding.rounding_rank() == 0
    for bad in (-1, 1.0, True, "1"):
        with pytest.raises(ValueError, match="rounding rank must be None or a non-negative integer"):
            rank_override(bad)


def _layer_backward(x: torch.Tensor, g_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    layer = hot.convert(nn.Linear(64, 32), hot.HOTConfig(backend="fake", hla_blocking="paper"))
    x = x.clone().requires_grad_()
    layer(x).backward(g_y)
    return x.grad, layer.weight.grad


def test_a_layer_draws_the_rank_it_is_given(rank_override):
    x, g_y = torch.randn(4, 16, 64), torch.randn(4, 16, 32)
    default = _layer_backward(x, g_y)
    rank_override(0)
    assert all(torch.equal(a, b) for a, b in zip(_layer_backward(x, g_y), default, strict=True))
    rank_override(1)
    other = _layer_backward(x, g_y)
    assert not any(torch.equal(a, b) for a, b in zip(other, default, strict=True))


# One HOT layer's backward on the same weight, input and gradient in every process; the reference backend's codes of
# g_y for both paths are kept. Under torchrun it joins a gloo group, else it is a single process (rank 0).
_RANK_WORKER = """
import os, sys
import torch, torch.distributed as dist
from torch import nn
import hot
from hot.backends.reference import ReferenceBackend

out = sys.argv[1]
if "RANK" in os.environ:
    dist.init_process_group("gloo")
    name = f"rank{dist.get_rank()}"
else:
    name = "single"
recorded = []
original = ReferenceBackend.quantize_grad_output
def recording(self, *args, **kwargs):
    recorded.append(original(self, *args, **kwargs))
    return recorded[-1]
ReferenceBackend.quantize_grad_output = recording
torch.manual_seed(0)
layer = hot.convert(nn.Linear(64, 32), hot.HOTConfig(backend="fake", hla_blocking="paper"))
x = torch.randn(4, 16, 64, requires_grad=True)
layer(x).backward(torch.randn(4, 16, 32))
gx_codes, gw_codes = recorded[0].hq_codes, recorded[0].hla_codes
torch.save({"gx_codes": gx_codes, "gw_codes": gw_codes, "g_x": x.grad, "g_w": layer.weight.grad}, f"{out}/{name}.pt")
if dist.is_initialized():
    dist.destroy_process_group()
"""


@pytest.mark.slow
def test_data_parallel_ranks_draw_their_own_codes_and_the_same_on_a_rerun(tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text(_RANK_WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = []
    for n in range(2):
        out = tmp_path / f"run{n}"
        out.mkdir()
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(worker),
                   str(out)]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        runs.append({r: torch.load(out / f"rank{r}.pt") for r in (0, 1)})
    result = subprocess.run([sys.executable, str(worker), str(tmp_path)], capture_output=True, text=True, timeout=300,
                            env=env, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    single = torch.load(tmp_path / "single.pt")
    first, again = runs
    for name in ("gx_codes", "gw_codes", "g_x", "g_w"):
        assert torch.equal(first[0][name], single[name])  # rank 0 draws what a single process draws
        for r in (0, 1):
            assert torch.equal(first[r][name], again[r][name])  # and a rerun the same
    for name in ("gx_codes", "gw_codes"):
        differ = (first[0][name] != first[1][name]).float().mean().item()
        assert differ > 0.1, f"{name}: the two ranks' codes differ in {differ:.1%} of the elements"
