import copy
import warnings

import pytest
import timm
import torch
from torch import nn

import hot
from hot import HOTConfig, functional, recompute
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
        model, HOTConfig(), exclude=["fc", "conv1"], module_filter_fn=lambda m, fqn: not fqn.startswith("layer4")
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


def test_module_filter_is_a_deprecated_alias_of_module_filter_fn_in_the_other_order():
    def keep_first(name, module):
        assert isinstance(name, str) and isinstance(module, nn.Module)
        return name == "0"

    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    with pytest.warns(DeprecationWarning, match="module_filter_fn"):
        hot.convert(model, HOTConfig(), module_filter=keep_first)
    assert [name for name, _ in hot.hot_layers(model)] == ["0"]
    with pytest.raises(ValueError, match="module_filter_fn only"):
        hot.convert(nn.Linear(4, 4), module_filter=keep_first, module_filter_fn=lambda m, fqn: True)


def test_exclude_is_a_list_of_names_not_a_string():
    model = nn.Sequential(nn.Linear(4, 4))
    with pytest.raises(ValueError, match="exclude must be a list"):
        hot.convert(model, HOTConfig(), exclude="head")
    assert not list(hot.hot_layers(model))


@pytest.mark.parametrize("cls", ["linear", "conv"])
def test_a_bare_layer_converts_to_the_hot_layer_it_returns(cls):
    plain = nn.Linear(16, 16) if cls == "linear" else nn.Conv2d(3, 4, 3)
    layer = hot.convert(plain, HOTConfig(abc=True))
    assert isinstance(layer, HOTLinear if cls == "linear" else HOTConv2d) and layer.weight is plain.weight
    assert layer.hot_config == HOTConfig(abc=True) and layer.hot_state.index == 0
    back = hot.unconvert(layer)
    assert type(back) is type(plain) and back.weight is plain.weight
    excluded = nn.Linear(4, 4)
    with pytest.warns(UserWarning, match="converted no layer"):
        assert hot.convert(excluded, module_filter_fn=lambda m, fqn: fqn != "") is excluded


def test_a_second_convert_with_another_config_is_refused_with_the_same_it_converts_the_rest():
    model = nn.Sequential(nn.Linear(4, 4))
    hot.convert(model, HOTConfig())
    with pytest.raises(ValueError, match=r"hot.unconvert\(model\).*hot.set_config"):
        hot.convert(model, HOTConfig(abc=True))
    model.append(nn.Linear(4, 4))
    hot.convert(model, HOTConfig())
    assert [(n, m.hot_state.index) for n, m in hot.hot_layers(model)] == [("0", 0), ("1", 1)]


def test_converting_no_layer_warns():
    with pytest.warns(UserWarning, match="converted no layer of Sequential"):
        hot.convert(nn.Sequential(nn.ReLU(), nn.Conv2d(4, 4, 3, groups=4)))
    frozen = nn.Sequential(nn.Linear(4, 4).requires_grad_(False))
    with pytest.warns(UserWarning, match="include_frozen"):
        hot.convert(frozen)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hot.convert(frozen, include_frozen=True)


@pytest.mark.parametrize("cls", ["linear", "conv"])
def test_conversion_keeps_hooks_and_module_state_both_ways(cls):
    """Forward hooks and pre-hooks, backward hooks, state-dict hooks and extra attributes survive convert and
    unconvert; the handles registered before still remove the hooks."""
    plain = nn.Linear(8, 8) if cls == "linear" else nn.Conv2d(8, 8, 3, padding=1)
    x = torch.randn(2, 8, 4, 4) if cls == "conv" else torch.randn(2, 16, 8)
    calls = []
    forward = plain.register_forward_hook(lambda m, i, o: calls.append("forward"))
    plain.register_forward_pre_hook(lambda m, i: calls.append("pre"))
    plain.register_full_backward_hook(lambda m, gi, go: calls.append("backward"))
    plain._register_state_dict_hook(lambda m, sd, prefix, local: sd.update({prefix + "marked": torch.ones(1)}))
    plain.lora_scale = 0.5
    plain.register_buffer("mask", torch.ones(8))
    plain.eval()
    model = nn.Sequential(plain)
    for step in ("convert", "unconvert"):
        (hot.convert if step == "convert" else hot.unconvert)(model, *([HOTConfig()] if step == "convert" else []))
        layer = model[0]
        assert isinstance(layer, HOTLinear | HOTConv2d) == (step == "convert")
        calls.clear()
        model(x.requires_grad_(True)).sum().backward()
        assert calls == ["pre", "forward", "backward"], step
        assert layer.lora_scale == 0.5 and not layer.training and torch.equal(layer.mask, torch.ones(8))
        assert "0.marked" in model.state_dict() and "0.mask" in model.state_dict()
    forward.remove()
    calls.clear()
    model(x)
    assert calls == ["pre"]


