"""What both analysis commands share: building timm models by name, argument types, writing results atomically.

torch and timm are imported where a model is built, so the command modules can use the rest while building parsers.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn


def create_model(name: str, num_classes: int = 100, device: str = "cpu") -> nn.Module:
    """A timm model with random weights (never pretrained: the analyses need shapes, not values)."""
    import timm
    import torch

    if not timm.is_model(name):
        close = timm.list_models(f"*{name.split('_')[0]}*")[:8]
        hint = f"; similar names: {', '.join(close)}" if close else ""
        raise ValueError(f"unknown timm model {name!r}{hint}")
    with torch.device(device):
        return timm.create_model(name, pretrained=False, num_classes=num_classes)


def default_image_size(model: nn.Module) -> int:
    """The square input side the model was defined for (timm's pretrained_cfg), 224 if unknown."""
    cfg = getattr(model, "pretrained_cfg", None) or {}
    return int(cfg.get("input_size", (3, 224, 224))[-1])


def positive_int(text: str) -> int:
    """An argparse type: argparse names the flag in its error (exit 2), before any model is built."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_results(path: str | Path, payload: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
    """``payload`` as JSON at ``path`` and ``rows`` as a CSV beside it, each replaced atomically."""
    path = Path(path)
    _atomic_write(path, json.dumps(payload, indent=2) + "\n")
    if rows:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
        writer.writeheader()
        writer.writerows(rows)
        _atomic_write(path.with_suffix(".csv"), buffer.getvalue())
