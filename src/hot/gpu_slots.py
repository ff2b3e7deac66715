"""``hot slots``: run a command on k GPUs of its own, so that concurrent workflow jobs do not all land on cuda:0.

``hot slots --gpus K --job NAME -- COMMAND...`` takes K free device indices out of the N visible ones (the
``CUDA_VISIBLE_DEVICES`` entries if set, else the lines of ``nvidia-smi -L``), holding an exclusive ``flock`` on one
lock file per index, and replaces itself with COMMAND with ``CUDA_VISIBLE_DEVICES`` set to exactly those devices.
The lock files stay open in COMMAND (and its children), so the slots are freed when it ends, also when it is killed.
Busy slots are waited for; fewer than K devices in all is an error at once, never a silent shrink. Under SLURM with
GPUs assigned the scheduler's devices are used as given. With no GPU at all (N = 0) COMMAND runs unchanged: the
workflow's no-GPU paths (CPU training, ``"not measured: no GPU"``) must keep working.

A GPU may be shared: ``--jobs-per-gpu N`` (or ``$HOT_GPU_JOBS_PER_GPU``; default 1) lets up to N such jobs run on one
device at once, each holding a shared ``flock`` on the device's lock file and an exclusive one on one of its N slot
files, so there are never more than N on a device; jobs are spread over the devices before any device takes a second.
A job with N = 1 (kernel tests, timings) holds the device's lock exclusively: it waits for the sharing jobs to end,
and they wait for it; while one waits, no sharing job starts (it would otherwise wait for as long as sharing jobs
overlap). Use one N per machine: a job counts only against the slots of its own N.

A sharing job may time its work as if alone: ``--steps-alone`` sets ``$HOT_GPU_STEPS_LOCK`` to a lock file of its
device, and :func:`steps_alone` (the training loop's timed steps and evaluation) holds it exclusively, so that of the
jobs sharing a GPU only one computes on it at a time while the others start up, load, evaluate on the CPU or write
checkpoints. The smoke preset measures step times this way with its start-up costs overlapped.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

SLURM_GPU_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
JOBS_PER_GPU_VARIABLE = "HOT_GPU_JOBS_PER_GPU"
STEPS_LOCK_VARIABLE = "HOT_GPU_STEPS_LOCK"
EXCLUSIVE_WAITING = "exclusive-waiting.lock"  # held by a job waiting for GPUs to itself: sharing jobs let it go first


class SlotError(RuntimeError):
    """Fewer devices exist than the job needs (the message is the one line to show)."""


def _entries(value: str) -> list[str]:
    return [e.strip() for e in value.split(",") if e.strip()]


def visible_devices(env: Mapping[str, str]) -> list[str]:
    """The device ids a job may use, in CUDA's order: ``CUDA_VISIBLE_DEVICES`` if set, else nvidia-smi's GPUs."""
    if "CUDA_VISIBLE_DEVICES" in env:
        return _entries(env["CUDA_VISIBLE_DEVICES"])
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):  # no driver or no nvidia-smi: a machine without GPUs
        return []
    return [str(i) for i, line in enumerate(line for line in listed.splitlines() if line.startswith("GPU "))]


def scheduler_devices(env: Mapping[str, str]) -> int | None:
    """How many GPUs SLURM gave this job, or None when no scheduler assigns devices (then we allocate)."""
    if "SLURM_JOB_ID" not in env:
        return None
    if "CUDA_VISIBLE_DEVICES" in env:
        return len(_entries(env["CUDA_VISIBLE_DEVICES"]))
    for name in SLURM_GPU_VARIABLES:
        if name in env:
            return len(_entries(env[name]))
    if "SLURM_GPUS_ON_NODE" in env:
        return int(env["SLURM_GPUS_ON_NODE"] or 0)
    return None


def default_lock_dir() -> Path:
    """One directory per machine and user: GPUs belong to a machine, so the locks live in its temporary directory."""
    return Path(os.environ.get("HOT_GPU_SLOTS_DIR") or Path(tempfile.gettempdir()) / f"hot-gpu-slots-{os.getuid()}")


def jobs_per_gpu(env: Mapping[str, str]) -> int:
    """The per-GPU job share from ``$HOT_GPU_JOBS_PER_GPU`` (default 1: a job has its GPUs to itself)."""
    value = env.get(JOBS_PER_GPU_VARIABLE, "").strip() or "1"
    if not value.isdigit() or int(value) < 1:
        raise SlotError(f"hot slots: {JOBS_PER_GPU_VARIABLE} must be a whole number >= 1, got {value!r}")
    return int(value)


def _try_lock(path: Path, job: str, shared: bool = False) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if not shared:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {job}\n".encode())  # who holds the slot, for a person looking at the directory
    return fd


def _try_device(lock_dir: Path, index: int, slot: int, per_gpu: int, job: str) -> list[int] | None:
    """The locks that put a job on device ``index``: the device's own, exclusive (``per_gpu`` 1), or shared and
    slot ``slot`` of its ``per_gpu``; None where they are held."""
    if per_gpu == 1:
        fd = _try_lock(lock_dir / f"gpu{index}.lock", job)
        return None if fd is None else [fd]
    device = _try_lock(lock_dir / f"gpu{index}.lock", job, shared=True)
    if device is None:  # a job that needs the device to itself holds it
        return None
    fd = _try_lock(lock_dir / f"gpu{index}.slot{slot}.lock", job)
    if fd is None:
        os.close(device)
        return None
    return [device, fd]


def try_acquire(
    k: int, devices: Sequence[str], lock_dir: Path, job: str, per_gpu: int = 1
) -> tuple[list[str], list[int]] | None:
    """One attempt at :func:`acquire`: k devices and their lock fds, or None (nothing held) where they are busy."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    if per_gpu > 1:
        waiting = _try_lock(lock_dir / EXCLUSIVE_WAITING, job, shared=True)
        if waiting is None:
            return None
        os.close(waiting)
    held: dict[int, list[int]] = {}
    for slot in range(per_gpu):  # slot 0 of every device first: shared jobs spread over the devices
        for index in range(len(devices)):
            if index in held:
                continue
            fds = _try_device(lock_dir, index, slot, per_gpu, job)
            if fds is not None:
                held[index] = fds
                if len(held) == k:
                    return [devices[i] for i in held], [fd for fds in held.values() for fd in fds]
    for fds in held.values():  # all or nothing: two jobs each holding part of what the other needs would deadlock
        for fd in fds:
            os.close(fd)
    return None


