import pytest

# A run that takes a few seconds on two CPU cores: the synthetic dataset, the tiny ViT, one batch per epoch.
TINY = {
    "dataset": "synthetic",
    "model": "vit_tiny_fmnist",
    "recipe": "embedded_pretrain",
    "epochs": 2,
    "batch_size": 16,
    "max_train_batches": 1,
    "train_subset": 64,
    "test_subset": 32,
    "int8_warmup_epochs": 1,
    "device": "cpu",
}


@pytest.fixture
def tiny() -> dict:
    return dict(TINY)
