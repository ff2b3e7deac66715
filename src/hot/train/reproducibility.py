"""What makes a run reproducible across a kill and resume: deterministic algorithms, every RNG's state in the
checkpoint, and shuffling seeds that are a function of (seed, epoch) alone."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch


@contextlib.contextmanager
def determinism(on: bool) -> Iterator[None]:
    """Deterministic algorithms (where ``on``) for the run. Process-wide switches: set for the run, then put back
    (a caller may train several runs in one process)."""
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.benchmark,
    )
    if on:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS reads it at its first use
        torch.use_deterministic_algorithms(True, warn_only=True)  # warn where an op has no deterministic kernel
        torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.benchmark = before[2]


def rng_state() -> dict[str, Any]:
    """Every RNG's state (Python, NumPy, torch, CUDA) as a checkpoint holds it (tensors, no NumPy arrays)."""
    np_state = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": (np_state[0], torch.from_numpy(np_state[1].copy()), *np_state[2:]),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy(), *rest))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextlib.contextmanager
def rng_kept() -> Iterator[None]:
    """Every RNG as it was before the block."""
    state = rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def epoch_seed(seed: int, epoch: int) -> int:
    """The shuffling and worker seed of an epoch: a function of (seed, epoch) alone."""
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0])
