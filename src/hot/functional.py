"""HOT layers as two PyTorch custom ops, so that ``torch.compile`` keeps a converted model in one graph.

``hot::layer_forward`` runs the unmodified Linear / Conv2d and, with ABC, packs the codes of x;
``hot::layer_backward`` reduces the layer to its GEMM view (``x`` (L, I), ``W`` (O, I), ``g_y`` (L, O)) and
hands the two gradient GEMMs to the layer's :class:`hot.methods.Method`. Both are opaque to the compiler:
the per-layer state they use (the config, the hash step, the LQS decision) is read when they run, so a
compiled graph neither bakes it in nor recompiles as it changes. The layer reaches them as an integer
handle (:func:`register_layer`). The hash step of a forward travels to its backward as a 1-element int64
tensor: on the GPU for the real backend, whose kernels read it there and whose forward advances the layer's
counter there, so ``torch.compile(mode="reduce-overhead")`` (CUDA graphs) replays each step with its own
dither; on the CPU for reference code.

Under ``torch.autocast`` (what autocast does for linear and conv2d, made explicit so that eager and
compiled agree): :func:`hot_layer_forward` casts x where autograd sees it, so g_x leaves the backward in
the dtype the GEMM read, and passes the dtype on for the op to cast W and b. What is saved for backward:
``W`` (the parameter itself), the hash step, and for g_w either x or, with ABC, only the method's packed
codes; or, where x has a source (``recompute_inputs``: a LayerNorm or activation that made x from a tensor its
own backward keeps anyway, :mod:`hot.recompute`), that tensor: the backward makes x and its codes again, under the
forward's autocast, as the forward would have. Nothing of x is kept for a frozen weight.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from .config import HOTConfig
from .hla import HLAWindows, TokenGrid, hla_windows
from .methods import Keys, LayerState, Method, Saved, SavedFrom
from .rounding import rounding_rank


class HOTLayer(Protocol):
    """What the ops read of a HOT layer (:mod:`hot.modules` defines them; a Conv2d's geometry as well). The ops know
    layers only by this and by their handles, so the layer classes import the ops and not the other way round."""

    hot_config: HOTConfig
    hot_method: Method
    hot_state: LayerState
    hot_name: str
    hot_grid: TokenGrid | None
    hot_handle: int
    hot_input_source: Callable[[torch.Tensor], torch.Tensor] | None  # makes x from a kept tensor, where paired
    weight: torch.Tensor
    bias: torch.Tensor | None


# Device types with autocast, looked up once: torch.compile cannot trace the lookup.
_AUTOCAST_DEVICES = frozenset(
    d for d in ("cpu", "cuda", "xpu", "mps", "hpu", "mtia") if torch.amp.is_autocast_available(d)
)

_LAYERS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_HANDLES = itertools.count()


def register_layer(layer: HOTLayer) -> int:
    """A new handle by which the ops find ``layer`` (held weakly)."""
    handle = next(_HANDLES)
    _LAYERS[handle] = layer
    return handle


def _layer(handle: int) -> HOTLayer:
    layer = _LAYERS.get(handle)
    if layer is None:
        raise RuntimeError(f"HOT layer handle {handle} refers to a layer that no longer exists")
    return layer


def _check_capturable(x: torch.Tensor, step_device: torch.device) -> None:
    # A step kept on the host is not advanced by a CUDA graph's replays: each would round with one step's dither.
    if x.is_cuda and step_device.type != "cuda" and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            "a HOT layer on the reference backend cannot be captured in a CUDA graph: it keeps its stochastic-rounding "
            "step on the host, so every replay would reuse one step's dither; use backend 'real' (its step lives on "
            "the GPU), or torch.compile's default mode instead of mode='reduce-overhead'"
        )


def _keys(layer: HOTLayer, step: torch.Tensor) -> Keys:
    return Keys(layer.hot_config.seed, layer.hot_state.index, step, rounding_rank())


def linear_tokens(shape: torch.Size) -> int:
    """Positions per sample of a Linear input: the middle dims of (B, …, I); a 2-D (B, I) input is one sequence of B."""
    if len(shape) <= 2:
        return int(shape[0]) if len(shape) == 2 else 1
    tokens = 1
    for s in shape[1:-1]:
        tokens *= int(s)
    return tokens


def _patchifies(layer: torch.nn.Conv2d) -> bool:
    """Whether the convolution cuts its input into disjoint patches (stride = kernel, no padding or dilation, as a
    ViT's patch embedding): then im2col is a reshape, and col2im sums nothing."""
    return (
        tuple(layer.stride) == tuple(layer.kernel_size)
        and tuple(layer.padding) == (0, 0)
        and tuple(layer.dilation) == (1, 1)
    )


def unfold_input(x: torch.Tensor, layer: torch.nn.Conv2d) -> torch.Tensor:
    """im2col: (B, C, H, W) -> (B·H_out·W_out, C·kh·kw), output positions in raster order."""
    if _patchifies(layer):
        (kh, kw), (batch, channels, height, width) = layer.kernel_size, x.shape
        ho, wo = height // kh, width // kw
        patches = x[:, :, : ho * kh, : wo * kw].reshape(batch, channels, ho, kh, wo, kw)
        return patches.permute(0, 2, 4, 1, 3, 5).reshape(batch * ho * wo, channels * kh * kw)
    cols = F.unfold(x, layer.kernel_size, layer.dilation, layer.padding, layer.stride)
    return cols.transpose(1, 2).reshape(-1, cols.shape[1])


def fold_grad_input(
    g_cols: torch.Tensor, layer: torch.nn.Conv2d, x_shape: list[int], dtype: torch.dtype
) -> torch.Tensor:
    """col2im of ``unfold_input``'s layout: (B·H_out·W_out, C·kh·kw) -> (B, C, H, W) in ``dtype``, overlapping
    columns summed (in ``g_cols``' dtype, then cast)."""
    batch, channels, height, width = x_shape
    if _patchifies(layer):
        (kh, kw) = layer.kernel_size
        ho, wo = height // kh, width // kw
        patches = g_cols.reshape(batch, ho, wo, channels, kh, kw).permute(0, 3, 1, 4, 2, 5)
        # Nothing to sum: one copy, the cast included, into the patches' places; zeros only where a remainder
        # row or column is read by no patch (as F.fold gives).
        covered = (ho * kh, wo * kw) == (height, width)
        g_x = (g_cols.new_empty if covered else g_cols.new_zeros)(x_shape, dtype=dtype)
        g_x[:, :, : ho * kh, : wo * kw].view(batch, channels, ho, kh, wo, kw).copy_(patches)
        return g_x
    cols = g_cols.reshape(batch, -1, g_cols.shape[1]).transpose(1, 2)
    return F.fold(cols, (height, width), layer.kernel_size, layer.dilation, layer.padding, layer.stride).to(dtype)


def _is_conv(layer: HOTLayer) -> bool:
    return isinstance(layer, torch.nn.Conv2d)


def _input_2d(layer: HOTLayer, x: torch.Tensor) -> torch.Tensor:
    return unfold_input(x, layer) if _is_conv(layer) else x.reshape(-1, x.shape[-1])


def _sample_grid(layer: HOTLayer, x_shape: torch.Size, y_shape: torch.Size) -> tuple[int, TokenGrid | None]:
    """Positions per sample and their grid, where known: Conv's output H×W; a Linear's (B, H, W, C) input
    shape; else the grid :func:`hot.convert` recorded for the layer, which must account for T."""
    if _is_conv(layer):
        grid = TokenGrid(0, int(y_shape[-2]), int(y_shape[-1]))
        return grid.tokens, grid
    tokens = linear_tokens(x_shape)
    if len(x_shape) == 4:
        return tokens, TokenGrid(0, int(x_shape[1]), int(x_shape[2]))
    grid = layer.hot_grid if len(x_shape) == 3 else None
    if grid is not None and grid.tokens != tokens:
        raise ValueError(
            f"HOT layer {layer.hot_name or layer.hot_state.index!r}: its input {tuple(x_shape)} has T = {tokens} "
            f"tokens per sample, but the grid recorded for it is {grid.describe()}; pass the right "
            "hot.TokenGrid to hot.convert(..., token_grid=...), exclude the layer, or set hla_blocking='paper'"
        )
    return tokens, grid


def _windows(layer: HOTLayer, x_shape: torch.Size, y_shape: torch.Size) -> HLAWindows:
    """Where HLA's blocks read this call's samples (:func:`hot.hla.hla_windows`). A ``spatial`` layer whose
    grid is unknown reads 1×16 strips, and says so once."""
    tokens, grid = _sample_grid(layer, x_shape, y_shape)
    blocking = layer.hot_config.hla_blocking
    if blocking == "spatial" and grid is None and layer.hot_method.uses_hla and not layer.hot_state.grid_warned:
        layer.hot_state.grid_warned = True
        warnings.warn(
            f"HOT layer {layer.hot_name or layer.hot_state.index!r}: no token grid is known for its input "
            f"{tuple(x_shape)}, so HLA reads blocks of 16 consecutive positions (hla_blocking 'paper') there; "
            "pass hot.convert(..., token_grid=hot.TokenGrid(prefix, height, width)) if its tokens form a grid",
            stacklevel=2,
        )
    return hla_windows(tokens, blocking, grid)


def _cast(t: torch.Tensor | None, dtype: torch.dtype | None) -> torch.Tensor | None:
    return t if t is None or dtype is None or not t.is_floating_point() else t.to(dtype)


def _layer_output(
    layer: HOTLayer, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype | None
) -> torch.Tensor:
    """The exact Linear / Conv2d, computed in ``dtype`` (the autocast dtype, cast here) or the inputs' own."""
    x, weight, bias = _cast(x, dtype), _cast(weight, dtype), _cast(bias, dtype)
    device = x.device.type
    with contextlib.ExitStack() as stack:
        if device in _AUTOCAST_DEVICES:
            stack.enter_context(torch.autocast(device, enabled=False))
        if _is_conv(layer):
            return F.conv2d(x, weight, bias, layer.stride, layer.padding, layer.dilation, 1)
        return F.linear(x, weight, bias)


def _forward_outputs(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    handle: int,
    compute_dtype: torch.dtype | None,
    save: str,
    tracing: bool,
) -> list[torch.Tensor]:
    """``layer_forward``'s outputs; ``tracing``: shaped alike, without advancing the step or quantising."""
    layer = _layer(handle)
    y = _layer_output(layer, x, weight, bias, compute_dtype)
    step_device = layer.hot_method.step_device(x.device)
    if tracing:
        step = torch.empty(1, dtype=torch.int64, device=step_device)
    else:
        _check_capturable(x, step_device)
        step = layer.hot_state.advance(step_device)
    keys = None if tracing else _keys(layer, step)
    # Windows are checked here too, so a grid that does not fit fails in the forward, at the first such layer.
    windows = _windows(layer, x.shape, y.shape) if layer.hot_method.uses_hla else None
    if save != "codes":
        return [y, step]
    rows = _input_2d(layer, x)
    if keys is None:
        return [y, step, *layer.hot_method.packed_input_like(rows, windows)]
    return [y, step, *layer.hot_method.pack_input(rows, windows, keys)]


@torch.library.custom_op("hot::layer_forward", mutates_args=())
def layer_forward(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    handle: int,
    compute_dtype: torch.dtype | None,
    save: str,
    source: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """[y, hash step, *ABC codes]: the layer's exact output, the step its backward uses, what ABC keeps.
    ``source``: what save ``"recompute"`` keeps instead (the tensor the layer's input source makes x from)."""
    return _forward_outputs(x, weight, bias, handle, compute_dtype, save, tracing=False)


@layer_forward.register_fake
def _layer_forward_fake(*args: Any) -> list[torch.Tensor]:
    return _forward_outputs(*args[:6], tracing=True)


def _setup_forward(ctx: Any, inputs: tuple, output: list[torch.Tensor]) -> None:
    x, weight, bias, handle, compute_dtype, save, *source = inputs
    _, step, *packed = output
    ctx.handle, ctx.x_shape, ctx.x_dtype, ctx.has_bias = handle, x.shape, x.dtype, bias is not None
    ctx.save, ctx.compute_dtype = save, compute_dtype
    kept = {"codes": packed, "input": [x], "recompute": source[:1]}
    ctx.save_for_backward(weight, step, *kept.get(save, []))


def _input_gradients(ctx: Any, grads: Sequence[torch.Tensor], backward: Callable[..., list[torch.Tensor]]) -> tuple:
    """The gradients of the forward's inputs, from ``backward`` (the op, or the function it runs): x, W and b's,
    then None for each other input (six or seven: a traced call may leave out a ``source`` of None)."""
    weight, step, *saved = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:3]]
    g_x, g_w, g_b = backward(
        grads[0], weight, saved, step, ctx.handle, list(ctx.x_shape), ctx.x_dtype, needs, ctx.save, ctx.compute_dtype
    )
    others = (None,) * (len(ctx.needs_input_grad) - 3)
    return g_x if needs[0] else None, g_w if needs[1] else None, g_b if needs[2] else None, *others


def _backward(ctx: Any, grads: list[torch.Tensor]) -> tuple:
    return _input_gradients(ctx, grads, layer_backward)


layer_forward.register_autograd(_backward, setup_context=_setup_forward)


def _grad_output_2d(layer: HOTLayer, g_y: torch.Tensor) -> torch.Tensor:
    return g_y.permute(0, 2, 3, 1).reshape(-1, g_y.shape[1]) if _is_conv(layer) else g_y.reshape(-1, g_y.shape[-1])


def _backward_outputs(
    g_y: torch.Tensor,
    weight: torch.Tensor,
    saved: list[torch.Tensor],
    step: torch.Tensor,
    handle: int,
    x_shape: list[int],
    x_dtype: torch.dtype,
    needs: list[bool],
    save: str,
    compute_dtype: torch.dtype | None,
) -> list[torch.Tensor]:
    """[g_x, g_w, g_b] of one layer, an empty tensor for each one ``needs`` does not ask for; ``save`` says
    what ``saved`` holds (:func:`hot_layer_forward`), ``compute_dtype`` the forward's autocast dtype."""
    layer = _layer(handle)
    conv = _is_conv(layer)
    g2d = _grad_output_2d(layer, g_y)
    windows = _windows(layer, torch.Size(x_shape), g_y.shape)
    keys = _keys(layer, step)
    packed: Saved | SavedFrom = ()
    if needs[1] and saved and save == "recompute":
        source = saved[0]

        def packed() -> Saved:  # made where g_w's chain runs (in a CUDA graph, on its stream, beside g_x's)
            rows = _input_2d(layer, _recomputed_input(layer, source, x_dtype, compute_dtype))
            return layer.hot_method.pack_input(rows, windows, keys) if layer.hot_config.abc else (rows,)

    elif needs[1] and saved:
        packed = tuple(saved) if layer.hot_config.abc else (_input_2d(layer, saved[0]),)
    w2d = weight.reshape(weight.shape[0], -1) if needs[0] else None
    # Conv's g_x is folded (overlapping columns summed) in float32.
    gx_dtype = torch.float32 if conv else x_dtype
    g_x, g_w, g_b = layer.hot_method.backward_gemms(
        g2d, w2d, packed, windows, layer.hot_state, keys, gx_dtype=gx_dtype, bias=needs[2]
    )
    empty = g_y.new_empty(0)
    if g_x is None:
        g_x = empty
    elif conv:
        g_x = fold_grad_input(g_x, layer, x_shape, x_dtype)
    else:
        g_x = g_x.reshape(x_shape)
    g_w = empty.clone() if g_w is None else g_w.reshape(weight.shape).to(weight.dtype)
    g_b = empty.clone() if g_b is None else g_b.to(weight.dtype)
    return [g_x, g_w, g_b]


layer_backward = torch.library.custom_op("hot::layer_backward", _backward_outputs, mutates_args=())


@layer_backward.register_fake
def _layer_backward_fake(
    g_y: torch.Tensor,
    weight: torch.Tensor,
    saved: list[torch.Tensor],
    _step: torch.Tensor,
    _handle: int,
    x_shape: list[int],
    x_dtype: torch.dtype,
    needs: list[bool],
    _save: str,
    _compute_dtype: torch.dtype | None,
) -> list[torch.Tensor]:
    empty = g_y.new_empty(0)
    g_x = g_y.new_empty(x_shape, dtype=x_dtype) if needs[0] else empty
    g_w = torch.empty_like(weight) if needs[1] and saved else empty.clone()
    g_b = weight.new_empty(weight.shape[0]) if needs[2] else empty.clone()
    return [g_x, g_w, g_b]


class _EagerLayer(torch.autograd.Function):
    """``hot::layer_forward`` and its backward without the custom ops' dispatch (argument flattening, defaults,
    redispatch: about half of a small layer's host time), for eager calls: the same functions on the same arguments,
    so the results are the ops' bit for bit. Compiled graphs and meta tensors take the ops."""

    @staticmethod
    def forward(ctx: Any, *inputs: Any) -> tuple[torch.Tensor, ...]:
        output = _forward_outputs(*inputs[:6], tracing=False)
        _setup_forward(ctx, inputs, output)
        ctx.mark_non_differentiable(*output[1:])
        return tuple(output)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
        return _input_gradients(ctx, grads, _backward_outputs)


def autocast_dtype(device: str) -> torch.dtype | None:
    """The dtype autocast computes in on this device type now, None where it is off (or the device has none)."""
    if device in _AUTOCAST_DEVICES and torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return None


def _recomputed_input(
    layer: HOTLayer, source: torch.Tensor, x_dtype: torch.dtype, compute_dtype: torch.dtype | None
) -> torch.Tensor:
    """x as the forward read it, made again from its source by the layer's ``hot_input_source`` under the
    forward's autocast (``compute_dtype``; a LayerNorm runs in float32 there), then cast as the forward cast it."""
    device = source.device.type
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        if device in _AUTOCAST_DEVICES:
            stack.enter_context(torch.autocast(device, dtype=compute_dtype, enabled=compute_dtype is not None))
        return _cast(layer.hot_input_source(source), x_dtype)


def hot_layer_forward(layer: HOTLayer, x: torch.Tensor, source: torch.Tensor | None = None) -> torch.Tensor:
    """The layer's output through ``hot::layer_forward`` (its backward is HOT's); eagerly, through the same
    functions without the op dispatch (:class:`_EagerLayer`). ``source``: the tensor x was made from by the
    layer's ``hot_input_source``, kept for g_w in place of x or its codes."""
    device = x.device.type
    dtype = autocast_dtype(device)
    # x is cast here, where autograd sees it: the op saves (or packs) and differentiates the x its GEMM
    # reads, and g_x leaves the backward in that dtype (the FP8 GEMM's epilogue writes it directly).
    x = _cast(x, dtype)
    if not layer.weight.requires_grad:
        save = "none"
    elif source is not None:
        save = "recompute"
    elif layer.hot_config.abc:
        save = "codes"
    else:
        save = "input"
    args = (x, layer.weight, layer.bias, layer.hot_handle, dtype, save, source)
    if torch.compiler.is_compiling() or x.device.type == "meta":
        return layer_forward(*args)[0]
    return _EagerLayer.apply(*args)[0]
