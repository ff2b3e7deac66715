"""HOT: Hadamard-based Optimized Training (CVPR 2025), a reference implementation.

    import hot
    model = hot.convert(model, hot.HOTConfig(abc=True, lqs=True))

See ``docs/method.md`` for the data flow and the names used here.
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
import types as _types
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

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

if _TYPE_CHECKING:  # for type checkers and editors; "X as X" marks a re-export
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


def __getattr__(name: str) -> _Any:
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value  # looked up once
        return value
    try:  # a submodule (hot.backends, hot.rounding, hot.lqs ...), as an eager package would have it loaded
        return _importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    loaded = {n for n, v in globals().items() if isinstance(v, _types.ModuleType) and not n.startswith("_")}
    return sorted({*__all__, *loaded, "__version__"})


class _Package(_types.ModuleType):
    """``hot`` itself. Importing a submodule binds it to its name in the package; ``hot.convert`` names the
    function, not the module ``hot.convert`` it lives in, whichever of the two is imported first."""

    def __setattr__(self, name: str, value: _Any) -> None:
        if isinstance(value, _types.ModuleType) and _EXPORTS.get(name) == name:
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
