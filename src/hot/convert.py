"""Swap eligible nn.Linear / nn.Conv2d of any model (timm's included) for HOT layers, and back."""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from .config import HOTConfig
from .hla import TokenGrid
from .modules import HOTConv2d, HOTLayerMixin, HOTLinear, conv_supported
from .recompute import pair_input_sources, unpair_input_sources

ModuleFilterFn = Callable[[nn.Module, str], bool]
_EXTRA_STATE = "_extra_state"  # torch's state-dict key of a module's get_extra_state()


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
    module_filter_fn: ModuleFilterFn | None = None,
    exclude: Sequence[str] = (),
    include_frozen: bool = False,
    token_grid: TokenGrid | None = None,
    module_filter: Callable[[str, nn.Module], bool] | None = None,
) -> nn.Module:
    """Replace, in place, every eligible layer of ``model`` by its HOT version; returns ``model``, or the new HOT
    layer where ``model`` itself is an eligible nn.Linear / nn.Conv2d (a module cannot replace itself in place).

    Eligible: plain nn.Linear and non-grouped, zero-padded nn.Conv2d with a trainable weight
    (``include_frozen`` also takes frozen ones, which then compute only g_x), whose qualified name
    matches no ``exclude`` glob (a list of names or patterns) and for which ``module_filter_fn(module, fqn)`` is
    true (torchao's order; ``model`` itself has fqn ``""``). ``module_filter(name, module)``, the reverse order, is
    a deprecated alias. Layers are numbered in module order; the number is part of each layer's rounding-hash key.
    A converted layer keeps everything of the module it replaces: parameters, buffers, hooks (their handles still
    remove them) and other attributes.

    A model that holds HOT layers already converts again only with the same config (its other eligible layers, e.g.
    ones added since); another config is a ``ValueError``: :func:`unconvert` first, or change fields of the layers
    with :func:`set_config`. A model left without any HOT layer raises a ``UserWarning``.

    With ``config.recompute_inputs`` other than ``none`` the converted layers are paired with the modules that make
    their inputs (:mod:`hot.recompute`); a warning says so where no layer of the model qualifies.
    ``token_grid``: how the (B, T, C) inputs of the Linear layers are laid out (prefix tokens, then an
    H×W grid), which ``hla_blocking="spatial"`` windows. By default it is read from the model
    (:func:`model_token_grid`: timm's vision transformers); convolutions take theirs from their output.
    """
    config = HOTConfig() if config is None else config
    if not isinstance(config, HOTConfig):
        raise TypeError(f"config must be a HOTConfig, got {type(config).__name__}")
    if isinstance(exclude, str) or not all(isinstance(pattern, str) for pattern in exclude):
        raise ValueError(f"exclude must be a list of module names or glob patterns, got {exclude!r}")
    if module_filter is not None:
        if module_filter_fn is not None:
            raise ValueError("pass module_filter_fn only (module_filter is its deprecated alias)")
        warnings.warn(
            "hot.convert(module_filter=fn(name, module)) is deprecated: pass module_filter_fn=fn(module, fqn), "
            "torchao's order",
            DeprecationWarning,
            stacklevel=2,
        )
        old = module_filter

        def module_filter_fn(mod: nn.Module, fqn: str) -> bool:
            return old(fqn, mod)

    others = sorted({repr(layer.hot_config) for _, layer in hot_layers(model) if layer.hot_config != config})
    if others:
        raise ValueError(
            f"the model already holds HOT layers of another config ({', '.join(others)}); call hot.unconvert(model) "
            "before converting with a new one, or hot.set_config(model, field=value, ...) to change fields"
        )
    index = sum(1 for _ in hot_layers(model))
    targets = []
    for name, mod in model.named_modules():
        if not _eligible(mod, include_frozen):
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in exclude):
            continue
        if module_filter_fn is not None and not module_filter_fn(mod, name):
            continue
        targets.append((name, mod))
    grid = token_grid if token_grid is not None else model_token_grid(model)
    for name, mod in targets:
        cls = HOTLinear if isinstance(mod, nn.Linear) else HOTConv2d
        layer = cls.from_float(mod, config, index)
        layer.hot_name = name
        layer.hot_grid = grid if cls is HOTLinear else None
        if not name:
            return layer
        _set_submodule(model, name, layer)
        index += 1
    if not pair_input_sources(model, config.recompute_inputs) and config.recompute_inputs != "none":
        warnings.warn(
            f"recompute_inputs={config.recompute_inputs!r} but no HOT layer qualifies (the fc2 of a timm Mlp with an "
            "elementwise activation and no dropout or norm between, the proj of a timm Attention with fused attention "
            "and no norm or gate before it; with 'all' also the qkv / fc1 of a timm Block after its LayerNorm): every "
            "layer keeps its input's codes",
            UserWarning,
            stacklevel=2,
        )
    if index == 0:
        warnings.warn(
            f"hot.convert converted no layer of {type(model).__name__}: none is a plain nn.Linear or zero-padded, "
            "non-grouped nn.Conv2d with a trainable weight that exclude and module_filter_fn leave (include_frozen "
            "takes frozen ones)",
            UserWarning,
            stacklevel=2,
        )
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
    """Put plain nn.Linear / nn.Conv2d back (same parameters, buffers, hooks and attributes), in place; returns
    ``model`` (the plain layer where ``model`` is a HOT layer). What only HOT layers hold is dropped: the config, the
    rounding-hash step counters and LQS decisions (a later :func:`convert` starts them afresh)."""
    if isinstance(model, HOTLayerMixin):
        return model.to_float()
    unpair_input_sources(model)
    for name, mod in list(hot_layers(model)):
        _set_submodule(model, name, mod.to_float())
    return model


def state_dict_for_plain(model: nn.Module) -> dict[str, torch.Tensor]:
    """``model.state_dict()`` without the HOT layers' extra state (step counters, LQS decisions): what the model
    holds as a plain model, which loads strictly into the unconverted architecture (timm's, or ``unconvert``'s)."""
    extra = {f"{name}.{_EXTRA_STATE}" if name else _EXTRA_STATE for name, _ in hot_layers(model)}
    return {k: v for k, v in model.state_dict().items() if k not in extra}


def load_plain_state_dict(model: nn.Module, state_dict: Mapping[str, Any], strict: bool = True) -> Any:
    """Load a plain model's ``state_dict`` into ``model``, converted or not: the HOT layers' extra state is not
    expected (each layer keeps its own step counter and LQS decision). ``strict`` as ``nn.Module.load_state_dict``,
    whose result (missing and unexpected keys) it returns."""
    extra = {f"{name}.{_EXTRA_STATE}" if name else _EXTRA_STATE for name, _ in hot_layers(model)}
    result = model.load_state_dict(state_dict, strict=False)
    missing = [k for k in result.missing_keys if k not in extra]
    if strict and (missing or result.unexpected_keys):
        raise RuntimeError(
            f"error loading a plain state dict into {type(model).__name__}: missing keys {missing}, "
            f"unexpected keys {result.unexpected_keys}"
        )
    return type(result)(missing, result.unexpected_keys)


def set_config(model: nn.Module, **changes: object) -> None:
    """Change config fields of every HOT layer (e.g. ``gx_bits=8`` for the pre-training warm-up); a new
    ``recompute_inputs`` pairs the layers with their sources again (:mod:`hot.recompute`)."""
    for _, layer in hot_layers(model):
        layer.set_hot_config(layer.hot_config.replace(**changes))
    if "recompute_inputs" in changes:
        pair_input_sources(model, changes["recompute_inputs"])


def _set_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)
