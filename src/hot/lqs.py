"""Layer-wise quantiser selection: per-token or per-tensor scales for Q4(HT(g_y)), decided per layer.

Calibrate on the first training batch(es) with HOT active: every HOT layer with ``lqs`` on records
the round-to-nearest error of both choices on A = HT(g_y), and picks per-token when
``e_token < lqs_ratio · e_tensor``. Decisions are saved with the run (JSON, layer name -> choice) and
loaded on resume, so a resumed run uses the same quantisers.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from torch import nn

from .convert import hot_layers
from .results import write_json_atomic


def _lqs_layers(model: nn.Module) -> list:
    return [(name, layer) for name, layer in hot_layers(model) if layer.hot_config.lqs]


@contextlib.contextmanager
def calibrate(model: nn.Module) -> Iterator[None]:
    """Record LQS errors during the backward passes run inside the block, then decide."""
    layers = _lqs_layers(model)
    if not layers:
        raise ValueError("no HOT layer has lqs enabled: convert with HOTConfig(lqs=True) first")
    for _, layer in layers:
        s = layer.hot_state
        s.calibrating, s.lqs_error_token, s.lqs_error_tensor = True, 0.0, 0.0
    try:
        yield
    finally:
        for _, layer in layers:
            s = layer.hot_state
            s.calibrating = False
            if s.lqs_error_tensor > 0:
                token_wins = s.lqs_error_token < layer.hot_config.lqs_ratio * s.lqs_error_tensor
                s.gx_granularity = "per_token" if token_wins else "per_tensor"


def decisions(model: nn.Module) -> dict[str, str | None]:
    """Layer name -> ``per_token`` / ``per_tensor`` (None where no backward ran during calibration)."""
    return {name: layer.hot_state.gx_granularity for name, layer in _lqs_layers(model)}


def save_decisions(model: nn.Module, path: str | os.PathLike) -> None:
    """Write the decisions as JSON, atomically (a temporary file renamed over ``path``)."""
    write_json_atomic(Path(path), decisions(model), sort_keys=True)


def load_decisions(model: nn.Module, path: str | os.PathLike) -> None:
    """Apply saved decisions; every LQS layer must be named in the file and every name must exist."""
    saved = json.loads(Path(path).read_text())
    layers = dict(_lqs_layers(model))
    missing, unknown = sorted(set(layers) - set(saved)), sorted(set(saved) - set(layers))
    if missing or unknown:
        raise ValueError(f"LQS decisions in {path} do not match the model: missing {missing}, unknown {unknown}")
    for name, choice in saved.items():
        if choice not in ("per_token", "per_tensor", None):
            raise ValueError(f"LQS decision for {name!r} in {path} must be per_token or per_tensor, got {choice!r}")
        layers[name].hot_state.gx_granularity = choice
