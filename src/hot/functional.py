"""Autograd functions: the exact forward of Linear / Conv2d with a HOT backward.

Both reduce the layer to its GEMM view (``x`` (L, I), ``W`` (O, I), ``g_y`` (L, O)) and hand the two
gradient GEMMs to the layer's :class:`hot.methods.Method`. The forward runs the unmodified op, so it
is exact also under ``torch.autocast``. What is saved for backward: ``W`` if g_x is needed, and for g_w
either x itself or, with ABC, only the method's packed codes. Nothing of x is kept for a frozen weight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from .modules import HOTConv2d, HOTLinear


def linear_tokens(shape: torch.Size) -> int:
    """Positions per sample of a Linear input: the middle dims of (B, …, I); a 2-D (B, I) input is one sequence of B."""
    if len(shape) <= 2:
        return int(shape[0]) if len(shape) == 2 else 1
    tokens = 1
    for s in shape[1:-1]:
        tokens *= int(s)
    return tokens


def _save_input(ctx: Any, layer: HOTLinear | HOTConv2d, x: torch.Tensor, weight: torch.Tensor, to2d: Any) -> None:
    """Save W if g_x is needed; for g_w the ABC codes of x, or x itself (made 2-D only in backward)."""
    if not weight.requires_grad:
        saved: tuple = ()
    elif layer.hot_config.abc:
        saved = layer.hot_method.pack_input(to2d(x), ctx.tokens, ctx.keys)
    else:
        saved = (x,)
    ctx.save_for_backward(weight if x.requires_grad else None, *saved)


def _grads(ctx: Any, g2d: torch.Tensor, to2d: Any, gx_dtype: torch.dtype) -> tuple:
    """g_x (2-D, in ``gx_dtype``), g_w (2-D, float32) and g_b (float32), each only where autograd asks for it."""
    weight, *saved = ctx.saved_tensors
    layer = ctx.layer
    need_w = ctx.needs_input_grad[1]
    packed: tuple = ()
    if need_w:
        packed = tuple(saved) if layer.hot_config.abc else (to2d(saved[0]),)
    w2d = weight.reshape(weight.shape[0], -1) if ctx.needs_input_grad[0] else None
    g_x, g_w = layer.hot_method.backward_gemms(
        g2d, w2d, packed, ctx.tokens, layer.hot_state, ctx.keys, gx_dtype=gx_dtype
    )
    g_b = None
    if ctx.has_bias and ctx.needs_input_grad[2]:
        g_b = g2d.sum(0, dtype=torch.float64 if g2d.dtype == torch.float64 else torch.float32)
    return g_x, g_w, g_b


def _flatten_tokens(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, t.shape[-1])


class HOTLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, layer: HOTLinear
    ) -> torch.Tensor:
        y = F.linear(x, weight, bias)
        ctx.layer, ctx.keys = layer, layer.next_keys()
        ctx.tokens = linear_tokens(x.shape)
        ctx.x_shape, ctx.x_dtype, ctx.w_dtype = x.shape, x.dtype, weight.dtype
        ctx.has_bias = bias is not None
        _save_input(ctx, layer, x, weight, _flatten_tokens)
        return y

    @staticmethod
    def backward(ctx: Any, g_y: torch.Tensor) -> tuple:
        g_x, g_w, g_b = _grads(ctx, _flatten_tokens(g_y), _flatten_tokens, ctx.x_dtype)
        if g_x is not None:
            g_x = g_x.reshape(ctx.x_shape)
        if g_w is not None:
            g_w = g_w.to(ctx.w_dtype)
        if g_b is not None:
            g_b = g_b.to(ctx.w_dtype)
        return g_x, g_w, g_b, None


def unfold_input(x: torch.Tensor, layer: HOTConv2d) -> torch.Tensor:
    """im2col: (B, C, H, W) -> (B·H_out·W_out, C·kh·kw), output positions in raster order."""
    cols = F.unfold(x, layer.kernel_size, layer.dilation, layer.padding, layer.stride)
    return cols.transpose(1, 2).reshape(-1, cols.shape[1])


class HOTConv2dFunction(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, layer: HOTConv2d
    ) -> torch.Tensor:
        y = F.conv2d(x, weight, bias, layer.stride, layer.padding, layer.dilation, 1)
        ctx.layer, ctx.keys = layer, layer.next_keys()
        ctx.tokens = y.shape[-2] * y.shape[-1]
        ctx.x_shape, ctx.x_dtype, ctx.w_dtype, ctx.w_shape = x.shape, x.dtype, weight.dtype, weight.shape
        ctx.has_bias = bias is not None
        _save_input(ctx, layer, x, weight, lambda t: unfold_input(t, layer))
        return y

    @staticmethod
    def backward(ctx: Any, g_y: torch.Tensor) -> tuple:
        layer = ctx.layer
        g2d = g_y.permute(0, 2, 3, 1).reshape(-1, g_y.shape[1])
        g_x, g_w, g_b = _grads(ctx, g2d, lambda t: unfold_input(t, layer), torch.float32)  # fold sums in fp32
        if g_x is not None:
            batch, _, height, width = ctx.x_shape
            cols = g_x.reshape(batch, -1, g_x.shape[1]).transpose(1, 2)
            g_x = F.fold(cols, (height, width), layer.kernel_size, layer.dilation, layer.padding, layer.stride)
            g_x = g_x.to(ctx.x_dtype)
        if g_w is not None:
            g_w = g_w.reshape(ctx.w_shape).to(ctx.w_dtype)
        if g_b is not None:
            g_b = g_b.to(ctx.w_dtype)
        return g_x, g_w, g_b, None
