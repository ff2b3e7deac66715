import copy
import warnings

import pytest
import timm
import torch
from torch import nn

import hot
from hot import HOTConfig
from hot.modules import HOTConv2d, HOTLinear


def train_steps(model, x, y, steps, lr=1e-3):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_convert_vit_swaps_every_linear_and_patch_embedding():
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=10)
    linears = sum(isinstance(m, nn.Linear) for m in model.modules())
    hot.convert(model, HOTConfig())
    layers = dict(hot.hot_layers(model))
    assert sum(isinstance(m, HOTLinear) for m in layers.values()) == linears
    assert isinstance(model.patch_embed.proj, HOTConv2d) and isinstance(model.head, HOTLinear)
    assert [m.hot_state.index for m in layers.values()] == list(range(len(layers)))


def test_exclude_filter_and_unconvert():
    model = timm.create_model("resnet18", pretrained=False, num_classes=10)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    hot.convert(
        model, HOTConfig(), exclude=["fc", "conv1"], module_filter=lambda name, m: not name.startswith("layer4")
    )
    names = {name for name, _ in hot.hot_layers(model)}
    assert "fc" not in names and "conv1" not in names and not any(n.startswith("layer4") for n in names)
    assert "layer1.0.conv1" in names
    hot.unconvert(model)
    assert not list(hot.hot_layers(model))
    assert all(type(m) in (nn.Conv2d, nn.Linear) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear)))
    loaded = model.state_dict()
    assert all(torch.equal(state[k], loaded[k]) for k in state)


def test_grouped_convolutions_stay_exact():
    model = nn.Sequential(nn.Conv2d(8, 8, 3, groups=8), nn.Conv2d(8, 8, 3, padding="same"), nn.Conv2d(8, 4, 1))
    hot.convert(model, HOTConfig())
    assert [type(m) for m in model] == [nn.Conv2d, nn.Conv2d, HOTConv2d]


@pytest.mark.parametrize("config", [HOTConfig(abc=True), HOTConfig(abc=True, hla_blocking="official")])
def test_converted_vit_trains_and_loss_falls(config):
    torch.manual_seed(0)
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=4, depth=2
    )
    hot.convert(model, config)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 4, (16,))
    losses = train_steps(model, x, y, 12)
    assert losses[-1] < 0.5 * losses[0]


def test_converted_resnet_trains_and_loss_falls():
    torch.manual_seed(0)
    model = timm.create_model("resnet18", pretrained=False, num_classes=4)
    hot.convert(model, HOTConfig(abc=True))
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 4, (8,))
    losses = train_steps(model, x, y, 8)
    assert losses[-1] < 0.5 * losses[0]


def test_set_config_switches_bits_and_keeps_state():
    model = hot.convert(nn.Sequential(nn.Linear(16, 16)), HOTConfig())
    model(torch.randn(2, 16, requires_grad=True)).sum().backward()
    hot.set_config(model, gx_bits=8)
    layer = model[0]
    assert layer.hot_config.gx_bits == 8 and layer.hot_method.config.gx_bits == 8 and layer.hot_state.step == 1


def test_convert_rejects_a_non_config():
    with pytest.raises(TypeError, match="HOTConfig"):
        hot.convert(nn.Linear(2, 2), {"method": "hot"})


def _tiny_vit(**kwargs):
    return timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=10, **kwargs
    )


def test_convert_records_the_vit_token_grid_and_layer_names():
    model = hot.convert(_tiny_vit(reg_tokens=2), HOTConfig(), exclude=["head"])
    layers = dict(hot.hot_layers(model))
    grid = hot.TokenGrid(prefix=3, height=4, width=4)  # class + 2 register tokens, 32/8 = 4×4 patches
    assert layers["blocks.0.attn.qkv"].hot_grid == grid and layers["blocks.0.attn.qkv"].hot_name == "blocks.0.attn.qkv"
    assert layers["patch_embed.proj"].hot_grid is None  # convolutions window their own output
    x = torch.randn(2, 3, 32, 32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every layer has its grid: no fallback warning
        model(x).sum().backward()


def test_spatial_windows_change_the_vit_gradient_and_paper_strips_remain_available():
    torch.manual_seed(0)
    base = _tiny_vit()
    x = torch.randn(2, 3, 32, 32)

    def grad(blocking):
        model = hot.convert(copy.deepcopy(base), HOTConfig(hla_blocking=blocking, seed=1), exclude=["head"])
        model(x).sum().backward()
        return model.blocks[0].mlp.fc1.weight.grad

    assert not torch.allclose(grad("spatial"), grad("paper"))


def test_a_token_count_that_contradicts_the_grid_names_the_layer_and_both_shapes():
    model = hot.convert(_tiny_vit(), HOTConfig(), token_grid=hot.TokenGrid(1, 5, 5))
    with pytest.raises(ValueError, match=r"blocks\.0\.attn\.qkv.*\(2, 17, 192\).*T = 17.*1 prefix \+ 5x5 grid = 26"):
        model(torch.randn(2, 3, 32, 32)).sum().backward()


def test_a_layer_without_grid_warns_once_by_name():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    hot.convert(model, HOTConfig())
    x = torch.randn(3, 20, 8)
    with pytest.warns(UserWarning) as caught:
        model(x).sum().backward()
    names = sorted(str(w.message).split(":")[0] for w in caught if "no token grid" in str(w.message))
    assert names == ["HOT layer '0'", "HOT layer '2'"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(x).sum().backward()  # once per layer
    fp = hot.convert(nn.Sequential(nn.Linear(8, 4)), HOTConfig(method="fp"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fp(x).sum().backward()  # methods without HLA do not care
