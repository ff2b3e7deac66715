"""Which HOT layers make their input again in the backward (``HOTConfig.recompute_inputs``), and from what.

A HOT layer keeps, for g_w, its input x or (ABC) x's codes. Where x is the output of a module whose own backward
keeps that module's input u anyway (an elementwise activation keeps fc1's output; a LayerNorm keeps the float32
residual stream), the layer can keep u instead, which costs nothing, and make x and its codes again in its backward:
the codes the forward would have made, bit for bit (the same deterministic module on the same u, under the forward's
autocast). Pairs, in timm's vision transformers:

- ``Mlp``: ``act`` -> ``fc2`` (``recompute_inputs="activations"`` or ``"all"``);
- ``Attention``: its fused attention's output -> ``proj`` (the same modes), through the identity ``attn.norm``:
  x is a view of that output, which the attention's backward keeps, so proj keeps x itself and quantises it in its
  backward (nothing runs again). Where x is not such a view (the unfused path, an output laid out so the reshape
  copies, a gate), proj keeps its codes;
- ViT ``Block``: ``norm1`` -> ``attn.qkv``, ``norm2`` -> ``mlp.fc1`` (``"all"``). This costs more: the LayerNorm runs
  again in float32 and x is cast to the autocast dtype again (about 2 ms of a ViT-B/16 step at batch 128 under CUDA
  graphs on an H100, for about 0.35 GiB less at its peak).

A forward hook on the source module leaves (its output, its input) with the layer, which takes the input as x's
source only if x is that very output, unchanged since (hooks on an identity or p = 0 dropout between, as in timm's
Mlp, pass it on): anything else between them (a dropout that drops, an in-place edit, a swapped module, any other
hook on those modules or pre-hook on the layer, a global module hook, autocast entered or left between) makes the
layer keep its codes as usual. A LayerNorm under autocast whose input is not
float32 keeps a float32 copy, not its input, so there nothing is left. Under ``torch.compile`` the forward's module
may run as an inductor kernel whose last bits differ from eager PyTorch's, which the backward runs. Saved-tensor
hooks that copy what autograd keeps (``torch.autograd.graph.save_on_cpu``, offloading) copy the layer's kept tensor
apart from the source's: there pairing costs bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .functional import autocast_dtype
from .modules import HOTLinear

# Elementwise and deterministic: made again from the same input, the same bits.
RECOMPUTABLE_ACTIVATIONS = (nn.GELU, nn.ReLU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Mish, nn.Hardswish, nn.LeakyReLU)


def _timm(mod: nn.Module, name: str, module: str = "timm.") -> bool:
    return type(mod).__name__ == name and type(mod).__module__.startswith(module)


def _hooks_alone(module: nn.Module) -> bool:
    """No forward hook but this module's pairing hook, no global one: nothing can replace or edit its output
    unseen (a compiled graph has no tensor versions to show an in-place edit), and it is no DataParallel replica
    (whose hooks, shared with the original, would leave sources with the original's layer)."""
    own = sum(_is_source_hook(hook) for hook in module._forward_hooks.values())
    return (
        own == 1
        and len(module._forward_hooks) == 1
        and not nn.modules.module._global_forward_hooks
        and not getattr(module, "_is_replica", False)
    )


# Fused attention's autograd nodes: each keeps its output for the backward.
_FUSED_ATTENTION_NODES = frozenset(
    {
        "ScaledDotProductFlashAttentionBackward0",
        "ScaledDotProductEfficientAttentionBackward0",
        "ScaledDotProductCudnnAttentionBackward0",
        "ScaledDotProductFlashAttentionForCpuBackward0",
        "ScaledDotProductFusedAttentionOverrideableBackward0",
    }
)


def kept_by_attention(attention: nn.Module, u: torch.Tensor) -> bool:
    """Whether ``u``, the input of ``attention``'s proj, is a fused attention's output or a view of it: that
    attention's backward keeps its storage, so keeping ``u`` costs no bytes. A graph traced by ``torch.compile`` has
    no autograd nodes to ask: there it is timm's ``fused_attn`` now, without attention dropout on the CPU (which takes
    the unfused math path there)."""
    if torch.compiler.is_compiling():
        dropout = attention.training and getattr(attention.attn_drop, "p", 0.0) > 0
        return bool(attention.fused_attn) and (u.is_cuda or not dropout)
    base = u if u._base is None else u._base
    return type(base.grad_fn).__name__ in _FUSED_ATTENTION_NODES


def _leave_source(
    layer: HOTLinear,
    module: nn.Module,
    args: tuple[Any, ...],
    output: Any,
    kept: Callable[[torch.Tensor], bool] | None = None,
) -> None:
    """Forward hook of a source module: (output, input, output's version, autocast dtype) left for ``layer``'s next
    forward, where the input is kept anyway (``kept``, if given, says so of it)."""
    layer.hot_pending_source = None  # an earlier forward's pair, left unused, is not held on to
    u = args[0] if args else None
    if not torch.is_grad_enabled() or not isinstance(u, torch.Tensor) or not isinstance(output, torch.Tensor):
        return
    if not _hooks_alone(module) or (kept is not None and not kept(u)):
        return
    autocast = autocast_dtype(u.device.type)
    if isinstance(module, nn.LayerNorm) and u.dtype != torch.float32 and autocast is not None:
        return  # autocast hands the norm a float32 copy of u: that copy, not u, is what the norm keeps
    layer.hot_pending_source = (output, u, _version(output), autocast)


def _version(t: torch.Tensor) -> int | None:
    # tells an in-place edit between source and layer apart (eagerly: a compiled graph has no in-place edits)
    return None if torch.compiler.is_compiling() else t._version


def _pass_source(layer: HOTLinear, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
    """Forward hook of a module between source and layer that passes its input on unchanged (an nn.Identity, an
    nn.Dropout with p = 0 or in eval): the source left for ``layer`` follows the value to this module's output, which
    is a new tensor where ``torch.compile`` traces the dropout."""
    pending = layer.hot_pending_source
    passes = type(module) is nn.Identity or (type(module) is nn.Dropout and (module.p == 0.0 or not module.training))
    if pending is not None and passes and args and pending[0] is args[0] and isinstance(output, torch.Tensor):
        unchanged = pending[2] is None or pending[2] == args[0]._version
        keep = unchanged and _hooks_alone(module)
        layer.hot_pending_source = (output, pending[1], _version(output), pending[3]) if keep else None


def _is_source_hook(hook: object) -> bool:
    return isinstance(hook, functools.partial) and hook.func in (_leave_source, _pass_source)


def _remove_source_hooks(module: nn.Module) -> None:
    for key in [k for k, hook in module._forward_hooks.items() if _is_source_hook(hook)]:
        del module._forward_hooks[key]


def _pair(
    source: nn.Module,
    layer: object,
    between: tuple[object, ...] = (),
    kept: Callable[[torch.Tensor], bool] | None = None,
) -> bool:
    """``source`` -> ``layer``, through the ``between`` modules (each an nn.Identity or nn.Dropout, else none);
    ``kept``: where the source's input is not always kept by its own backward, what tells when it is."""
    if not isinstance(layer, HOTLinear) or "forward" in source.__dict__:  # an instance's own forward: not replayed
        return False
    layer.hot_input_source = functools.partial(type(source).forward, source)  # the class's: no hooks in the backward
    # first among the module's hooks: it sees the module's own output (a later hook's replacement or in-place edit then
    # makes the layer keep its codes)
    _remove_source_hooks(source)
    source.register_forward_hook(functools.partial(_leave_source, layer, kept=kept), prepend=True)
    for module in between:
        if type(module) in (nn.Identity, nn.Dropout):
            _remove_source_hooks(module)
            module.register_forward_hook(functools.partial(_pass_source, layer), prepend=True)
    return True


def pair_input_sources(model: nn.Module, mode: str) -> int:
    """Pair the HOT layers with their inputs' source modules as ``HOTConfig.recompute_inputs`` ``mode`` says (module
    docstring): none, the activations' and attention's, or also the LayerNorms'; earlier pairings are undone first.
    Returns how many layers are paired. :func:`unpair_input_sources` undoes it."""
    unpair_input_sources(model)
    if mode == "none":
        return 0
    norms = mode == "all"
    paired = 0
    for mod in model.modules():
        act = getattr(mod, "act", None)
        if _timm(mod, "Mlp") and type(act) in RECOMPUTABLE_ACTIVATIONS and not getattr(act, "inplace", False):
            between = (getattr(mod, "drop1", None), getattr(mod, "norm", None))
            paired += _pair(act, getattr(mod, "fc2", None), between)
        if _timm(mod, "Attention") and getattr(mod, "fused_attn", False):
            norm = getattr(mod, "norm", None)
            if type(norm) is nn.Identity and getattr(mod, "gate", None) is None:
                paired += _pair(norm, getattr(mod, "proj", None), kept=functools.partial(kept_by_attention, mod))
        if norms and _timm(mod, "Block", "timm.models.vision_transformer"):
            attn, mlp = getattr(mod, "attn", None), getattr(mod, "mlp", None)
            feeds = (
                (getattr(mod, "norm1", None), getattr(attn, "qkv", None)),
                (getattr(mod, "norm2", None), getattr(mlp, "fc1", None)),
            )
            for norm, layer in feeds:
                paired += isinstance(norm, nn.LayerNorm) and _pair(norm, layer)
    return paired


def unpair_input_sources(model: nn.Module) -> None:
    """Undo :func:`pair_input_sources`: its hooks removed, no HOT layer with a source."""
    for mod in model.modules():
        _remove_source_hooks(mod)
        if isinstance(mod, HOTLinear):
            mod.hot_input_source = mod.hot_pending_source = None
