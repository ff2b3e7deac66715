"""``hot train --out DIR [--config FILE.yaml ...] [--set KEY=VALUE ...] [--resume/--no-resume]``."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", required=True, help="output directory (metrics.json, checkpoint.pt, model.pt, lqs.json)"
    )
    parser.add_argument(
        "--config", action="append", default=[], metavar="FILE.yaml", help="config file; several merge left to right"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override one key after the files (dotted keys for nested, YAML values)",
    )
    parser.add_argument(
        "--resume",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="resume from OUT/checkpoint.pt (default: when it exists)",
    )


def run(args: argparse.Namespace) -> int:
    from ..train.config import load_config
    from ..train.loop import train

    # load_config reports unreadable files, bad YAML and bad values as ValueError: bad input, as hot.cli reports it
    train(load_config(args.config, args.overrides), args.out, resume=args.resume)
    return 0
