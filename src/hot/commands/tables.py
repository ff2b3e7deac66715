"""``hot tables``: render one paper table (Markdown, CSV, LaTeX, data JSON, figure) or the summary.

    hot tables table2 --input r16@s0=results/ablations/.../metrics.json --input gbops=results/analysis/gbops.json \
        --options '{"gbops_rel_tol": 0.01}' --out-dir paper_tables --data-out results/tables/table2.json \
        --figure paper_tables/figures/table2.png
    hot tables summary --input table1=results/tables/table1.json ... --out-dir paper_tables
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

from ..results import write_text_atomic
from ..tables import TABLES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", choices=[*TABLES, "summary"], help="which table to build")
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="ROLE=PATH",
        help="a results file and its role in the table (repeatable)",
    )
    parser.add_argument("--options", default="{}", help="JSON object: check tolerances and table options")
    parser.add_argument("--out-dir", type=Path, default=Path("paper_tables"), help="where TABLE.md/.csv/.tex go")
    parser.add_argument("--data-out", type=Path, help="the table as JSON (rows and checks), for the summary")
    parser.add_argument("--figure", type=Path, help="write the table's figure (PNG) here")


def run(args: argparse.Namespace) -> int:
    from ..tables.common import parse_inputs
    from ..tables.render import csv_text, latex, markdown

    inputs = parse_inputs(args.input)
    if args.table == "summary":
        from ..tables.summary import markdown as summary_markdown

        write_text_atomic(args.out_dir / "summary.md", summary_markdown(inputs))
        return 0
    try:
        options = json.loads(args.options)
    except json.JSONDecodeError as err:
        raise ValueError(f"--options: not valid JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(options, dict):
        raise ValueError(f"--options must be a JSON object, got {args.options!r}")
    module = importlib.import_module(f"hot.tables.{args.table}")
    table = module.build(inputs, options, args.figure)
    write_text_atomic(args.out_dir / f"{table.name}.md", markdown(table))
    write_text_atomic(args.out_dir / f"{table.name}.csv", csv_text(table))
    write_text_atomic(args.out_dir / f"{table.name}.tex", latex(table))
    if args.data_out is not None:
        write_text_atomic(args.data_out, json.dumps(table.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return 0
