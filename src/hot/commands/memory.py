"""``hot memory``: training memory of a timm model under FP, HOT and HOT+ABC, counted two ways (docs/memory.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..results import write_csv_atomic, write_json_atomic
from ._arguments import positive_int, split_list

ACCOUNTINGS = {
    "paper": "the authors' accounting: fp32 weights, gradients and AdamW's 2 moments of the trainable parameters, "
    "plus every Linear/Conv output (4 bytes per element; ABC's code size with ABC), with their qkv quirk",
    "measured": "what autograd saves for backward (deduplicated by storage) plus parameters, gradients and AdamW "
    "state; on CUDA also the peak allocated bytes of one training step",
}
DEVICES = ("cpu", "meta", "cuda")
AUTOCAST = ("none", "bf16", "fp16")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.description = (
        "Memory of one training step of --batch-size images (a timm model with random weights), in GB = 2^30 bytes. "
        + " ".join(f"{name}: {text}." for name, text in ACCOUNTINGS.items())
    )
    parser.add_argument("--model", required=True, help="timm model name")
    parser.add_argument("--batch-size", type=positive_int, default=256, help="images in the training step")
    parser.add_argument("--num-classes", type=positive_int, default=100, help="classifier outputs")
    parser.add_argument("--image-size", type=positive_int, default=None, help="input side (None: the model's own)")
    parser.add_argument("--methods", default="fp,hot,hot_abc", help="comma list of method presets (hot.PRESETS)")
    parser.add_argument("--accounting", default="paper,measured", help=f"comma list of {', '.join(ACCOUNTINGS)}")
    parser.add_argument(
        "--device", choices=DEVICES, default="meta", help="where 'measured' runs; meta counts without allocating"
    )
    parser.add_argument(
        "--autocast",
        choices=AUTOCAST,
        default="none",
        help="run the measured forward under torch.autocast in this dtype (cpu or cuda)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="results JSON, a CSV beside it (X.csv: the CSV, and X.json beside it)"
    )


def result_paths(out: Path) -> tuple[Path, Path]:
    """The JSON and CSV written for ``--out``: OUT and OUT with suffix .csv, or for an OUT ending in .csv, OUT with
    suffix .json and OUT (the JSON never overwrites the CSV)."""
    if out.suffix.lower() == ".csv":
        return out.with_suffix(".json"), out
    return out, out.with_suffix(".csv")


def run(args: argparse.Namespace) -> int:
    from ..analysis import memory
    from ..config import PRESETS
    from .info import environment

    methods, accountings = split_list(args.methods), split_list(args.accounting)
    unknown = [m for m in methods if m not in PRESETS] + [a for a in accountings if a not in ACCOUNTINGS]
    if unknown or not methods or not accountings:
        raise ValueError(
            f"unknown method/accounting {unknown}; --methods: {sorted(PRESETS)}, --accounting: {list(ACCOUNTINGS)}"
        )
    json_path, csv_path = result_paths(args.out)
    rows: list[dict[str, Any]] = []
    if "paper" in accountings:
        rows += memory.paper_accounting(args.model, args.batch_size, args.num_classes, methods, args.image_size)
    if "measured" in accountings:
        rows += memory.measured_accounting(
            args.model, args.batch_size, args.num_classes, methods, args.device, args.image_size, args.autocast
        )
    payload = {
        "command": "memory",
        "model": args.model,
        "batch_size": args.batch_size,
        "num_classes": args.num_classes,
        "gb": "2^30 bytes",
        "counted": {
            "per": f"one training step of {args.batch_size} image(s)",
            "unit": "GB = 2^30 bytes",
            **{name: ACCOUNTINGS[name] for name in accountings},
        },
        "rows": rows,
        "paper": memory.paper_reference(args.model, args.batch_size),
        "environment": environment(),
    }
    write_csv_atomic(csv_path, rows)
    write_json_atomic(json_path, payload)
    print(f"hot memory: {args.model}, one training step of {args.batch_size} image(s); GB = 2^30 bytes")
    for name in accountings:
        print(f"  {name}: {ACCOUNTINGS[name]}")
    for row in rows:
        print(
            f"{row['accounting']:>8} {row['method']:<12} batch {row['batch_size']:>4}: "
            f"activation {row['activation_gb']:.2f} GB, total {row['total_gb']:.2f} GB"
        )
    return 0
