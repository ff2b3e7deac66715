"""One step variant in a fresh Python process: what a user's training run sees, with no compiled graphs, imported
float8 modules or cached allocator blocks left by the variants measured before it.

Both sides of the process boundary live here. :func:`measure_in_fresh_process` starts
``python -m hot.bench.step_worker`` with the variant and its settings, streams the worker's stderr through (keeping
its tail), and reads the result the worker wrote as JSON to a temporary file. A worker that raises writes
``{"error": …}`` itself; one that dies without a result (a crash, a kill, the timeout) gives
``{"error": …, "exit_code": …}`` with the tail of its stderr.

    python -m hot.bench.step_worker --variant hot --batch 128 --steps 20 --warmup-steps 5 --result out.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ..config import HOTConfig
from ..results import error_text, write_json_atomic

WORKER_MODULE = "hot.bench.step_worker"
STDERR_TAIL_LINES = 30


def worker_arguments(
    variant: str,
    batch: int,
    steps: int,
    warmup: int,
    seed: int,
    hot: HOTConfig | None,
    *,
    device: str = "cuda",
    model_kwargs: dict[str, Any] | None = None,
) -> list[str]:
    """The worker's command-line arguments for :func:`hot.bench.step.step_variant`'s parameters (no ``--result``)."""
    arguments = [
        f"--variant={variant}",
        f"--batch={batch}",
        f"--steps={steps}",
        f"--warmup-steps={warmup}",
        f"--seed={seed}",
        f"--device={device}",
        f"--model-kwargs={json.dumps(model_kwargs or {})}",
    ]
    if hot is not None:
        arguments.append(f"--hot-config={json.dumps(hot.to_dict())}")
    return arguments


def measure_in_fresh_process(
    variant: str,
    batch: int,
    steps: int,
    warmup: int,
    seed: int,
    hot: HOTConfig | None,
    *,
    device: str = "cuda",
    model_kwargs: dict[str, Any] | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """:func:`hot.bench.step.step_variant` run by a worker process of its own; never raises for the worker's
    failures (they become the variant's ``error`` entry)."""
    arguments = worker_arguments(variant, batch, steps, warmup, seed, hot, device=device, model_kwargs=model_kwargs)
    with tempfile.TemporaryDirectory(prefix="hot-step-") as scratch:
        result_path = Path(scratch) / "result.json"
        command = [sys.executable, "-m", WORKER_MODULE, *arguments, f"--result={result_path}"]
        exit_code, tail, timed_out = _run(command, timeout_s)
        if result_path.exists():
            return json.loads(result_path.read_text())
    why = f"timed out after {timeout_s:g} s" if timed_out else f"exited with code {exit_code}"
    stderr = "".join(tail).strip()
    return {
        "error": f"step worker for {variant!r} {why} without a result"
        + (f"; its stderr ended:\n{stderr}" if stderr else ""),
        "exit_code": exit_code,
    }


def _run(command: list[str], timeout_s: float | None) -> tuple[int, list[str], bool]:
    """Runs ``command`` with this package importable, its stdout through and its stderr teed; returns the exit code,
    the last lines of stderr and whether it was killed for the timeout."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    # A session of its own, so a timeout or an interrupt ends the worker's compile subprocesses with it.
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    assert process.stderr is not None
    reader = threading.Thread(target=_tee, args=(process.stderr, tail), daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(process)
    except BaseException:
        _kill(process)
        raise
    reader.join(timeout=10)
    return process.returncode, list(tail), timed_out


def _tee(stream: IO[str], tail: collections.deque[str]) -> None:
    for line in stream:
        sys.stderr.write(line)
        tail.append(line)
    sys.stderr.flush()


def _kill(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


# --------------------------------------------------------------------------------------------- the worker


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    from .step import STEP_VARIANTS

    parser = argparse.ArgumentParser(prog=f"python -m {WORKER_MODULE}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", required=True, choices=STEP_VARIANTS)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--warmup-steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model-kwargs", type=_json_object, default={}, help="for timm.create_model, as JSON")
    parser.add_argument("--hot-config", type=_json_object, default=None, help="HOTConfig fields, as JSON")
    parser.add_argument("--result", type=Path, required=True, help="the JSON written")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Measures one variant and writes its result (or its error) to ``--result``; 1 for an error."""
    from .step import step_variant

    args = _parser().parse_args(argv)
    try:
        hot = HOTConfig.from_dict(args.hot_config) if args.hot_config is not None else None
        result = step_variant(
            args.variant,
            args.batch,
            args.steps,
            args.warmup_steps,
            args.seed,
            hot,
            device=args.device,
            model_kwargs=args.model_kwargs,
        )
    except Exception as err:  # the parent records it as this variant's entry
        traceback.print_exc()
        write_json_atomic(args.result, {"error": error_text(err)})
        return 1
    write_json_atomic(args.result, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
