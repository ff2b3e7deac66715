"""``hot gbops``: bit-operations of the backward pass (operations × bits_a × bits_b), supplement Tables 2 and 5.

Every nn.Linear / nn.Conv2d is traced with a forward hook into its GEMM view (L positions per sample, O, I). A layer
HOT converts costs ``L·O·I`` operations on the g_x path at ``gx_bits`` (INT4 × INT4) and ``(L·r/16)·O·I`` on the g_w
path at ``gw_bits`` (INT8 × INT8: HLA keeps r of every 16 positions); FP costs ``2·L·O·I`` at FP32 × FP32. Layers HOT
leaves exact (grouped / depthwise convs) are not counted. docs/gbops.md compares the accountings with Table 2.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch import nn

from ..convert import model_token_grid
from ..hla import HLA_BLOCK, TokenGrid, hla_windows
from ..modules import conv_supported
from ..paper import paper_values
from .common import create_model, default_image_size, positive_int, split_list, write_results

FP32_BITS = (32, 32)
UNITS = {"1e9": 1e9, "2^30": float(2**30)}
OPS_PER_MAC = {"mac": 1, "flop": 2}


@dataclass(frozen=True)
class LayerShape:
    """One layer's GEMM view per sample; ``spatial``: L counts image positions (it scales with the input area);
    ``grid``: how those positions lie (prefix tokens + H×W), where known, for HLA's windows and their padding."""

    name: str
    kind: str
    L: int
    O: int  # noqa: E741
    I: int  # noqa: E741 (the paper's (L, O, I))
    converted: bool
    spatial: bool
    grid: TokenGrid | None = None


@dataclass(frozen=True)
class Accounting:
    """How bit-operations are counted (the defaults: per image, FLOPs, HOT's bit widths, no transform overhead)."""

    batch_size: int = 1
    ops: str = "flop"
    unit: str = "1e9"
    gx_bits: tuple[int, int] = (4, 4)
    gw_bits: tuple[int, int] = (8, 8)
    overhead_bits: tuple[int, int] | None = None  # Table 5's extra FLOPs, at these widths when counted
    hla_padding: bool = False  # HLA's projected rows as run (spatial windows, padding, prefix rows), not L·r/16
    skip: tuple[str, ...] = ()  # name prefixes left out (e.g. the stem and the heads)


def trace_shapes(model: nn.Module, image_size: int) -> list[LayerShape]:
    """(L, O, I) of every Linear / Conv2d in one forward of a single image on the meta device."""
    shapes: list[LayerShape] = []
    vit_grid = model_token_grid(model)

    def hook(name: str) -> Any:
        def record(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
            x = args[0]
            if isinstance(module, nn.Conv2d):
                kh, kw = module.kernel_size
                fan_in = module.in_channels // module.groups * kh * kw
                converted = conv_supported(module) is None
                grid = TokenGrid(0, output.shape[-2], output.shape[-1])
                shapes.append(LayerShape(name, "conv", grid.tokens, module.out_channels, fan_in, converted, True, grid))
            else:
                positions = x.numel() // x.shape[-1] // x.shape[0]
                grid = TokenGrid(0, x.shape[1], x.shape[2]) if x.dim() == 4 else None
                if x.dim() == 3 and vit_grid is not None and vit_grid.tokens == positions:
                    grid = vit_grid
                shapes.append(
                    LayerShape(
                        name, "linear", positions, module.out_features, module.in_features, True, x.dim() > 2, grid
                    )
                )

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if type(m) in (nn.Linear, nn.Conv2d)]
    try:
        with torch.no_grad():
            model(torch.empty(1, 3, image_size, image_size, device="meta"))
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def model_shapes(
    model_name: str, image_size: int | None = None, num_classes: int = 100
) -> tuple[list[LayerShape], int]:
    model = create_model(model_name, num_classes, device="meta").eval()
    size = image_size or default_image_size(model)
    try:
        return trace_shapes(model, size), size
    except RuntimeError as err:
        raise ValueError(f"{model_name} does not run at image size {size}: {err}") from err


