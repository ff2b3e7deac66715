"""``hot gbops``: bit-operations of a timm model's backward pass or training step (docs/gbops.md)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..hla import HLA_BLOCK
from ..results import write_csv_atomic, write_json_atomic
from ._arguments import positive_int, split_list

COUNTED = {
    "backward": "the backward pass (g_x and g_w GEMMs, plus HOT's FP32 transform and (de)quantisation work)",
    "step": "one training step (the FP32 forward GEMMs plus the backward pass)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.description = (
        "Count BOPs = operations × bits_a × bits_b over every Linear/Conv2d of a timm model (random weights): "
        "a GEMM counts one operation per multiply-add, FP32 = 32×32 bits, HOT's g_x INT4 = 4×4, its g_w INT8 = 8×8 "
        "on r of every 16 positions. GBOPs = 10^9 BOPs, for --batch-size images together (one step's batch). "
        "docs/gbops.md defines the count."
    )
    parser.add_argument("--model", required=True, help="timm model name")
    parser.add_argument("--ranks", default="16,8,4,2,1", help=f"HLA ranks r, integers in 1..{HLA_BLOCK} (--method hot)")
    parser.add_argument("--image-size", type=positive_int, default=None, help="input side (None: the model's own)")
    parser.add_argument("--batch-size", type=positive_int, default=1, help="images counted together")
    parser.add_argument("--num-classes", type=positive_int, default=100, help="classifier outputs")
    parser.add_argument("--method", choices=("hot", "fp"), default="hot", help="HOT's backward or the FP32 one")
    parser.add_argument(
        "--count", choices=sorted(COUNTED), default="backward", help="the backward pass, or forward + backward"
    )
    parser.add_argument("--out", type=Path, required=True, help="results JSON (a CSV is written beside it)")


def _ranks(text: str) -> list[int]:
    try:
        ranks = [int(r) for r in split_list(text)]
    except ValueError:
        ranks = []
    if not ranks or any(not 1 <= r <= HLA_BLOCK for r in ranks):
        raise ValueError(f"--ranks must be integers in 1..{HLA_BLOCK}, got {text!r}")
    return ranks


def paper_reference(model: str, method: str, count: str, batch_size: int, size: int) -> dict[int | None, float]:
    """The published value(s) this count can be compared with: Table 2 (HOT backward of one image, per rank) or the
    compute figure (one image's training step at r = 8, GBOPs); empty where the paper has none for it."""
    from ..paper import paper_values

    values = paper_values()
    if batch_size != 1:
        return {}
    table2, figure = values["table2"], values["compute_figure"]
    if method == "hot" and count == "backward" and model == table2["model"]:
        return {row["rank"]: row["gbops"] for row in table2["rows"]}
    if count == "step" and size == figure["image_size"]:
        for row in figure["rows"]:
            if row["model"] == model and row[method] is not None:
                return {figure["rank"] if method == "hot" else None: row[method] * 1e3}
    return {}


def run(args: argparse.Namespace) -> int:
    from ..analysis import gbops
    from .info import environment

    try:
        ranks = _ranks(args.ranks) if args.method == "hot" else [None]
        shapes, size = gbops.model_shapes(args.model, args.image_size, args.num_classes)
    except ValueError as err:
        print(f"hot gbops: error: {err}", file=sys.stderr)
        return 2
    published = paper_reference(args.model, args.method, args.count, args.batch_size, size)
    source = "Table 2" if args.count == "backward" else "the compute figure"
    counted = {
        "pass": args.count,
        "what": COUNTED[args.count],
        "batch_size": args.batch_size,
        "per": f"{args.batch_size} image(s) of {size}×{size} together",
        "unit": "GBOPs = 10^9 × operations × bits_a × bits_b (MACs for GEMMs)",
    }
    rows = []
    for rank in ranks:
        parts = gbops.count_gbops(shapes, args.method, rank or HLA_BLOCK, args.batch_size, args.count)
        row: dict[str, Any] = {
            "model": args.model,
            "method": args.method,
            "count": args.count,
            "image_size": size,
            "batch_size": args.batch_size,
            **({"rank": rank} if rank is not None else {}),
            **{f"{k}_gbops": round(v, 4) for k, v in parts.items()},
        }
        if rank in published:
            row["paper_gbops"] = published[rank]
            row["paper_source"] = source
            row["rel_error"] = round(parts["total"] / published[rank] - 1, 4)
        rows.append(row)
    payload: dict[str, Any] = {
        "command": "gbops",
        "model": args.model,
        "image_size": size,
        "method": args.method,
        "counted": counted,
        "rows": rows,
        "layers": [asdict(s) for s in shapes],
        "table5_appendix_d": gbops.appendix_d(),
        "environment": environment(),
    }
    write_csv_atomic(args.out.with_suffix(".csv"), rows)
    write_json_atomic(args.out, payload)
    print(
        f"hot gbops: {args.model}, {args.method.upper()}, counting {counted['what']}, "
        f"for {counted['per']}; {counted['unit']}"
    )
    if not published:
        print(
            "  (the paper publishes no number for this count: Table 2 is HOT's backward of one image of "
            "efficientformer_l1, the compute figure one image's training step at 224; docs/gbops.md)"
        )
    for row in rows:
        ref = (
            f"  (paper, {source}: {row['paper_gbops']:.2f}, ours {row['rel_error']:+.1%})"
            if "paper_gbops" in row
            else ""
        )
        label = f"r = {row['rank']:>2}" if "rank" in row else "FP"
        print(f"  {label}: {row['total_gbops']:.2f} GBOPs{ref}")
    return 0
