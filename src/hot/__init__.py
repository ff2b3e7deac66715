"""HOT: Hadamard-based Optimized Training (CVPR 2025), a reference implementation.

    import hot
    model = hot.convert(model, hot.HOTConfig(abc=True, lqs=True))

See ``docs/method.md`` for the data flow and the names used here.
"""

from . import lqs
from .config import METHODS, PRESETS, HOTConfig, preset
from .convert import convert, hot_layers, load_plain_state_dict, set_config, state_dict_for_plain, unconvert
from .hla import TokenGrid
from .lora import apply_lora
from .modules import HOTConv2d, HOTLinear
from .rounding import set_rounding_rank

__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "PRESETS",
    "HOTConfig",
    "HOTConv2d",
    "HOTLinear",
    "TokenGrid",
    "apply_lora",
    "convert",
    "hot_layers",
    "load_plain_state_dict",
    "lqs",
    "preset",
    "set_config",
    "set_rounding_rank",
    "state_dict_for_plain",
    "unconvert",
]
