"""Swap eligible nn.Linear / nn.Conv2d of any model (timm's included) for HOT layers, and back."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Sequence

from torch import nn

from .config import HOTConfig
from .hla import TokenGrid
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
    token_grid: TokenGrid | None = None,
) -> nn.Module:
    """Replace, in place, every eligible layer of ``model`` by its HOT version; returns ``model``.

    Eligible: plain nn.Linear and non-grouped, zero-padded nn.Conv2d with a trainable weight
    (``include_frozen`` also takes frozen ones, which then compute only g_x), whose qualified name
    matches no ``exclude`` glob and for which ``module_filter(name, module)`` is true. Layers are
    numbered in module order; the number is part of each layer's rounding-hash key.

    ``token_grid``: how the (B, T, C) inputs of the Linear layers are laid out (prefix tokens, then an
    H×W grid), which ``hla_blocking="spatial"`` windows. By default it is read from the model
    (:func:`model_token_grid`: timm's vision transformers); convolutions take theirs from their output.
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
    grid = token_grid if token_grid is not None else model_token_grid(model)
    for name, mod in targets:
        cls = HOTLinear if isinstance(mod, nn.Linear) else HOTConv2d
        layer = cls.from_float(mod, config, index)
        layer.hot_name = name
        layer.hot_grid = grid if cls is HOTLinear else None
        _set_submodule(model, name, layer)
        index += 1
    return model


def model_token_grid(model: nn.Module) -> TokenGrid | None:
    """The token layout of a timm-style vision transformer inside ``model``: ``num_prefix_tokens`` (class,
    register, distillation tokens) followed by ``patch_embed.grid_size``; None where no module has both."""
    for mod in model.modules():
        prefix = getattr(mod, "num_prefix_tokens", None)
        grid_size = getattr(getattr(mod, "patch_embed", None), "grid_size", None)
        if isinstance(prefix, int) and grid_size is not None and len(grid_size) == 2:
            return TokenGrid(prefix, int(grid_size[0]), int(grid_size[1]))
    return None


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
