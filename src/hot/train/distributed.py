"""A process's place in a torchrun job, and the collectives the training loop needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    """This process's place in a torchrun job (rank 0 of 1 without one)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1  # processes on this machine

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def sum(self, values: list[float], device: torch.device) -> list[float]:
        if self.world == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=device)
        dist.all_reduce(t)
        return t.tolist()

    def gather(self, values: list[float], device: torch.device) -> list[list[float]]:
        """Every process's ``values``, in rank order (each process fills its own slots of one sum)."""
        n = len(values)
        slots = [0.0] * (n * self.world)
        slots[self.rank * n : (self.rank + 1) * n] = values
        total = self.sum(slots, device)
        return [total[r * n : (r + 1) * n] for r in range(self.world)]

    def check_same(self, what: str, values: Mapping[str, Any]) -> None:
        """Raise, on every process, where any process's ``values`` differ from rank 0's, naming the first field
        that differs (in rank 0's order) and both values."""
        if self.world == 1:
            return
        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, dict(values))
        first = everyone[0]
        for rank, theirs in enumerate(everyone[1:], start=1):
            for key in [*first, *(k for k in theirs if k not in first)]:
                ours, other = first.get(key, "<unset>"), theirs.get(key, "<unset>")
                if ours != other:
                    raise ValueError(
                        f"the processes disagree on the {what}: {key} is {ours!r} on rank 0 but {other!r} on rank "
                        f"{rank}; every process must run with the same settings"
                    )