def _small_vit():
    return timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=10, depth=2
    )


@pytest.mark.parametrize("how", ["deepcopy", "torch.save", "ModelEmaV2"])
def test_converted_model_copies_and_pickles(how):
    """A converted model survives copy.deepcopy, torch.save/load and timm's ModelEmaV2 (which deep-copies): the copy
    carries the config and step on, its layers are its own (a step of one leaves the other's counter alone), and its
    backward gives the original's gradients bit for bit."""
    import io

    from timm.utils import ModelEmaV2

    torch.manual_seed(0)
    model = hot.convert(_small_vit(), HOTConfig(abc=True, lqs=True))
    x = torch.randn(2, 3, 32, 32)
    model(x).sum().backward()
    if how == "deepcopy":
        twin = copy.deepcopy(model)
    elif how == "ModelEmaV2":
        ema = ModelEmaV2(model, decay=0.0)  # the update copies the weights exactly
        ema.update(model)
        twin = ema.module
    else:
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        twin = torch.load(buffer, weights_only=False)
    pairs = list(zip(hot.hot_layers(model), hot.hot_layers(twin), strict=True))
    assert all(a.hot_config == b.hot_config and a.hot_state == b.hot_state for (_, a), (_, b) in pairs)
    assert all(a.hot_handle != b.hot_handle for (_, a), (_, b) in pairs)
    twin.train()
    for net in (model, twin):
        net.zero_grad()
        net(x).sum().backward()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad)
    twin(x).sum().backward()
    assert pairs[0][1][1].hot_state.step == pairs[0][0][1].hot_state.step + 1


def test_plain_state_dicts_load_strictly_both_ways():
    """A converted model's (or its ModelEmaV2's) state_dict_for_plain loads strictly into the plain architecture, and
    a plain state dict loads strictly into a converted model through load_plain_state_dict, which keeps the HOT
    layers' own step counters."""
    from timm.utils import ModelEmaV2

    torch.manual_seed(0)
    converted = hot.convert(_small_vit(), HOTConfig())
    converted(torch.randn(2, 3, 32, 32)).sum().backward()
    ema = ModelEmaV2(converted, decay=0.5)
    plain = _small_vit()
    with pytest.raises(RuntimeError, match="_extra_state"):
        plain.load_state_dict(converted.state_dict())
    for source in (converted, ema.module):
        plain.load_state_dict(hot.state_dict_for_plain(source), strict=True)
        assert all(torch.equal(v, source.state_dict()[k]) for k, v in plain.state_dict().items())
    other = _small_vit()
    assert hot.load_plain_state_dict(converted, other.state_dict()) == ([], [])
    assert torch.equal(converted.head.weight, other.head.weight)
    assert converted.head.hot_state.step == 1  # its own, kept
    with pytest.raises(RuntimeError, match="missing keys"):
        hot.load_plain_state_dict(converted, {k: v for k, v in other.state_dict().items() if k != "head.bias"})
    layer = hot.convert(nn.Linear(4, 4))
    assert set(hot.state_dict_for_plain(layer)) == {"weight", "bias"}


def _small_vit():
    torch.manual_seed(0)
    return timm.create_model(
        "vit_tiny_patch16_224", img_size=32, patch_size=8, depth=2, num_classes=10, embed_dim=64, num_heads=2
    )


