"""Swap eligible nn.Linear / nn.Conv2d of any model (timm's included) for HOT layers, and back."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Sequence

from torch import nn

from .config import HOTConfig
from .modules import HOTConv2d, HOTLayerMixin, HOTLinear, conv_supported

ModuleFilter = Callable[[str, nn.Module], bool]


def hot_layers(model: nn.Module) -> Iterator[tuple[str, HOTLinear | HOTConv2d]]:
    """(qualified name, layer) of every HOT layer in ``model``, in module order."""
    for name, mod in model.named_modules():
        if isinstance(mod, HOTLayerMixin):
            yield name, mod


def _eligible(mod: nn.Module, include_frozen: bool) -> bool:
    if isinstance(mod, HOTLayerMixin) or not isinstance(mod, (nn.Linear, nn.Conv2d)):
        return False
    if type(mod) not in (nn.Linear, nn.Conv2d):
        return False  # subclasses (e.g. peft's or torchao's) carry their own forward
    if isinstance(mod, nn.Conv2d) and conv_supported(mod) is not None:
        return False
    return include_frozen or mod.weight.requires_grad


def convert(
    model: nn.Module,
    config: HOTConfig | None = None,
    *,
    module_filter: ModuleFilter | None = None,
    exclude: Sequence[str] = (),
    include_frozen: bool = False,
) -> nn.Module:
    """Replace, in place, every eligible layer of ``model`` by its HOT version; returns ``model``.

    Eligible: plain nn.Linear and non-grouped, zero-padded nn.Conv2d with a trainable weight
    (``include_frozen`` also takes frozen ones, which then compute only g_x), whose qualified name
    matches no ``exclude`` glob and for which ``module_filter(name, module)`` is true. Layers are
    numbered in module order; the number is part of each layer's rounding-hash key.
    """
    config = config or HOTConfig()
    if not isinstance(config, HOTConfig):
        raise TypeError(f"config must be a HOTConfig, got {type(config).__name__}")
    index = sum(1 for _ in hot_layers(model))
    targets = []
    for name, mod in model.named_modules():
        if not name or not _eligible(mod, include_frozen):
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in exclude):
            continue
        if module_filter is not None and not module_filter(name, mod):
            continue
        targets.append((name, mod))
    for name, mod in targets:
        cls = HOTLinear if isinstance(mod, nn.Linear) else HOTConv2d
        _set_submodule(model, name, cls.from_float(mod, config, index))
        index += 1
    return model


def unconvert(model: nn.Module) -> nn.Module:
    """Put plain nn.Linear / nn.Conv2d back (same parameters), in place; returns ``model``."""
    for name, mod in list(hot_layers(model)):
        _set_submodule(model, name, mod.to_float())
    return model


def set_config(model: nn.Module, **changes: object) -> None:
    """Change config fields of every HOT layer (e.g. ``gx_bits=8`` for the pre-training warm-up)."""
    for _, layer in hot_layers(model):
        layer.set_hot_config(layer.hot_config.replace(**changes))


def _set_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)
