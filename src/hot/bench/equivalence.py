"""Fake against real: the same HOT training with both backends, and the codes of their quantisers side by side.

A test (``tests/kernels/test_kernels_gpu.py``) and ``hot bench``'s ``equivalence`` section both call these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..backends import create_backend
from ..config import HOTConfig
from ..hla import TokenGrid, hla_windows
from ..methods import Keys, create_method, layer_specs
from ..rounding import SPEC_HASH
from .step import train_step

PROTOTYPE_WEIGHT = 1.0  # class signal against unit noise: learnt in about 20 steps, not at once
EQUIVALENCE_TOLERANCE = 1e-3  # max |loss_fake - loss_real| / |loss_fake| over the first EARLY_STEPS steps
EARLY_STEPS = 10
# Over all steps: AdamW divides each update by the gradient's running RMS, so float32 rounding differences in small
# gradient entries grow into the weights faster than under SGD; the drift stays far below a wrong backward's.
DRIFT_TOLERANCE = 1e-2
NOT_ZERO = (
    "the codes are the same (same seed, layer and step give the same hash keys), but the fake backend's float32 "
    "GEMMs and the real backend's FP8/INT8 GEMMs with fused dequantisation sum and scale in another order, so "
    "g_x and g_w differ by float32 rounding, which grows slowly over the training steps"
)


def _config(backend: str, seed: int, real_options: dict[str, Any] | None, rounding_hash: str) -> HOTConfig:
    """HOT + ABC on ``backend`` with ``rounding_hash`` (both backends draw the same numbers); ``real_options`` are the
    real backend's (``gemm``, ``fused_grad_output``)."""
    options = real_options or {} if backend == "real" else {}
    return HOTConfig(backend=backend, abc=True, seed=seed, rounding_hash=rounding_hash, **options)


def relative_differences(reference: Sequence[float], other: Sequence[float]) -> list[float]:
    """|a - b| / |a| step by step."""
    if len(reference) != len(other) or not reference:
        raise ValueError(f"need two equally long, non-empty loss lists, got {len(reference)} and {len(other)}")
    return [abs(a - b) / abs(a) if a else abs(b) for a, b in zip(reference, other, strict=True)]


def equivalence(
    device: torch.device | str,
    steps: int,
    batch: int,
    *,
    backends: tuple[str, str] = ("fake", "real"),
    seed: int = 0,
    lr: float = 1e-3,
    model_name: str = "vit_tiny_fmnist",
    real_options: dict[str, Any] | None = None,
    rounding_hash: str = SPEC_HASH,
) -> dict[str, Any]:
    """Train one tiny ViT twice, with ``backends[0]`` and ``backends[1]`` (HOT + ABC), from the same weights on the
    same batches in float32, and compare the losses step by step and the held-out accuracy.

    Each class is a fixed random image under unit Gaussian noise (:data:`PROTOTYPE_WEIGHT`), so about 20 steps
    learn it and the held-out accuracy compares two learnt models, not noise. ``real_options`` (``gemm``,
    ``fused_grad_output``) apply to the ``real`` backend, ``rounding_hash`` to both.
    """
    from ..convert import convert
    from ..train.models import create_model

    device = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    shape = (1, 28, 28)  # vit_tiny_fmnist: grey 28², patch 4, 50 tokens
    prototypes = torch.randn(10, *shape, generator=gen)

    def data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 10, (n,), generator=gen)
        x = PROTOTYPE_WEIGHT * prototypes[y] + torch.randn(n, *shape, generator=gen)
        return x.to(device), y.to(device)

    batches = [data(batch) for _ in range(4)]  # cycled: a fixed, learnable stream
    held_x, held_y = data(256)
    torch.manual_seed(seed)
    initial = create_model(model_name, 10, 1).state_dict()
    runs = []
    for backend in backends:
        net = create_model(model_name, 10, 1)
        net.load_state_dict(initial)
        convert(net, _config(backend, seed, real_options, rounding_hash))
        net.to(device).train()
        optimizer = torch.optim.AdamW(net.parameters(), lr=lr)
        losses = []
        for step in range(steps):
            x, y = batches[step % len(batches)]
            losses.append(float(train_step(net, optimizer, x, y, amp=False).item()))
        net.eval()
        with torch.no_grad():
            accuracy = (net(held_x).argmax(1) == held_y).float().mean().item()
        runs.append({"backend": backend, "losses": losses, "held_out_accuracy": accuracy})
        del net, optimizer
    diffs = relative_differences(runs[0]["losses"], runs[1]["losses"])
    worst, early = max(diffs), max(diffs[:EARLY_STEPS])
    return {
        "model": model_name,
        "device": str(device),
        "steps": steps,
        "batch": batch,
        "optimizer": f"AdamW(lr={lr}), float32, no autocast",
        "hot_config": f"HOTConfig(abc=True, rounding_hash={rounding_hash!r})",
        "runs": runs,
        "rel_loss_diffs": diffs,
        "max_rel_loss_diff": worst,
        "max_rel_loss_diff_early": early,
        "accuracy_diff": runs[1]["held_out_accuracy"] - runs[0]["held_out_accuracy"],
        "tolerance": EQUIVALENCE_TOLERANCE,
        "early_steps": EARLY_STEPS,
        "drift_tolerance": DRIFT_TOLERANCE,
        "passed": early < EQUIVALENCE_TOLERANCE and worst < DRIFT_TOLERANCE,
        "why_not_zero": NOT_ZERO,
    }


def code_mismatches(
    device: torch.device | str,
    length: int,
    out_f: int,
    in_f: int,
    tokens: int,
    seed: int = 0,
    backends: tuple[str, str] = ("fake", "real"),
    grid: TokenGrid | None = None,
    real_options: dict[str, Any] | None = None,
    rounding_hash: str = SPEC_HASH,
) -> dict[str, int]:
    """Codes of two backends on the same random g_y and x: elements that differ, per quantiser. ``fake`` runs on the
    CPU (the reference's bits: on CUDA torch divides by a scalar through its reciprocal), any other on ``device``."""
    gen = torch.Generator().manual_seed(seed)
    g_y = torch.randn(length, out_f, generator=gen)
    x = torch.randn(length, in_f, generator=gen)
    config = HOTConfig(abc=True, seed=seed, rounding_hash=rounding_hash)
    keys = Keys(seed, 0, 0)
    windows = hla_windows(tokens, config.hla_blocking, grid)
    specs = layer_specs(config, out_f, windows, keys)
    codes = []
    for name in backends:
        where = "cpu" if name == "fake" else device
        backend_config = _config(name, seed, real_options, rounding_hash)
        backend = create_backend(backend_config)
        q = backend.quantize_grad_output(g_y.to(where), specs.grad_output, specs.grad_output_hla)
        a, g = q.hq_codes, q.hla_codes
        p, _ = create_method(backend_config).pack_input(x.to(where), windows, keys)
        codes.append([t.cpu().float().to(torch.int8).contiguous() for t in (a, g, p)])  # e4m3 codes hold integers
    names = ("hq_grad_output", "hla_grad_output", "hla_input")
    found = {n: int((f != r).sum().item()) for n, f, r in zip(names, *codes, strict=True)}
    found["elements"] = sum(t.numel() for t in codes[0])
    return found
