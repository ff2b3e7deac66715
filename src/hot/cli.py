"""The ``hot`` command line. Each subcommand lives in its own module, imported only when used.

A command module provides ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("hot.commands.info", "versions, devices and whether the hot-kernels extension loads"),
    "train": ("hot.train.cli", "train a timm model with a HOT method or a baseline"),
    "memory": ("hot.commands.memory", "training-memory analysis: the paper's accounting and measured bytes"),
    "gbops": ("hot.commands.gbops", "backward-pass bit-operations (supplement Tables 2 and 5)"),
    "latency": ("hot.bench.latency", "per-layer backward latency on a GPU"),
    "bench": (
        "hot.bench.hopper",
        "HOT against bf16 / torchao on a Hopper GPU: per-layer, kernels, end-to-end; one JSON",
    ),
    "tables": ("hot.tables.cli", "regenerate the paper's tables from results"),
    "slots": ("hot.gpu_slots", "run a command on GPUs of its own (CUDA_VISIBLE_DEVICES), waiting while they are busy"),
}


def _available() -> dict[str, tuple[str, str]]:
    found = {}
    for name, spec in COMMANDS.items():
        try:
            if importlib.util.find_spec(spec[0]) is not None:
                found[name] = spec
        except ModuleNotFoundError:
            continue
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="hot", description="HOT: Hadamard-based Optimized Training")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = None
    for name, (module_name, help_text) in _available().items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if argv and argv[0] == name:  # import only the command that runs (some pull in timm or snakemake)
            chosen = importlib.import_module(module_name)
            chosen.add_arguments(command_parser)
    args = parser.parse_args(argv)
    return int(chosen.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
