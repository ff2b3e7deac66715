"""Per-step training progress on stderr: a tqdm bar, a line every ~10% of an epoch (for logs), or nothing."""

from __future__ import annotations

import os
import sys
import time

from tqdm import tqdm

# Per-step progress: "bar" (tqdm), "lines" (one every ~10% of an epoch, for logs) or "none"; unset: a bar where
# stderr is a terminal, lines elsewhere.
PROGRESS_ENV, PROGRESS_MODES = "HOT_PROGRESS", ("bar", "lines", "none")


def progress_mode(main: bool) -> str:
    asked = os.environ.get(PROGRESS_ENV, "")
    if asked and asked not in PROGRESS_MODES:
        raise ValueError(f"{PROGRESS_ENV}={asked!r}: expected one of {list(PROGRESS_MODES)} (or unset)")
    if not main:
        return "none"
    return asked or ("bar" if sys.stderr.isatty() else "lines")


class Progress:
    """One epoch's per-step progress on stderr: a tqdm bar with the running loss, or a line every ~10% of it."""

    def __init__(self, mode: str, epoch: int, epochs: int, total: int, done: int) -> None:
        self.name, self.total, self.first, self.t0 = f"epoch {epoch + 1}/{epochs}", total, done, time.perf_counter()
        self.lines = mode == "lines"
        self.bar = tqdm(desc=self.name, total=total, initial=done, leave=False) if mode == "bar" else None

    def update(self, done: int, loss: float) -> None:
        """``done`` batches of the epoch are done; ``loss`` is their mean loss."""
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            self.bar.update(done - self.bar.n)
        elif self.lines and done * 10 // self.total > (done - 1) * 10 // self.total:
            per_batch = (time.perf_counter() - self.t0) / (done - self.first)
            print(
                f"{self.name}: batch {done}/{self.total} ({100 * done // self.total}%), loss {loss:.4f}, "
                f"{per_batch:.3g} s/batch",
                file=sys.stderr,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