def acquire(
    k: int, devices: Sequence[str], lock_dir: Path, job: str, poll_s: float = 1.0, per_gpu: int = 1
) -> tuple[list[str], list[int]]:
    """Lock k of ``devices`` (waiting while they are busy), each to itself or (``per_gpu`` > 1) as one of at most
    ``per_gpu`` jobs on it; returns the chosen device ids and the open lock fds.

    The fds hold the locks: they are released when they are closed, by the process or by its exit."""
    if k > len(devices):
        raise SlotError(f"hot slots: job {job} needs {k} GPUs but only {len(devices)} are visible")
    waited = False
    first = None  # a job that needs its GPUs to itself goes before sharing jobs that start after it
    while True:
        found = try_acquire(k, devices, lock_dir, job, per_gpu)
        if found is not None:
            if first is not None:
                os.close(first)
            return found
        if per_gpu == 1 and first is None:
            first = _try_lock(lock_dir / EXCLUSIVE_WAITING, job)
        if not waited:
            share = f" (up to {per_gpu} jobs a GPU)" if per_gpu > 1 else ""
            print(f"hot slots: job {job} waits for {k} of {len(devices)} GPUs{share}", file=sys.stderr, flush=True)
            waited = True
        time.sleep(poll_s)


def slot_environment(
    gpus: int,
    job: str,
    lock_dir: Path | None,
    env: dict[str, str],
    per_gpu: int | None = None,
    steps_alone: bool = False,
) -> tuple[dict[str, str], list[int]]:
    """The environment a job needing ``gpus`` GPUs runs in (``CUDA_VISIBLE_DEVICES`` set to the slots it took), and
    the lock file descriptors it must hold until it ends; ``SlotError`` where the request cannot be met.
    ``per_gpu``: the per-GPU job share (None: ``$HOT_GPU_JOBS_PER_GPU``, default 1); ``steps_alone``: a shared job
    is given its first device's steps lock (``$HOT_GPU_STEPS_LOCK``, see :func:`steps_alone`)."""
    env = dict(env)
    per_gpu = jobs_per_gpu(env) if per_gpu is None else per_gpu
    if per_gpu < 1:
        raise SlotError(f"hot slots: job {job}: --jobs-per-gpu must be >= 1, got {per_gpu}")
    if gpus <= 0:
        return env, []
    given = scheduler_devices(env)
    if given is not None:
        if given < gpus:
            raise SlotError(f"hot slots: job {job} needs {gpus} GPUs but SLURM gave it {given}")
        return env, []
    devices = visible_devices(env)
    if not devices:
        print(f"hot slots: no GPU visible; job {job} runs without one", file=sys.stderr, flush=True)
        return env, []
    lock_dir = lock_dir or default_lock_dir()
    chosen, fds = acquire(gpus, devices, lock_dir, job, per_gpu=per_gpu)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
    if steps_alone and per_gpu > 1:
        env[STEPS_LOCK_VARIABLE] = str(lock_dir / f"gpu{devices.index(chosen[0])}.steps.lock")
    share = f" (shared: up to {per_gpu} jobs a GPU)" if per_gpu > 1 else ""
    print(f"hot slots: job {job} on CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}{share}", file=sys.stderr,
          flush=True)  # fmt: skip
    return env, fds


def steps_alone_requested(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this job's computing takes its GPU's steps lock (:func:`steps_alone`)."""
    return bool(env.get(STEPS_LOCK_VARIABLE))


@contextlib.contextmanager
def steps_alone(env: Mapping[str, str] = os.environ) -> Iterator[bool]:
    """Hold ``$HOT_GPU_STEPS_LOCK`` exclusively for the block (yields True), waiting while another job holds it;
    without the variable, nothing (yields False). The holder should let its device finish and return its cached
    memory before the block ends: the next job computes in that memory."""
    path = env.get(STEPS_LOCK_VARIABLE)
    if not path:
        yield False
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)  # closing releases the lock
