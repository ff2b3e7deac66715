"""``hot data fetch``: find or fetch a dataset where training reads it, ahead of training.

    hot data fetch --dataset fashion_mnist --root data
    hot data fetch --dataset cifar100 --root data/cifar100 --out results/data/cifar100.json --allow-missing

Fashion-MNIST by its routes (the Debian package, torchvision), CIFAR-10/100 by torchvision where the network allows,
ImageNet found under ``--root`` or not (:func:`hot.train.data.fetch`); ``--synthetic`` (runs with ``synthetic:
true``) reads nothing and records the dataset ready. ``--out`` records the outcome as JSON:
``{"status": "ready", "found": WHERE}`` or ``{"status": "missing", "reason": "<dataset> not found at <path> (how to
get it: …)"}``. A missing dataset exits 1, or 0 with ``--allow-missing`` (the workflow's ``data`` rule, whose runs
on it are then not attempted).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..train.config import DATASETS, TrainConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    fetch = sub.add_parser("fetch", help="find or fetch a dataset under --root", description=__doc__)
    fetch.add_argument("--dataset", required=True, choices=DATASETS)
    fetch.add_argument("--root", default=TrainConfig.data_dir, help="the run's data_dir (default: %(default)s)")
    fetch.add_argument("--out", type=Path, help="write the outcome here as JSON")
    fetch.add_argument(
        "--synthetic",
        action="store_true",
        help="the runs make it (synthetic: true): read nothing",
    )
    fetch.add_argument("--allow-missing", action="store_true", help="a missing dataset exits 0 (recorded in --out)")


def run(args: argparse.Namespace) -> int:
    from ..train.data import fetch
    from ..train.sources import DatasetError, dataset_path, how_to_get

    try:
        found = fetch(args.dataset, args.root, args.synthetic)
    except DatasetError as err:
        print(f"hot data: {err}", file=sys.stderr)
        reason = f"{args.dataset} not found at {dataset_path(args.dataset, args.root)} (how to get it: "
        record = {"status": "missing", "reason": reason + how_to_get(args.dataset, args.root) + ")"}
    else:
        print(f"hot data: {args.dataset} is ready: {found}")
        record = {"status": "ready", "found": found}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps({"dataset": args.dataset, "data_dir": args.root, **record}, indent=2) + "\n")
        tmp.replace(args.out)
    if record["status"] == "missing":
        print(f"hot data: {record['reason']}", file=sys.stderr)
        return 0 if args.allow_missing else 1
    return 0
