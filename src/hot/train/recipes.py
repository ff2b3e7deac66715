"""Named training recipes: supplement Appendix B, the authors' ViT script, and the CPU (embedded) presets.

A recipe is a mapping of TrainConfig keys; any key given in a config or with ``--set`` wins over it.
Values the supplement does not state (weight decay, MultiStepLR milestones, the embedded presets) are
this project's choices and are listed in docs/training.md.
"""

from __future__ import annotations

import copy
from typing import Any

_ADAMW = {"optimizer": "adamw", "weight_decay": 0.05}
_FINETUNE = {**_ADAMW, "batch_size": 128, "epochs": 50, "scheduler": "cosine", "int8_warmup_epochs": 0}
_PRETRAIN = {"batch_size": 128, "epochs": 200, "int8_warmup_epochs": 25}

RECIPES: dict[str, dict[str, Any]] = {
    # Fine-tuning (supplement Appendix B: 50 epochs, AdamW, cosine annealing).
    "vit_finetune": {**_FINETUNE, "lr": 2.5e-4},
    "efficientformer_finetune": {**_FINETUNE, "lr": 2.5e-4},
    "efficientnetv2_finetune": {**_FINETUNE, "lr": 1e-3, "batch_size": 64},
    # The authors' public ViT-B / CIFAR-100 script (its learning rate is 10x below the supplement's).
    "vit_finetune_official": {
        **_FINETUNE,
        "lr": 2.5e-5,
        "eps": 1e-11,
        "weight_decay": 0.01,
        "scheduler": "cosine_restarts",
        "scheduler_args": {"T_0": 20, "T_mult": 2, "eta_min": 1e-6},
        "mixup": 0.8,
        "cutmix": 1.0,
        "label_smoothing": 0.1,
        "seed": 2024,
    },
    # Pre-training (200 epochs, batch 128, every quantiser at INT8 for the first 25 epochs).
    "resnet_pretrain": {
        **_PRETRAIN,
        "optimizer": "sgd",
        "lr": 0.1,
        "momentum": 0.9,
        "weight_decay": 5e-4,
        "scheduler": "multistep",
        "scheduler_args": {"milestones": [100, 150], "gamma": 0.1},
    },
    "efficientformer_pretrain": {**_PRETRAIN, **_ADAMW, "lr": 1e-3, "scheduler": "cosine"},
    "vit_pretrain": {**_PRETRAIN, **_ADAMW, "lr": 1e-4, "scheduler": "cosine"},
    # Embedded (CPU, Fashion-MNIST): the same shapes of recipe, scaled to minutes on two cores.
    "embedded_pretrain": {
        **_ADAMW,
        "batch_size": 128,
        "epochs": 4,
        "lr": 1e-3,
        "scheduler": "cosine",
        "int8_warmup_epochs": 1,
    },
    "embedded_finetune": {**_FINETUNE, "epochs": 3, "lr": 5e-4},
}


def recipe_values(name: str) -> dict[str, Any]:
    """A copy of a recipe's keys (with ``recipe`` itself), for merging under a config."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; known: {sorted(RECIPES)}")
    return {"recipe": name, **copy.deepcopy(RECIPES[name])}
