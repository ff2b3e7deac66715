"""A process's place in a torchrun job, and the collectives the training loop needs."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    """This process's place in a torchrun job (rank 0 of 1 without one)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

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
