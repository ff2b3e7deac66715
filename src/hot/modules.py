"""Drop-in replacements for nn.Linear and nn.Conv2d whose backward pass is HOT's (or a baseline's)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .config import HOTConfig
from .functional import autocast_dtype, hot_layer_forward, register_layer
from .hla import TokenGrid
from .methods import LayerState, create_method


class HOTLayerMixin:
    """State shared by HOT layers: the config, the method, and the per-layer hash/LQS state."""

    hot_config: HOTConfig
    hot_state: LayerState
    hot_name: str  # the qualified name it replaced, for messages
    hot_grid: TokenGrid | None  # a Linear's token grid (prefix + H×W), where hot.convert knew it
    # what makes x again from a tensor kept for the backward, and (x, that tensor, x's version) as its source
    # module's hook left them for the next forward (hot.recompute's pairing, HOTConfig.recompute_inputs)
    hot_input_source: Callable[[torch.Tensor], torch.Tensor] | None = None
    hot_pending_source: tuple[torch.Tensor, torch.Tensor, int | None, torch.dtype | None] | None = None
    weight: nn.Parameter

    def _init_hot(self, config: HOTConfig, index: int) -> None:
        self.hot_config = config
        self.hot_method = create_method(config)
        self.hot_state = LayerState(index=index)
        self.hot_handle = register_layer(self)
        self.hot_name = ""
        self.hot_grid = None
        self.hot_input_source = None
        self.hot_pending_source = None  # in the instance's dict from the start: torch.compile guards on the dict
        self._place_step()

    def _place_step(self) -> None:
        """The hash step's counter where this layer's forward will advance it (:meth:`LayerState.place`)."""
        device = self.weight.device
        if device.type in ("cpu", "cuda"):
            self.hot_state.place(self.hot_method.step_device(device))

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        # .to(), .cuda() and the like: the counter follows the weight
        module = super()._apply(fn, recurse)  # type: ignore[misc]
        self._place_step()
        return module

    def __getstate__(self) -> dict[str, Any]:
        # a source left by a forward whose layer never ran (tensors of an autograd graph) is not copied or pickled
        return {**self.__dict__, "hot_pending_source": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # type: ignore[misc]
        self.hot_handle = register_layer(self)  # a copy (deepcopy, pickle) is a layer of its own

    def set_hot_config(self, config: HOTConfig) -> None:
        """Swap the config (e.g. INT8 warm-up to INT4), keeping step and LQS decision."""
        self.hot_config = config
        self.hot_method = create_method(config)
        self._place_step()

    def _uses_hot_backward(self, x: torch.Tensor) -> bool:
        return torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)

    def get_extra_state(self) -> torch.Tensor:
        """[hash step, LQS decision] as an int64 tensor (:data:`EXTRA_STATE_DECISIONS` index): a tensor, because
        tools treat every state-dict value as one (timm's ModelEmaV2 updates them all with ``copy_``)."""
        decision = EXTRA_STATE_DECISIONS.index(self.hot_state.gx_granularity)
        return torch.tensor([self.hot_state.step, decision], dtype=torch.int64)

    def set_extra_state(self, state: torch.Tensor | dict[str, Any]) -> None:
        if isinstance(state, dict):  # the {"step", "gx_granularity"} form of earlier checkpoints
            self.hot_state.step, self.hot_state.gx_granularity = int(state["step"]), state["gx_granularity"]
            return
        step, decision = state.tolist()
        self.hot_state.step, self.hot_state.gx_granularity = int(step), EXTRA_STATE_DECISIONS[decision]

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, hot_method={self.hot_config.method}, hot_index={self.hot_state.index}"


# A layer's LQS decision in its extra state: none yet, per-token or per-tensor g_x scales.
EXTRA_STATE_DECISIONS = (None, "per_token", "per_tensor")
_HOT_ATTRIBUTES = (
    "hot_config",
    "hot_method",
    "hot_state",
    "hot_handle",
    "hot_name",
    "hot_grid",
    "hot_input_source",
    "hot_pending_source",
)
# Module state held in dicts of its own: the new module gets copies (a change to one does not reach the other).
_OWN_DICTS = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set")


def _recast(mod: nn.Module, cls: type[nn.Module]) -> nn.Module:
    """A ``cls`` module with ``mod``'s state: parameters, buffers and submodules (the same tensors), the training
    flag, extra attributes, and its hooks of every kind. The hook dicts are shared, so the handles that registered
    them still remove them. HOT's own attributes are not carried."""
    new = cls.__new__(cls)
    state = {k: v for k, v in mod.__dict__.items() if k not in _HOT_ATTRIBUTES}
    for key in _OWN_DICTS:
        if key in state:
            state[key] = copy.copy(state[key])
    new.__dict__.update(state)
    return new


class HOTLinear(HOTLayerMixin, nn.Linear):
    @classmethod
    def from_float(cls, mod: nn.Linear, config: HOTConfig, index: int) -> HOTLinear:
        new = _recast(mod, cls)
        new._init_hot(config, index)
        return new

    def to_float(self) -> nn.Linear:
        return _recast(self, nn.Linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pending, self.hot_pending_source = self.hot_pending_source, None
        if self._uses_hot_backward(x):
            return hot_layer_forward(self, x, self._source_of(x, pending))
        return F.linear(x, self.weight, self.bias)

    def _source_of(self, x: torch.Tensor, pending: tuple | None) -> torch.Tensor | None:
        """The tensor x's source module made x from (:mod:`hot.recompute`), kept for the backward in place of x or its
        codes: only if x is that module's very output, not edited in place since (no pre-hook of this layer could
        have), and the source ran under this layer's autocast."""
        if self.hot_input_source is None or pending is None or pending[0] is not x or self._forward_pre_hooks:
            return None
        _, source, version, autocast = pending
        if autocast != autocast_dtype(x.device.type):
            return None
        return source if version is None or version == x._version else None


class HOTConv2d(HOTLayerMixin, nn.Conv2d):
    @classmethod
    def from_float(cls, mod: nn.Conv2d, config: HOTConfig, index: int) -> HOTConv2d:
        reason = conv_supported(mod)
        if reason is not None:
            raise ValueError(f"HOTConv2d cannot take a convolution with {reason}")
        new = _recast(mod, cls)
        new._init_hot(config, index)
        return new

    def to_float(self) -> nn.Conv2d:
        return _recast(self, nn.Conv2d)

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
