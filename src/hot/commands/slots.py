"""``hot slots --gpus N [--jobs-per-gpu S [--steps-alone]] --job NAME -- COMMAND...``: run COMMAND on N GPUs of
its own, or shared with at most S-1 other jobs each (:mod:`hot.gpu_slots`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpus", type=int, required=True, help="how many GPUs the command needs (0: run it as is)")
    parser.add_argument("--job", required=True, help="the job's name, for messages")
    parser.add_argument("--jobs-per-gpu", type=int, default=None, help="how many jobs may share one GPU (default: "
                        "$HOT_GPU_JOBS_PER_GPU, else 1: the GPUs are the job's own)")  # fmt: skip
    parser.add_argument("--steps-alone", action="store_true", help="a shared job's training steps and evaluation "
                        "take the GPU to themselves (hot.gpu_slots.steps_alone)")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=None, help="lock directory (default: $HOT_GPU_SLOTS_DIR or a "
                        "per-user directory in the machine's temporary directory)")  # fmt: skip
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")


def run(args: argparse.Namespace) -> int:
    from ..gpu_slots import SlotError, slot_environment

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("hot slots: no command given", file=sys.stderr)
        return 2
    try:
        env, fds = slot_environment(
            args.gpus, args.job, args.dir, dict(os.environ), args.jobs_per_gpu, steps_alone=args.steps_alone
        )
    except SlotError as error:
        print(error, file=sys.stderr)
        return 1
    for fd in fds:  # the command inherits the locks and holds them until it (and its children) end
        os.set_inheritable(fd, True)
    try:
        os.execvpe(command[0], command, env)
    except OSError as error:
        print(f"hot slots: cannot run {command[0]}: {error}", file=sys.stderr)
        return 127
