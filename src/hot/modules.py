"""Drop-in replacements for nn.Linear and nn.Conv2d whose backward pass is HOT's (or a baseline's)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .config import HOTConfig
from .functional import hot_layer_forward, register_layer
from .hla import TokenGrid
from .methods import Keys, LayerState, create_method


class HOTLayerMixin:
    """State shared by HOT layers: the config, the method, and the per-layer hash/LQS state."""

    hot_config: HOTConfig
    hot_state: LayerState
    hot_name: str  # the qualified name it replaced, for messages
    hot_grid: TokenGrid | None  # a Linear's token grid (prefix + H×W), where hot.convert knew it
    weight: nn.Parameter

    def _init_hot(self, config: HOTConfig, index: int) -> None:
        self.hot_config = config
        self.hot_method = create_method(config)
        self.hot_state = LayerState(index=index)
        self.hot_handle = register_layer(self)
        self.hot_name = ""
        self.hot_grid = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # type: ignore[misc]
        self.hot_handle = register_layer(self)  # a copy (deepcopy, pickle) is a layer of its own

    def set_hot_config(self, config: HOTConfig) -> None:
        """Swap the config (e.g. INT8 warm-up to INT4), keeping step and LQS decision."""
        self.hot_config = config
        self.hot_method = create_method(config)

    def next_keys(self) -> Keys:
        keys = Keys(self.hot_config.seed, self.hot_state.index, self.hot_state.step)
        self.hot_state.step += 1
        return keys

    def _uses_hot_backward(self, x: torch.Tensor) -> bool:
        return torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)

    def get_extra_state(self) -> dict[str, Any]:
        return {"step": self.hot_state.step, "gx_granularity": self.hot_state.gx_granularity}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.hot_state.step = int(state["step"])
        self.hot_state.gx_granularity = state["gx_granularity"]

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, hot_method={self.hot_config.method}, hot_index={self.hot_state.index}"


class HOTLinear(HOTLayerMixin, nn.Linear):
    @classmethod
    def from_float(cls, mod: nn.Linear, config: HOTConfig, index: int) -> HOTLinear:
        new = cls(mod.in_features, mod.out_features, bias=mod.bias is not None, device="meta")
        new.weight, new.bias = mod.weight, mod.bias
        new.train(mod.training)
        new._init_hot(config, index)
        return new

    def to_float(self) -> nn.Linear:
        mod = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device="meta")
        mod.weight, mod.bias = self.weight, self.bias
        return mod.train(self.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._uses_hot_backward(x):
            return hot_layer_forward(self, x)
        return F.linear(x, self.weight, self.bias)


class HOTConv2d(HOTLayerMixin, nn.Conv2d):
    @classmethod
    def from_float(cls, mod: nn.Conv2d, config: HOTConfig, index: int) -> HOTConv2d:
        new = cls(
            mod.in_channels,
            mod.out_channels,
            mod.kernel_size,
            mod.stride,
            mod.padding,
            mod.dilation,
            groups=1,
            bias=mod.bias is not None,
            device="meta",
        )
        new.weight, new.bias = mod.weight, mod.bias
        new.train(mod.training)
        new._init_hot(config, index)
        return new

    def to_float(self) -> nn.Conv2d:
        mod = nn.Conv2d(
            self.in_channels,
            self.out_channels,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            groups=1,
            bias=self.bias is not None,
            device="meta",
        )
        mod.weight, mod.bias = self.weight, self.bias
        return mod.train(self.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._uses_hot_backward(x):
            return hot_layer_forward(self, x)
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, 1)


def conv_supported(mod: nn.Conv2d) -> str | None:
    """Why a Conv2d stays exact (None when HOT can take it)."""
    if mod.groups != 1:
        return "grouped or depthwise convolution"
    if mod.padding_mode != "zeros":
        return f"padding_mode={mod.padding_mode!r}"
    if isinstance(mod.padding, str):
        return f"padding={mod.padding!r}"
    return None
