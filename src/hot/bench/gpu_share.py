"""How many small training runs one GPU should hold at once: the throughput of N concurrent ``hot train`` processes.

    python -m hot.bench.gpu_share OUT.json [N ...] [--set KEY=VALUE ...]    # default N: 1 4 8

Each process trains the gpu preset's tiny ViT on Fashion-MNIST for one capped epoch (FP and HOT on the real
backend); for each method and N the result holds every process's median step time and the wall time of the
whole group, so ``runs_per_hour`` compares sharing levels directly. This is what ``jobs_per_gpu`` in
``config/gpu.yaml`` was chosen from (its header cites the committed result).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..results import environment, write_json_atomic

METHODS = {"fp": ["method=fp"], "hot": ["method=hot", "hot.backend=real", "exclude=[head]"]}
RUN = ["model=vit_tiny_fmnist", "dataset=fashion_mnist", "data_dir=resources", "epochs=1", "device=cuda",
       "max_train_batches=200", "test_subset=1000", "int8_warmup_epochs=0"]  # fmt: skip


def group(method: str, n: int, extra: list[str], work: Path) -> dict[str, Any]:
    """``n`` processes of ``method`` at once: their step times, their wall times and the group's."""
    sets = [*RUN, *METHODS[method], *(e for e in extra if method == "hot" or not e.startswith("hot."))]
    procs = []
    started = time.perf_counter()
    for i in range(n):
        out = work / f"{method}-{n}-{i}"
        args = [sys.executable, "-m", "hot.cli", "train", "--out", str(out), "--no-resume"]
        args += [a for s in [*sets, f"seed={i}"] for a in ("--set", s)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        procs.append((out, subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)))
    runs = []
    for out, proc in procs:
        _, err = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"hot train failed ({proc.returncode}): {err[-2000:]}")
        metrics = json.loads((out / "metrics.json").read_text())
        epoch = metrics["epochs"][0]
        runs.append(
            {"step_ms": 1e3 * epoch["step_time_s"], "epoch_s": epoch["time_s"], "wall_s": metrics["wall_time_s"]}
        )
    wall = time.perf_counter() - started
    return {"method": method, "processes": n, "group_wall_s": wall, "runs_per_hour": 3600 * n / wall, "runs": runs}


def main(argv: list[str]) -> None:
    extra = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    rest = [a for i, a in enumerate(argv) if a != "--set" and (i == 0 or argv[i - 1] != "--set")]
    out, counts = Path(rest[0]), [int(n) for n in rest[1:]] or [1, 4, 8]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for method in METHODS:
            for n in counts:
                results.append(group(method, n, extra, Path(tmp)))
                r = results[-1]
                steps = sorted(x["step_ms"] for x in r["runs"])
                print(f"{method} x{n}: group {r['group_wall_s']:.1f} s, step {steps[0]:.1f}-{steps[-1]:.1f} ms, "
                      f"{r['runs_per_hour']:.0f} runs/h", flush=True)  # fmt: skip
    write_json_atomic(out, {"what": __doc__.split("\n")[0], "run": RUN, "extra": extra, "environment": environment(),
                            "groups": results}, sort_keys=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
