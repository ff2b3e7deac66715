"""Which HOT layers make their input again in the backward (``HOTConfig.recompute_inputs``), and from what.

A HOT layer keeps, for g_w, its input x or (ABC) x's codes. Where x is the output of a module whose own backward
keeps that module's input u anyway (an elementwise activation keeps fc1's output; a LayerNorm keeps the residual
stream), the layer can keep u instead, which costs nothing, and make x and its codes again in its backward: the
codes the forward would have made, bit for bit (the same deterministic ops on the same u, under the forward's
autocast). Pairs, in timm's vision transformers:

- ``Mlp``: ``act`` -> ``fc2`` (no dropout or norm between): the MLP's forward hands fc1's output to fc2;
- ``Block`` (``recompute_inputs="all"``): ``norm1`` -> ``attn.qkv``, ``norm2`` -> ``mlp.fc1``: the norm's forward
  leaves (its output, its input) with the layer, which takes the input as x's source when x is that very output.
  This costs more: the LayerNorm runs again in float32 and x is cast to the autocast dtype again (about 3.5 ms
  of a ViT-B/16 step at batch 128 under CUDA graphs on an H100, against about 0.4 GB less at its peak).

Under ``torch.compile`` the forward's module may run as an inductor kernel whose last bits differ from eager
PyTorch's, which the backward runs.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from .modules import HOTLinear

# Elementwise and deterministic: made again from the same input, the same bits.
RECOMPUTABLE_ACTIVATIONS = (nn.GELU, nn.ReLU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Mish, nn.Hardswish, nn.LeakyReLU)


def _timm(mod: nn.Module, name: str) -> bool:
    return type(mod).__name__ == name and type(mod).__module__.startswith("timm.")


def _is_identity(mod: object) -> bool:
    return type(mod) is nn.Identity or (type(mod) is nn.Dropout and mod.p == 0.0)


def _hot_linear(mod: object) -> bool:
    return isinstance(mod, HOTLinear)


def _recomputable_mlp(mod: nn.Module) -> bool:
    """A timm ``Mlp`` (fc1, act, drop1, norm, fc2, drop2) whose fc2 is a HOT layer reading act(fc1's output)."""
    act = getattr(mod, "act", None)
    return (
        _timm(mod, "Mlp")
        and _hot_linear(getattr(mod, "fc2", None))
        and type(act) in RECOMPUTABLE_ACTIVATIONS
        and not getattr(act, "inplace", False)
        and _is_identity(getattr(mod, "drop1", None))
        and _is_identity(getattr(mod, "norm", None))
    )


def _mlp_forward(mlp: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """timm's ``Mlp.forward`` (the dropout and norm between its layers are identities), fc2 told that its input is
    the activation of fc1's output."""
    h = mlp.fc1(x)
    return mlp.drop2(mlp.fc2(mlp.act(h), hot_source=h))


def _norm_forward(norm: nn.Module, layer: HOTLinear, u: torch.Tensor) -> torch.Tensor:
    """The norm's own forward; with autograd recording, (output, input) left for the layer it feeds."""
    out = type(norm).forward(norm, u)
    if torch.is_grad_enabled():
        layer.hot_pending_source = (out, u)
    return out


def _source_of(module: nn.Module) -> functools.partial:
    """The module's class forward (not an instance's tagging one), bound to it: what the backward calls."""
    return functools.partial(type(module).forward, module)


def pair_input_sources(model: nn.Module, norms: bool = True) -> int:
    """Pair each qualifying HOT layer with its input's source module (module docstring): the activations' and, with
    ``norms``, the LayerNorms'. Returns how many layers are paired (ones paired before included).
    :func:`unpair_input_sources` undoes it."""
    paired = 0
    for mod in model.modules():
        if _recomputable_mlp(mod):
            mod.fc2.hot_input_source = _source_of(mod.act)
            mod.forward = functools.partial(_mlp_forward, mod)
            paired += 1
        if not norms or not _timm(mod, "Block"):
            continue
        feeds = (
            (getattr(mod, "norm1", None), getattr(getattr(mod, "attn", None), "qkv", None)),
            (getattr(mod, "norm2", None), getattr(getattr(mod, "mlp", None), "fc1", None)),
        )
        for norm, layer in feeds:
            if isinstance(norm, nn.LayerNorm) and _hot_linear(layer):
                layer.hot_input_source = _source_of(norm)
                norm.forward = functools.partial(_norm_forward, norm, layer)
                paired += 1
    return paired


def unpair_input_sources(model: nn.Module) -> None:
    """Undo :func:`pair_input_sources`: every paired module's class forward back, no HOT layer with a source."""
    for mod in model.modules():
        forward = mod.__dict__.get("forward")
        if isinstance(forward, functools.partial) and forward.func in (_mlp_forward, _norm_forward):
            del mod.forward
        if isinstance(mod, HOTLinear):
            mod.hot_input_source = mod.hot_pending_source = None