def rescale_shapes(shapes: list[LayerShape], from_size: int, to_size: int) -> list[LayerShape]:
    """Shapes at another input side, for models timm cannot run there (EfficientFormer's attention is fixed at 7×7).

    Exact only where every spatial L scales by the area ratio to an integer; anything else raises.
    """
    out = []
    for s in shapes:
        if not s.spatial:
            out.append(s)
            continue
        scaled = s.L * to_size * to_size / (from_size * from_size)
        if scaled != int(scaled) or scaled < 1:
            raise ValueError(f"{s.name}: L = {s.L} at {from_size} does not scale to {to_size} exactly")
        grid = s.grid
        if grid is not None:
            side = [n * to_size / from_size for n in (grid.height, grid.width)]
            if any(n != int(n) or n < 1 for n in side) or grid.prefix:
                raise ValueError(f"{s.name}: grid {grid.describe()} at {from_size} does not scale to {to_size} exactly")
            grid = TokenGrid(0, int(side[0]), int(side[1]))
        out.append(replace(s, L=int(scaled), grid=grid))
    return out


def table5_flops(L: int, O: int, I: int, n: int = HLA_BLOCK, r: int = 8) -> dict[str, float]:  # noqa: E741
    """Supplement Table 5 for one layer: vanilla BP and the extra FLOPs of each HOT path (log base 2)."""
    log_n = math.log2(n)
    kept = L * r / n
    return {
        "vanilla_bp": 4 * L * I * O,
        "g_x": 2 * L * O * log_n + 2 * I * O * log_n + 2 * L * O + 2 * I * O,
        "g_w": 2 * L * I * log_n + 2 * L * O * log_n + 2 * I * kept + 2 * O * kept,
        "dequant": 2 * I * O + 2 * L * I,
    }


def _hla_positions(shape: LayerShape, rank: int, padding: bool) -> float:
    """Rows HLA projects a sample's L positions to: as run (``hla_blocking: spatial`` windows of the layer's grid,
    zero padding and exact prefix rows; 16-position strips where no grid is known), or ``L·r/16``."""
    if padding:
        return hla_windows(shape.L, "spatial", shape.grid).rows_per_sample(rank)
    return shape.L * rank / HLA_BLOCK


def backward_bops(shapes: list[LayerShape], method: str, rank: int, acc: Accounting) -> dict[str, float]:
    """Bit-operations of one backward pass, split into g_x, g_w and transform overhead, in ``acc.unit``."""
    per_mac = OPS_PER_MAC[acc.ops]
    parts = {"g_x": 0.0, "g_w": 0.0, "overhead": 0.0}
    for s in shapes:
        if not s.converted or s.name.startswith(acc.skip):
            continue
        L = s.L * acc.batch_size
        if method == "fp":
            parts["g_x"] += per_mac * L * s.O * s.I * math.prod(FP32_BITS)
            parts["g_w"] += per_mac * L * s.O * s.I * math.prod(FP32_BITS)
            continue
        kept = _hla_positions(s, rank, acc.hla_padding) * acc.batch_size
        parts["g_x"] += per_mac * L * s.O * s.I * math.prod(acc.gx_bits)
        parts["g_w"] += per_mac * kept * s.O * s.I * math.prod(acc.gw_bits)
        if acc.overhead_bits is not None:
            extra = table5_flops(L, s.O, s.I, HLA_BLOCK, rank)
            parts["overhead"] += (extra["g_x"] + extra["g_w"] + extra["dequant"]) * math.prod(acc.overhead_bits)
    unit = UNITS[acc.unit]
    result = {k: v / unit for k, v in parts.items()}
    result["total"] = sum(result.values())
    return result


def appendix_d() -> dict[str, Any]:
    """The Appendix D example (EfficientFormer-L1 stages.3.fc2): Table 5 against the published MFLOPs."""
    example = paper_values()["table5"]["example"]
    shape = example["shape"]
    readings = {}
    for label, L in (("L as stated", shape["L"]), ("L padded to 16-blocks", math.ceil(shape["L"] / 16) * 16)):
        flops = table5_flops(L, shape["O"], shape["I"])
        readings[label] = {
            "L": L,
            "vanilla_bp_mflops": flops["vanilla_bp"] / 1e6,
            "hot_overhead_mflops": (flops["g_x"] + flops["g_w"] + flops["dequant"]) / 1e6,
            **{f"{k}_mflops": v / 1e6 for k, v in flops.items() if k != "vanilla_bp"},
        }
    return {
        "layer": example["layer"],
        "shape": shape,
        "published": {"vanilla_bp_mflops": example["vanilla_bp_mflops"], "hot_mflops": example["hot_mflops"]},
        "computed": readings,
    }


CANDIDATE_SKIPS = {"all converted": (), "no stem, no heads": ("stem", "head")}


