"""``hot info``: what this installation has."""

from __future__ import annotations

import argparse
import json
import platform

import torch

import hot


def environment() -> dict[str, object]:
    """Versions and devices, recorded in every results file."""
    info: dict[str, object] = {
        "hot": hot.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        info["gpu_capability"] = f"{major}.{minor}"
        info["cuda_driver"] = torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else None
    try:
        from hot.backends import get_backend

        get_backend("real")
        info["hot_kernels"] = "available"
    except RuntimeError as err:
        info["hot_kernels"] = f"unavailable: {err}"
    return info


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults()


def run(args: argparse.Namespace) -> int:
    print(json.dumps(environment(), indent=2))
    return 0