def _distinct_saved_bytes(model, x):
    """Bytes of the distinct non-parameter storages autograd keeps for one forward's backward."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params:
            seen[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    return out, sum(seen.values())


@pytest.mark.parametrize("mode", ["activations", "all"])
@pytest.mark.parametrize("abc", [True, False])
def test_recomputed_inputs_keep_the_gradients_bit_for_bit_and_fewer_bytes(abc, mode):
    """recompute_inputs: fc2 keeps fc1's output (which GELU keeps anyway), proj its input (a view of the attention's
    output, which the attention keeps), with "all" qkv and fc1 their LayerNorm's input (which the norm keeps),
    instead of their inputs or codes, and they make them again in the backward: the same gradients over two steps,
    and each paired layer's codes (or inputs) fewer saved bytes."""
    x = torch.randn(4, 3, 32, 32)
    y = torch.randint(0, 10, (4,))
    runs = {}
    for chosen in ("none", mode):
        model = hot.convert(_small_vit(), HOTConfig(backend="fake", abc=abc, recompute_inputs=chosen))
        fed_by_norms = [layer for b in model.blocks for layer in (b.attn.qkv, b.mlp.fc1)]
        assert all((b.mlp.fc2.hot_input_source is not None) == (chosen != "none") for b in model.blocks)
        assert all((layer.hot_input_source is not None) == (chosen == "all") for layer in fed_by_norms)
        assert all((b.attn.proj.hot_input_source is not None) == (chosen != "none") for b in model.blocks)
        assert model.head.hot_input_source is None
        grads = []
        for _ in range(2):  # a second step: new dither, the same on both sides
            model.zero_grad()
            out, nbytes = _distinct_saved_bytes(model, x)
            nn.functional.cross_entropy(out, y).backward()
            grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        runs[chosen] = grads, nbytes, model
    (plain, plain_bytes, _), (again, again_bytes, model) = runs["none"], runs[mode]
    for a, b in zip(plain, again, strict=True):
        assert a.keys() == b.keys()
        assert all(torch.equal(a[n], b[n]) for n in a), [n for n in a if not torch.equal(a[n], b[n])]
    tokens = 4 * (1 + 16)  # batch x (class token + 4x4 patches)
    block = model.blocks[0]
    channels = block.mlp.fc2.in_features + (block.attn.qkv.in_features + block.mlp.fc1.in_features) * (mode == "all")
    # ABC: int8 codes of 4 samples x (the 4x4 window's 8 kept rows + the class token's 1) and a float32 scale a
    # layer, proj's among them; without ABC each layer kept its float32 input, where proj's was the attention's
    # output anyway
    proj = block.attn.proj.in_features
    kept = 4 * (8 + 1) * (channels + proj) + (4 if mode == "all" else 2) * 4 if abc else tokens * channels * 4
    assert plain_bytes - again_bytes == len(model.blocks) * kept


def test_a_recomputed_input_is_made_in_the_g_w_chain(monkeypatch):
    """A paired layer makes its input again inside the backend's g_w chain, after g_x's (on one stream; in a CUDA
    graph the real backend runs that chain on a second stream, so the making runs beside g_x's GEMM), not before
    the backward's GEMMs start."""
    from hot.backends import reference

    model = hot.convert(_small_vit(), HOTConfig(backend="fake", recompute_inputs="activations"))
    events = []
    original_recompute, original_matmul = functional._recomputed_input, reference.ReferenceBackend.hq_matmul

    def recompute(layer, *args):
        events.append(("made", layer.hot_name))
        return original_recompute(layer, *args)

    def hq_matmul(self, *args, **kwargs):  # the g_x chain's GEMM
        events.append(("g_x", None))
        return original_matmul(self, *args, **kwargs)

    def grad_output_2d(layer, g_y):  # the first thing a layer's backward does
        events.append(("start", layer.hot_name))
        return original_2d(layer, g_y)

    original_2d = functional._grad_output_2d
    monkeypatch.setattr(functional, "_grad_output_2d", grad_output_2d)
    monkeypatch.setattr(functional, "_recomputed_input", recompute)
    monkeypatch.setattr(reference.ReferenceBackend, "hq_matmul", hq_matmul)
    model(torch.randn(2, 3, 32, 32)).sum().backward()
    made = [i for i, (what, _) in enumerate(events) if what == "made"]
    assert all(events[i - 2 : i] == [("start", events[i][1]), ("g_x", None)] for i in made), events
    assert {events[i][1] for i in made} == {f"blocks.{b}.{name}" for b in range(2) for name in ("mlp.fc2", "attn.proj")}


def _source_hooks(module):
    return [h for h in module._forward_hooks.values() if recompute._is_source_hook(h)]


def _recomputing_layers(model, monkeypatch, steps=1):
    """Names of the layers whose backward made their input again, over ``steps`` training steps (same seed)."""
    names = []
    original = functional._recomputed_input

    def counted(layer, *args):
        names.append(layer.hot_name)
        return original(layer, *args)

    monkeypatch.setattr(functional, "_recomputed_input", counted)
    grads = []
    for _ in range(steps):
        torch.manual_seed(1)  # the same dropout masks on both sides
        model.zero_grad()
        model(torch.randn(2, 3, 32, 32)).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    monkeypatch.undo()
    return set(names), grads


def _edit_in_place(module, args):
    args[0].add_(0.25)


