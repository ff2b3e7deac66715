"""HOT with LoRA (peft): by default HOT runs on the frozen base weights only; the adapters train exactly.

Supplement Table 3 compares the four combinations of HOT on the frozen weight and on the decomposed
(LoRA A/B) weights; ``on_frozen`` / ``on_decomposed`` select them. A frozen base layer computes only
g_x: its weight gradient is never formed and its input is not saved for it.
"""

from __future__ import annotations

from torch import nn

from .config import HOTConfig
from .convert import convert

LORA_TABLE3 = {  # (HOT on frozen, HOT on decomposed) -> the name the experiment configs use
    (False, False): "lora",
    (False, True): "lora_hot_decomposed",
    (True, False): "lora_hot_frozen",
    (True, True): "lora_hot_both",
}


def is_frozen_base(name: str) -> bool:
    return name.endswith(".base_layer")


def is_lora_adapter(name: str) -> bool:
    parts = name.split(".")
    return len(parts) >= 2 and parts[-2] in ("lora_A", "lora_B")


def apply_lora(
    model: nn.Module,
    lora_config: object,
    hot_config: HOTConfig | None = None,
    *,
    on_frozen: bool = True,
    on_decomposed: bool = False,
) -> nn.Module:
    """Wrap ``model`` with peft LoRA adapters, then put HOT on the chosen weight types."""
    from peft import get_peft_model

    peft_model = get_peft_model(model, lora_config)
    if on_frozen or on_decomposed:

        def chosen(_: nn.Module, name: str) -> bool:
            return (on_frozen and is_frozen_base(name)) or (on_decomposed and is_lora_adapter(name))

        convert(peft_model, hot_config or HOTConfig(), module_filter_fn=chosen, include_frozen=True)
    return peft_model
