"""The paper's published numbers (``data/paper_values.yaml``): the one place they are written down."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml


@functools.cache
def paper_values() -> dict[str, Any]:
    """Tables 1-5, the latency and memory figures and the headline claims, as transcribed."""
    text = resources.files("hot").joinpath("data/paper_values.yaml").read_text()
    return yaml.safe_load(text)
