"""A run's output directory: the files a run writes there, the lock that keeps a second run out, the checkpoint
that a resume reads back, and how far an epoch had got when it was written."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from .config import RESUME_FREE_KEYS, TrainConfig

CHECKPOINT, METRICS, MODEL, LQS = "checkpoint.pt", "metrics.json", "model.pt", "lqs.json"
RESULTS = (CHECKPOINT, METRICS, MODEL, LQS)  # what a run writes into its --out
LOCK = "train.lock"


class OutInUse(InputError, RuntimeError):
    """Another run holds the output directory."""


@contextlib.contextmanager
def out_locked(out: Path) -> Iterator[None]:
    """Holds OUT/train.lock while the block runs: a second run into the same directory fails at once."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutInUse(
                f"another hot train is writing into {out} (it holds {out / LOCK}); wait for it to end, or use "
                "another --out"
            ) from None
        yield  # the lock goes with the file's closing, also when the process dies


def remove_results(out: Path) -> None:
    """Delete what an earlier run wrote into ``out`` (a run starting afresh)."""
    for name in RESULTS:
        (out / name).unlink(missing_ok=True)


@dataclass(frozen=True)
class EpochSoFar:
    """How far an epoch got: batches done, this process's loss sum and sample count over them, time spent."""

    batches: int = 0
    loss_sum: float = 0.0
    count: int = 0
    time_s: float = 0.0


NOT_BEGUN = EpochSoFar()  # an epoch with no batch done


def read_checkpoint(path: Path, config: TrainConfig) -> dict[str, Any]:
    """The checkpoint at ``path``, written with ``config`` (up to :data:`RESUME_FREE_KEYS`); a ``ValueError`` naming
    the file where it is unreadable or another config wrote it."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # empty (EOFError), truncated, or not a checkpoint: unpickling raises many kinds
        raise ValueError(
            f"{path} is not a readable checkpoint ({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
            "pass --no-resume to start afresh, or use another --out"
        ) from err
    now, then = config.to_dict(), saved["config"]
    differ = sorted(k for k in set(now) | set(then) if k not in RESUME_FREE_KEYS and now.get(k) != then.get(k))
    if differ:
        raise ValueError(
            f"{path} was written with another config (keys {differ} differ); "
            "pass --no-resume to start afresh, or use another --out"
        )
    return saved
