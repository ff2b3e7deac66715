"""The ``hot`` command line. Each subcommand is a module ``hot.commands.<name>`` with ``add_arguments(parser)`` and
``run(args) -> int``, imported only when that command runs; command modules import heavy libraries (timm,
torchvision, snakemake) only inside ``run``, and computation modules hold no argument parsing.

An error that ends a command is one line on stderr, ``hot COMMAND: error: ...``, exit 2 for bad input and 1 for a
failed run (:mod:`hot.errors`); ``--debug`` raises it with its traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import exit_code, is_bad_input, one_line

COMMANDS: dict[str, str] = {
    "info": "versions, devices and whether the hot-kernels extension loads",
    "train": "train a timm model with a HOT method or a baseline",
    "data": "find or fetch a dataset where training reads it (hot data fetch)",
    "memory": "training-memory analysis: the paper's accounting and measured bytes",
    "gbops": "backward-pass bit-operations (supplement Tables 2 and 5)",
    "latency": "per-layer backward latency on a GPU",
    "bench": "HOT against bf16 / torchao on a Hopper GPU: per-layer, kernels, end-to-end; one JSON",
    "tables": "regenerate the paper's tables from results",
    "plan": "a preset's training cost in GPU-hours per table, from a smoke run's measured step times",
    "slots": "run a command on GPUs of its own (CUDA_VISIBLE_DEVICES), waiting while they are busy",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="hot", description="HOT: Hadamard-based Optimized Training")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = None
    for name, help_text in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        command_parser.add_argument(
            "--debug",
            action="store_true",
            help="on an error, raise it with its traceback (else: one line, exit 2 for bad input, 1 for a failed run)",
        )
        if argv and argv[0] == name:
            chosen = importlib.import_module(f"hot.commands.{name}")
            chosen.add_arguments(command_parser)
    args = parser.parse_args(argv)
    try:
        return int(chosen.run(args) or 0)
    except Exception as err:  # SystemExit (a stopped run's code) and KeyboardInterrupt pass
        if args.debug:
            raise
        hint = "" if is_bad_input(err) else " (--debug shows the traceback)"
        print(f"hot {args.command}: error: {one_line(err)}{hint}", file=sys.stderr)
        return exit_code(err)


if __name__ == "__main__":
    sys.exit(main())
