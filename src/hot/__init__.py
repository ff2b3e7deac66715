"""HOT: Hadamard-based Optimized Training (CVPR 2025), a reference implementation.

    import hot
    model = hot.convert(model, hot.HOTConfig(abc=True, lqs=True))

See ``docs/method.md`` for the data flow and the names used here.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each public name and the module defining it, imported on first use: light commands (``hot slots``, which wraps
# every training job of the workflow, ``hot tables``, ``hot plan``) then start without importing torch.
_EXPORTS = {
    "METHODS": "config",
    "PRESETS": "config",
    "HOTConfig": "config",
    "preset": "config",
    "convert": "convert",
    "hot_layers": "convert",
    "load_plain_state_dict": "convert",
    "set_config": "convert",
    "state_dict_for_plain": "convert",
    "unconvert": "convert",
    "TokenGrid": "hla",
    "apply_lora": "lora",
    "HOTConv2d": "modules",
    "HOTLinear": "modules",
    "set_rounding_rank": "rounding",
}

__all__ = sorted([*_EXPORTS, "lqs"])

if TYPE_CHECKING:  # for type checkers and editors; "X as X" marks a re-export
    from . import lqs as lqs
    from .config import METHODS as METHODS
    from .config import PRESETS as PRESETS
    from .config import HOTConfig as HOTConfig
    from .config import preset as preset
    from .convert import convert as convert
    from .convert import hot_layers as hot_layers
    from .convert import load_plain_state_dict as load_plain_state_dict
    from .convert import set_config as set_config
    from .convert import state_dict_for_plain as state_dict_for_plain
    from .convert import unconvert as unconvert
    from .hla import TokenGrid as TokenGrid
    from .lora import apply_lora as apply_lora
    from .modules import HOTConv2d as HOTConv2d
    from .modules import HOTLinear as HOTLinear
    from .rounding import set_rounding_rank as set_rounding_rank


def __getattr__(name: str) -> Any:
    if name == "lqs":
        return importlib.import_module(".lqs", __name__)
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hot' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """``hot`` itself. Importing a submodule binds it to its name in the package; ``hot.convert`` names the
    function, not the module ``hot.convert`` it lives in, whichever of the two is imported first."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == name:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
