"""``hot info``: what this installation has."""

from __future__ import annotations

import argparse
import json

from ..results import environment


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults()


def run(args: argparse.Namespace) -> int:
    print(json.dumps(environment(), indent=2))
    return 0
