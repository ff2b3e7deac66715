"""Training runner behind ``hot train``: timm models, HOT or a baseline, recipes of the paper, resumable runs.

from hot.train import load_config, train
train(load_config(["exp.yaml"], ["epochs=2"]), "runs/exp")

The package imports lazily (PEP 562): ``hot.train.config`` and ``hot.train.data``'s names are light to import
(the workflow reads them), and the training loop, which pulls in timm, loads only when ``train`` is asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "NonFiniteError": "hot.train.loop",
    "train": "hot.train.loop",
    "TrainConfig": "hot.train.config",
    "load_config": "hot.train.config",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hot.train' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
