"""One step variant in a fresh Python process: what a user's training run sees, with no compiled graphs, imported
float8 modules or cached allocator blocks left by the variants measured before it.

Both sides of the process boundary live here. :func:`measure_in_fresh_process` starts
``python -m hot.bench.step_worker`` with the variant and its settings, streams the worker's stderr through (keeping
its tail), and reads the result the worker wrote as JSON to a temporary file. A worker that raises writes
``{"error": …}`` itself; one that dies without a result (a crash, a kill, the timeout) gives
``{"error": …, "exit_code": …}`` with the tail of its stderr.

    python -m hot.bench.step_worker request.json result.json   (request: worker_request's JSON object)
"""

from __future__ import annotations

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


def worker_request(
    variant: str,
    batch: int,
    steps: int,
    warmup: int,
    seed: int,
    hot: HOTConfig | None,
    *,
    device: str = "cuda",
    model_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The worker's request: :func:`hot.bench.step.step_variant`'s parameters as a JSON object."""
    return {
        "variant": variant,
        "batch": batch,
        "steps": steps,
        "warmup": warmup,
        "seed": seed,
        "hot": None if hot is None else hot.to_dict(),
        "device": device,
        "model_kwargs": model_kwargs or {},
    }


def measure_in_fresh_process(request: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
    """:func:`hot.bench.step.step_variant` run by a worker process of its own on ``request``
    (:func:`worker_request`); never raises for the worker's failures (they become the variant's ``error`` entry)."""
    variant = request["variant"]
    with tempfile.TemporaryDirectory(prefix="hot-step-") as scratch:
        request_path, result_path = Path(scratch) / "request.json", Path(scratch) / "result.json"
        request_path.write_text(json.dumps(request))
        command = [sys.executable, "-m", WORKER_MODULE, str(request_path), str(result_path)]
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


def main(argv: Sequence[str] | None = None) -> int:
    """``REQUEST RESULT``: measures the variant :func:`worker_request` describes and writes its result (or its
    error) to RESULT; 1 for an error, 2 for a bad call."""
    from .step import step_variant

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(f"usage: python -m {WORKER_MODULE} REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request_path, result_path = map(Path, args)
    try:
        request = json.loads(request_path.read_text())
        hot = HOTConfig.from_dict(request["hot"]) if request["hot"] is not None else None
        result = step_variant(
            request["variant"],
            request["batch"],
            request["steps"],
            request["warmup"],
            request["seed"],
            hot,
            device=request["device"],
            model_kwargs=request["model_kwargs"],
        )
    except Exception as err:  # the parent records it as this variant's entry
        traceback.print_exc()
        write_json_atomic(result_path, {"error": error_text(err)})
        return 1
    write_json_atomic(result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
