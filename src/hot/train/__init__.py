"""Training runner behind ``hot train``: timm models, HOT or a baseline, recipes of the paper, resumable runs.

from hot.train import load_config, train
train(load_config(["exp.yaml"], ["epochs=2"]), "runs/exp")
"""

from .config import TrainConfig, load_config
from .loop import NonFiniteError, train

__all__ = ["NonFiniteError", "TrainConfig", "load_config", "train"]
