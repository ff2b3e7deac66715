import pytest
import torch
from peft import LoraConfig
from torch import nn

from hot import HOTConfig, apply_lora, hot_layers


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize(("on_frozen", "on_decomposed"), [(False, False), (True, False), (False, True), (True, True)])
def test_table3_combinations(on_frozen, on_decomposed):
    model = apply_lora(
        Tiny(),
        LoraConfig(r=4, target_modules=["fc1", "fc2"]),
        HOTConfig(),
        on_frozen=on_frozen,
        on_decomposed=on_decomposed,
    )
    names = {name for name, _ in hot_layers(model)}
    frozen = {n for n in names if n.endswith("base_layer")}
    adapters = names - frozen
    assert bool(frozen) == on_frozen and (len(frozen) == 2 if on_frozen else True)
    assert bool(adapters) == on_decomposed and (len(adapters) == 4 if on_decomposed else True)


def test_hot_on_frozen_weights_trains_only_adapters_and_never_forms_base_gw(monkeypatch):
    model = apply_lora(Tiny(), LoraConfig(r=4, target_modules=["fc1", "fc2"], init_lora_weights=False), HOTConfig())
    for _, layer in hot_layers(model):
        assert not layer.weight.requires_grad

        def forbidden(*args, **kwargs):
            raise AssertionError("frozen base weights must not compute g_w")

        monkeypatch.setattr(layer.hot_method, "grad_weight", forbidden)
    x = torch.randn(8, 5, 16)
    model(x).sum().backward()
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert all(p.grad is not None for n, p in model.named_parameters() if p.requires_grad)
    assert all(p.grad is None for n, p in model.named_parameters() if not p.requires_grad)
