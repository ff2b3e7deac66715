"""Host time of a small HOT layer: what the harness around the GEMMs costs, eager calls against the custom ops.

    python -m hot.bench.host_overhead OUT.json [--device cpu|cuda]

Ten 16×16 Linear layers on a (2, 16, 16) input, forward and backward, median of 5 rounds of 200 steps, per layer:
plain ``nn.Linear``; HOT's harness with the exact method (``HOTConfig(method="fp")``: its cost is the harness's alone)
called eagerly (:class:`hot.functional._EagerLayer`) and through the ``hot::layer_*`` custom ops (what compiled
graphs run; forced here by reporting a compile in progress); the same two for method ``hot`` on the fake backend.
``*_beyond_linear_us`` is the time above ``nn.Linear``'s: for ``fp`` the harness alone, for ``hot`` the quantisers
too. One process, one machine, so the ratios compare like with like.

On a CUDA device with the kernels built, ``hot_real`` is the same with the real backend (its kernels take a few µs
at these shapes, so the loop is bound by the host), and ``real_stages_us`` the host time of each call of its
backward (:func:`hot.bench.latency._hot`'s stages; ``hot``: both chains call by call; ``layer_gradients``: the
one call an eager backward makes, with the bias gradient) at one such layer: where an eager HOT step spends its CPU.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from torch import nn

from ..backends import create_backend, real_available
from ..config import HOTConfig
from ..convert import convert
from ..hla import hla_windows
from ..methods import Keys, layer_specs
from ..results import environment, write_json_atomic

LAYERS, ROUNDS, STEPS = 10, 5, 200


def _per_layer_us(model: nn.Module, x: torch.Tensor, through_ops: bool) -> float:
    patch = mock.patch.object(torch.compiler, "is_compiling", lambda: True) if through_ops else mock.MagicMock()
    with patch:
        for _ in range(10):
            model(x).sum().backward()
        rounds = []
        for _ in range(ROUNDS):
            if x.is_cuda:
                torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(STEPS):
                model(x).sum().backward()
            if x.is_cuda:
                torch.cuda.synchronize()
            rounds.append((time.perf_counter() - started) / STEPS / LAYERS * 1e6)
    return statistics.median(rounds)


def _per_call_us(fn: Any) -> float:
    """Median over rounds of ``fn``'s time per call in a loop of STEPS calls, the GPU drained at each round's end."""
    for _ in range(10):
        fn()
    rounds = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(STEPS):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - started) / STEPS * 1e6)
    return statistics.median(rounds)


def real_stages(x: torch.Tensor) -> dict[str, float]:
    """Host µs per call of each stage of the real backend's backward of one 16x16 layer on ``x``'s tokens."""
    from .latency import _hot

    tokens = x.shape[-2]
    g_y = torch.randn(tokens, x.shape[-1], device=x.device)
    weight = torch.randn(x.shape[-1], x.shape[-1], device=x.device)
    backend = create_backend(HOTConfig(backend="real"), x.device)
    stages = _hot(backend, g_y, weight, x.detach()[0], tokens)
    specs = layer_specs(HOTConfig(hla_blocking="paper"), weight.shape[0], hla_windows(tokens, "paper"), Keys(0, 0, 0))
    x_codes = backend.hla_quantize(x.detach()[0], specs.input_hla)
    stages["layer_gradients"] = lambda: backend.layer_gradients(
        g_y, weight, lambda: x_codes, specs.grad_output, specs.grad_output_hla, torch.float32, True
    )
    return {name: _per_call_us(fn) for name, fn in stages.items()}


def measure(device: str) -> dict[str, Any]:
    torch.manual_seed(0)
    x = torch.randn(2, 16, 16, device=device, requires_grad=True)

    def model(config: HOTConfig | None) -> nn.Module:
        net = nn.Sequential(*[nn.Linear(16, 16) for _ in range(LAYERS)]).to(device)
        return net if config is None else convert(net, config)

    results: dict[str, Any] = {"nn_linear_us": _per_layer_us(model(None), x, False)}
    configs = [("fp", HOTConfig(method="fp")), ("hot_fake", HOTConfig(method="hot", backend="fake"))]
    real = x.is_cuda and real_available()
    if real:
        configs.append(("hot_real", HOTConfig(method="hot", backend="real")))
    for name, config in configs:
        results[f"{name}_eager_us"] = _per_layer_us(model(config), x, False)
        results[f"{name}_ops_us"] = _per_layer_us(model(config), x, True)
        linear = results["nn_linear_us"]
        results[f"{name}_beyond_linear_eager_us"] = results[f"{name}_eager_us"] - linear
        results[f"{name}_beyond_linear_ops_us"] = results[f"{name}_ops_us"] - linear
    if real:
        results["real_stages_us"] = real_stages(x)
    return results


def main(argv: Sequence[str]) -> int:
    device = argv[argv.index("--device") + 1] if "--device" in argv else "cpu"
    paths = [a for i, a in enumerate(argv) if a != "--device" and (i == 0 or argv[i - 1] != "--device")]
    if len(paths) != 1:
        print("usage: python -m hot.bench.host_overhead OUT.json [--device cpu|cuda]", file=sys.stderr)
        return 2
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # host time of one thread; the caller's setting is given back
    try:
        results = measure(device)
    finally:
        torch.set_num_threads(threads)
    for key, value in results.items():
        for name, us in value.items() if isinstance(value, dict) else [(key, value)]:
            print(f"{name:28s} {us:8.1f}")
    what = __doc__.split("\n")[0]
    payload = {"what": what, "device": device, "results": results, "environment": environment()}
    write_json_atomic(Path(paths[0]), payload, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