def candidate_table(shapes224: list[LayerShape]) -> list[dict[str, Any]]:
    """Every combination of the accounting choices for Table 2, with its worst relative error over the ranks."""
    rows = paper_values()["table2"]["rows"]
    by_size = {224: shapes224, 32: rescale_shapes(shapes224, 224, 32)}
    out = []
    for size, batch, ops, unit, overhead, padding, skip in itertools.product(
        (32, 224), (1, 128), OPS_PER_MAC, UNITS, (None, FP32_BITS), (False, True), CANDIDATE_SKIPS
    ):
        acc = Accounting(batch, ops, unit, overhead_bits=overhead, hla_padding=padding, skip=CANDIDATE_SKIPS[skip])
        values = [backward_bops(by_size[size], "hot", row["rank"], acc)["total"] for row in rows]
        errors = [v / row["gbops"] - 1 for v, row in zip(values, rows, strict=True)]
        out.append(
            {
                "image_size": size,
                "batch_size": batch,
                "ops": ops,
                "unit": unit,
                "overhead": "fp32" if overhead else "none",
                "hla_padding": padding,
                "layers": skip,
                "gbops": [round(v, 2) for v in values],
                "slope_per_rank": round(values[-2] - values[-1], 3),  # r = 2 minus r = 1
                "max_rel_error": round(max(errors, key=abs), 4),
            }
        )
    return sorted(out, key=lambda row: abs(row["max_rel_error"]))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="timm model name (random weights)")
    parser.add_argument("--ranks", default="16,8,4,2,1", help="HLA ranks r (comma list)")
    parser.add_argument("--image-size", type=positive_int, default=None, help="input side; default the model's own")
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--num-classes", type=positive_int, default=100)
    parser.add_argument("--method", choices=("hot", "fp"), default="hot")
    parser.add_argument("--ops", choices=sorted(OPS_PER_MAC), default="flop", help="count a MAC as 1 or 2 operations")
    parser.add_argument("--unit", choices=sorted(UNITS), default="1e9", help="what one GBOP is")
    parser.add_argument("--overhead", action="store_true", help="add Table 5's transform FLOPs at FP32 × FP32")
    parser.add_argument(
        "--candidates",
        action="store_true",
        help="also evaluate every candidate accounting against Table 2 (the model must be Table 2's)",
    )
    parser.add_argument("--out", required=True, help="results JSON (a CSV is written beside it)")


def run(args: argparse.Namespace) -> int:
    from ..commands.info import environment

    try:
        ranks = [int(r) for r in split_list(args.ranks)]
        if not ranks or any(not 1 <= r <= HLA_BLOCK for r in ranks):
            raise ValueError(f"--ranks must be integers in 1..{HLA_BLOCK}, got {args.ranks!r}")
        table2 = paper_values()["table2"]
        if args.candidates and args.model != table2["model"]:
            raise ValueError(f"--candidates compares with Table 2, which is {table2['model']}, not {args.model}")
        shapes, size = model_shapes(args.model, args.image_size, args.num_classes)
    except ValueError as err:
        print(f"hot gbops: error: {err}", file=sys.stderr)
        return 2
    acc = Accounting(args.batch_size, args.ops, args.unit, overhead_bits=FP32_BITS if args.overhead else None)
    published = {row["rank"]: row["gbops"] for row in table2["rows"]} if args.model == table2["model"] else {}
    rows = []
    for rank in ranks:
        bops = backward_bops(shapes, args.method, rank, acc)
        row: dict[str, Any] = {
            "model": args.model,
            "method": args.method,
            "rank": rank,
            "image_size": size,
            "batch_size": args.batch_size,
            **{f"{k}_gbops": round(v, 4) for k, v in bops.items()},
        }
        if rank in published:
            row["paper_gbops"] = published[rank]
            row["rel_error"] = round(bops["total"] / published[rank] - 1, 4)
        rows.append(row)
    payload: dict[str, Any] = {
        "command": "gbops",
        "model": args.model,
        "image_size": size,
        "accounting": {**asdict(acc), "method": args.method},
        "rows": rows,
        "layers": [asdict(s) for s in shapes],
        "table5_appendix_d": appendix_d(),
        "environment": environment(),
    }
    if args.candidates:
        payload["candidates"] = candidate_table(shapes if size == 224 else model_shapes(args.model, 224)[0])
    write_results(args.out, payload, rows)
    for row in rows:
        ref = f" (paper {row['paper_gbops']}, {row['rel_error']:+.1%})" if "paper_gbops" in row else ""
        print(f"r = {row['rank']:>2}: {row['total_gbops']:.2f} GBOPs{ref}")
    return 0
