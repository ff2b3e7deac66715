import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


@pytest.fixture(autouse=True)
def _deterministic_torch():
    torch.manual_seed(0)
    yield


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def build_config() -> ModuleType:
    """kernels/build_config.py: the sources and the compiler flags the hot-kernels extension is built with."""
    spec = importlib.util.spec_from_file_location("hot_kernels_build_config", KERNELS / "build_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