def _replace_output(module, args, output):
    return output * 2 + 1


def test_recompute_inputs_falls_back_wherever_x_is_not_its_source_output(monkeypatch):
    """Only a layer whose x is its source module's very output recomputes: a dropout after the activation, a user
    hook replacing the norm's output (registered before the pairing's), a pre-hook editing the layer's input in
    place, an activation swapped after convert, an attention switched to its unfused path after convert or with
    dropout on the CPU (which runs it unfused: no backward keeps its output) each leave that layer keeping its
    codes, with the gradients of a twin that keeps every layer's codes."""
    twins = []
    for mode in ("none", "all"):
        torch.manual_seed(0)
        model = _small_vit()
        model.blocks[1].mlp.drop1 = nn.Dropout(0.1)  # fc2's input is no longer the activation's output
        model.blocks[1].norm1.register_forward_hook(_replace_output)  # before convert: qkv reads the replacement
        hot.convert(model, HOTConfig(backend="fake", recompute_inputs=mode))
        model.blocks[0].attn.qkv.register_forward_pre_hook(_edit_in_place)
        model.blocks[0].mlp.act = nn.GELU(approximate="tanh")  # swapped after convert: no hook, fc2 keeps codes
        model.blocks[1].attn.fused_attn = False  # attn @ v: its backward keeps attn and v, not the output
        model.blocks[0].attn.attn_drop.p = 0.1  # fused_attn, but the CPU's SDPA takes its math path
        twins.append(model)
    keeps, recomputes = twins
    names, grads = _recomputing_layers(recomputes, monkeypatch)
    assert names == {"blocks.0.mlp.fc1", "blocks.1.mlp.fc1"}
    _, kept = _recomputing_layers(keeps, monkeypatch)
    assert all(torch.equal(a, b) for a, b in zip(kept[0], grads[0], strict=True))


def test_recompute_inputs_pairs_copies_and_pickles_and_unconvert_undoes_it():
    import pickle

    model = hot.convert(_small_vit(), HOTConfig(backend="fake", recompute_inputs="all"))
    block = model.blocks[0]
    assert [h.args[0] for h in _source_hooks(block.norm1)] == [block.attn.qkv]
    assert [h.args[0] for h in _source_hooks(block.mlp.act)] == [block.mlp.fc2]
    block.norm1(torch.randn(2, 17, 64, requires_grad=True))  # a source left that no layer took
    assert block.attn.qkv.hot_pending_source is not None
    for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        copied = twin.blocks[0]
        assert [h.args[0] for h in _source_hooks(copied.norm1)] == [copied.attn.qkv]
        assert copied.attn.qkv.hot_input_source.args[0] is copied.norm1
        assert copied.attn.qkv.hot_pending_source is None
        twin(torch.randn(2, 3, 32, 32)).sum().backward()
        assert all(b.attn.qkv.hot_pending_source is None for b in twin.blocks)  # nothing left holding a tensor
    with torch.no_grad():
        model(torch.randn(2, 3, 32, 32))
    assert all(b.attn.qkv.hot_pending_source is None for b in model.blocks)
    hot.unconvert(model)
    assert not any(_source_hooks(m) for m in model.modules())
    assert type(block.mlp.fc2) is nn.Linear and not hasattr(block.mlp.fc2, "hot_input_source")


def test_recompute_inputs_without_a_qualifying_layer_warns():
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    with pytest.warns(UserWarning, match="recompute_inputs='activations' but no HOT layer qualifies"):
        hot.convert(model, HOTConfig(backend="fake", recompute_inputs="activations"))
    with pytest.raises(ValueError, match="recompute_inputs"):
        HOTConfig(recompute_inputs="mlp")


def test_set_config_pairs_and_unpairs_recomputed_inputs():
    model = hot.convert(_small_vit(), HOTConfig(backend="fake"))
    block = model.blocks[0]
    hot.set_config(model, recompute_inputs="activations")
    assert block.mlp.fc2.hot_input_source is not None and block.attn.qkv.hot_input_source is None
    hot.set_config(model, recompute_inputs="all")
    assert block.attn.qkv.hot_input_source is not None and len(_source_hooks(block.norm1)) == 1
    hot.set_config(model, recompute_inputs="all")
    assert len(_source_hooks(block.norm1)) == 1  # paired again, not twice
    hot.set_config(model, recompute_inputs="none")
    assert not any(_source_hooks(m) for m in model.modules())
    assert all(layer.hot_input_source is None for _, layer in hot.hot_layers(model))
