"""Data-parallel HOT training on one machine's GPUs, measured (how ``kernels/results/ddp_*.json`` were made).

``python -m hot.bench.ddp_scaling OUT.json [gpus=2] [seeds=0,1] ...`` (:data:`USAGE`) runs, each as its own
``hot train`` process group on the real kernels (``vit_tiny_fmnist`` on full Fashion-MNIST, the gpu preset's
recipe, global batch 128):

- ``scaling``: every seed on one GPU and under ``torchrun`` on ``gpus`` GPUs, the same global batch: final top-1,
  the median step time and the run's wall time (the epochs' step times are each epoch's median);
- ``resume``: a one-GPU run killed (SIGKILL) once its first epoch's checkpoint exists, then resumed on ``gpus``
  GPUs to the end;
- ``compile``: ``torch_compile: inductor`` under ``torchrun`` for a few steps, with ``TORCH_LOGS=recompiles``: the
  recompilations logged after the first graphs (none expected).

Each piece's command and log tail are kept in the JSON; nothing here asserts: the numbers are the result.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..results import environment, write_json_atomic

CONFIG: dict[str, Any] = {
    "model": "vit_tiny_fmnist",
    "dataset": "fashion_mnist",
    "recipe": "embedded_pretrain",
    "method": "hot",
    "hot": {"backend": "real"},
    "exclude": ["head", "fc"],
    "batch_size": 128,
    "lr": 1e-3,
    "weight_decay": 0.05,
    "device": "cuda",
    "int8_warmup_epochs": 0,
}
RECOMPILE = re.compile(r"Recompiling function", re.IGNORECASE)


def _command(world: int, out: Path, config: Path, sets: dict[str, Any]) -> list[str]:
    launcher = [sys.executable]
    if world > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}"]
    overrides = [item for k, v in sets.items() for item in ("--set", f"{k}={json.dumps(v)}")]
    return [*launcher, "-m", "hot.cli", "train", "--out", str(out), "--config", str(config), *overrides]


def _visible(world: int) -> dict[str, str]:
    # the package this module is part of, for the child processes, wherever they start
    path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(world)), "PYTHONPATH": path}


def _summary(out: Path) -> dict[str, Any]:
    metrics = json.loads((out / "metrics.json").read_text())
    steps = [e["step_time_s"] for e in metrics["epochs"] if e.get("step_time_s") is not None]
    return {
        "final_top1": metrics["final_top1"],
        "world_size": metrics["world_size"],
        "step_time_ms": 1000 * statistics.median(steps) if steps else None,
        "wall_time_s": metrics["wall_time_s"],
        "epochs": len(metrics["epochs"]),
    }


def _run(world: int, out: Path, config: Path, sets: dict[str, Any], env: dict[str, str] | None = None) -> dict:
    command = _command(world, out, config, sets)
    started = time.perf_counter()
    done = subprocess.run(command, env=env or _visible(world), capture_output=True, text=True)
    record: dict[str, Any] = {"command": " ".join(command), "seconds": time.perf_counter() - started}
    record["returncode"] = done.returncode
    log = done.stdout + done.stderr
    record["log_tail"] = log[-3000:]
    record["recompiles_logged"] = len(RECOMPILE.findall(log))  # with TORCH_LOGS=recompiles
    if done.returncode == 0:
        record.update(_summary(out))
    return record


def scaling(work: Path, config: Path, gpus: int, seeds: list[int], epochs: int) -> list[dict[str, Any]]:
    rows = []
    for seed in seeds:
        for world in (1, gpus):
            row = _run(world, work / f"scaling-w{world}-s{seed}", config, {"seed": seed, "epochs": epochs})
            rows.append({"seed": seed, "gpus": world, **row})
            print(
                f"scaling: seed {seed}, {world} GPU(s): {row.get('final_top1')}% top-1, "
                f"{row.get('step_time_ms')} ms a step, rc {row['returncode']}",
                file=sys.stderr,
            )
    return rows


def resume(work: Path, config: Path, gpus: int, epochs: int, timeout: float = 600.0) -> dict[str, Any]:
    out = work / "resume"
    sets = {"seed": 0, "epochs": epochs}
    first = subprocess.Popen(
        _command(1, out, config, sets),
        env=_visible(1),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # an unread pipe would stall the run once its buffer filled
    )
    deadline = time.monotonic() + timeout
    while not (out / "checkpoint.pt").is_file() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    killed = first.poll() is None
    if killed:
        os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    record: dict[str, Any] = {"killed_after_checkpoint": killed and (out / "checkpoint.pt").is_file()}
    record.update(_run(gpus, out, config, sets))
    return record


def compiled(work: Path, config: Path, gpus: int, steps: int) -> dict[str, Any]:
    env = {**_visible(gpus), "TORCH_LOGS": "recompiles"}
    sets = {"seed": 0, "epochs": 1, "max_train_batches": steps, "torch_compile": "inductor"}
    return _run(gpus, work / "compile", config, sets, env)


USAGE = (
    "usage: python -m hot.bench.ddp_scaling OUT.json [gpus=2] [seeds=0,1] [epochs=2] [compile_steps=40] "
    "[parts=scaling,resume,compile] [work=results/ddp] [override=JSON]"
)
PARTS = ("scaling", "resume", "compile")
DEFAULTS: dict[str, Any] = {
    "gpus": 2,
    "seeds": [0, 1],
    "epochs": 2,
    "compile_steps": 40,
    "parts": list(PARTS),
    "work": "results/ddp",
    "override": {},
}


def _integers(value: str) -> list[int]:
    return [int(v) for v in value.split(",")]


def _object(value: str) -> dict[str, Any]:
    found = json.loads(value)
    if not isinstance(found, dict):
        raise ValueError(f"got {type(found).__name__}")
    return found


# How each setting is read from its text, and what it must be
READERS: dict[str, tuple[Any, str]] = {
    "gpus": (int, "an integer"),
    "seeds": (_integers, "comma-separated integers"),
    "epochs": (int, "an integer"),
    "compile_steps": (int, "an integer"),
    "parts": (lambda value: value.split(","), "comma-separated names"),
    "work": (str, "a path"),
    "override": (_object, "a JSON object"),
}


def parse(argv: Sequence[str]) -> tuple[Path, dict[str, Any]]:
    """OUT.json and the ``key=value`` settings over :data:`DEFAULTS`; a ValueError names what is wrong."""
    if not argv or "=" in argv[0]:
        raise ValueError("the JSON to write comes first")
    settings = dict(DEFAULTS)
    for item in argv[1:]:
        key, sep, value = item.partition("=")
        if not sep or key not in READERS:
            raise ValueError(f"{item!r}: expected key=value with key one of {', '.join(READERS)}")
        read, kind = READERS[key]
        try:
            settings[key] = read(value)
        except ValueError as err:
            raise ValueError(f"{key}: {value!r} is not {kind} ({err})") from err
    unknown = sorted(set(settings["parts"]) - set(PARTS))
    if unknown:
        raise ValueError(f"parts: {unknown} not among {', '.join(PARTS)}")
    return Path(argv[0]), settings


def main(argv: Sequence[str] | None = None) -> int:
    try:
        out, args = parse(list(sys.argv[1:] if argv is None else argv))
    except ValueError as err:
        print(f"ddp_scaling: {err}\n{USAGE}", file=sys.stderr)
        return 2
    work = Path(args["work"])
    work.mkdir(parents=True, exist_ok=True)
    config = work / "config.json"  # JSON is YAML: hot train reads it as its config file
    settings = {**CONFIG, **args["override"]}
    config.write_text(json.dumps(settings))
    result: dict[str, Any] = {"environment": environment(), "config": settings, "gpus": args["gpus"]}
    if "scaling" in args["parts"]:
        result["scaling"] = scaling(work, config, args["gpus"], args["seeds"], args["epochs"])
        write_json_atomic(out, result)
    if "resume" in args["parts"]:
        result["resume"] = resume(work, config, args["gpus"], args["epochs"])
        write_json_atomic(out, result)
    if "compile" in args["parts"]:
        result["compile"] = compiled(work, config, args["gpus"], args["compile_steps"])
    write_json_atomic(out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
