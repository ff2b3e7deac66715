"""HOT layers as custom ops: torch.compile keeps one graph, and compiled training is eager training."""

import copy
import gc

import pytest
import timm
import torch
import torch._dynamo as dynamo
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import hot
from hot.config import preset
from hot.functional import layer_forward
from hot.modules import HOTLinear


class SmallCNN(nn.Module):
    """A conv stem and a linear head: both HOT layer kinds in one graph."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.head = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.conv(x)).flatten(1))


def small_vit() -> nn.Module:
    return timm.create_model("vit_tiny_patch16_224", num_classes=10, img_size=32, patch_size=4, depth=2)


MODELS = {"vit": (small_vit, (4, 3, 32, 32)), "cnn": (SmallCNN, (4, 3, 8, 8))}


def converted(model: str, method: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    make, shape = MODELS[model]
    return hot.convert(make().train(), preset(method)), torch.randn(shape)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("method", ["hot", "hot_abc", "hot_abc_lqs", "luq"])
def test_converted_model_is_one_graph(model, method):
    net, x = converted(model, method)
    dynamo.reset()
    explained = dynamo.explain(net)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def train(net: nn.Module, x: torch.Tensor, steps: int, compiled: bool, amp: bool) -> list[float]:
    labels = torch.arange(x.shape[0]) % 10
    run = torch.compile(net, backend="aot_eager") if compiled else net
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(run(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "bf16_autocast"])
def test_recomputed_inputs_compile_to_one_graph_and_train_as_the_saved_codes_do(amp, monkeypatch):
    """recompute_inputs="all" under torch.compile: one graph, every qkv, proj (but an unfused attention's), fc1 and
    fc2 backward makes its input again (the source hooks and the identity check survive tracing), and the same losses
    and weights bit for bit as eager training that keeps the codes (also under bf16 autocast: fc2 reads GELU's bf16
    output, qkv the norm's float32)."""
    made_again = []
    original = hot.functional._recomputed_input
    monkeypatch.setattr(
        hot.functional, "_recomputed_input", lambda layer, *a: made_again.append(layer.hot_name) or original(layer, *a)
    )
    torch.manual_seed(0)
    eager = hot.convert(small_vit().train(), preset("hot_abc"))
    torch.manual_seed(0)
    compiled = hot.convert(small_vit().train(), preset("hot_abc").replace(recompute_inputs="all"))
    for model in (eager, compiled):  # after convert: traced, the pairing reads fused_attn, and proj keeps its codes
        model.blocks[1].attn.fused_attn = False
    x = torch.randn(MODELS["vit"][1])
    dynamo.reset()
    explained = dynamo.explain(compiled)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compiled.zero_grad()
    for layer in compiled.modules():  # explain ran one forward: start the hash steps again
        if isinstance(layer, HOTLinear | hot.modules.HOTConv2d):
            layer.hot_state.step = 0
    expected = train(eager, x, 3, compiled=False, amp=amp)
    dynamo.reset()
    made_again.clear()
    assert train(compiled, x, 3, compiled=True, amp=amp) == expected
    paired = {f"blocks.{i}.{name}" for i in range(2) for name in ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2")}
    paired.remove("blocks.1.attn.proj")
    assert sorted(made_again) == sorted(list(paired) * 3), made_again
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "bf16_autocast"])
def test_compiled_training_is_eager_training(model, amp):
    """Same seed, same hash steps, same codes: the compiled steps are bit for bit the eager ones, with no recompile."""
    eager, x = converted(model, "hot_abc")
    compiled = copy.deepcopy(eager)
    expected = train(eager, x, 3, compiled=False, amp=amp)
    dynamo.reset()
    with dynamo.config.patch(error_on_recompile=True):
        assert train(compiled, x, 3, compiled=True, amp=amp) == expected
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        assert torch.equal(a, b), name
    assert [layer.hot_state.step for _, layer in hot.hot_layers(compiled)] == [3] * len(list(hot.hot_layers(eager)))


def test_autocast_output_dtype_and_gradient_dtypes():
    net, x = converted("vit", "hot_abc")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = net(x)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in net.parameters())


def test_a_copy_is_a_layer_of_its_own():
    """deepcopy re-registers: the copy's backward reads the copy's state, not the original's."""
    net, x = converted("cnn", "hot")
    twin = copy.deepcopy(net)
    assert net.head.hot_handle != twin.head.hot_handle
    twin(x).sum().backward()
    assert (net.head.hot_state.step, twin.head.hot_state.step) == (0, 1)


def test_a_handle_outliving_its_layer_is_an_error():
    layer = HOTLinear.from_float(nn.Linear(4, 4), preset("hot"), 0)
    handle = layer.hot_handle
    del layer
    gc.collect()
    w = torch.randn(4, 4)
    with pytest.raises(RuntimeError, match=f"handle {handle} refers to a layer that no longer exists"):
        layer_forward(torch.randn(2, 4), w, None, handle, None, "input")


def test_layer_forward_op_passes_opcheck():
    layer = HOTLinear.from_float(nn.Linear(32, 16), preset("hot_abc"), 0)
    x = torch.randn(2, 16, 32, requires_grad=True)
    torch.library.opcheck(
        layer_forward,
        (x, layer.weight, layer.bias, layer.hot_handle, None, "codes"),
        test_utils=("test_schema", "test_faketensor", "test_autograd_registration"),
    )


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "size"),
    [
        (4, 4, 0, (28, 28)),
        (16, 16, 0, (32, 48)),
        (16, 16, 0, (40, 35)),
        ((2, 3), (2, 3), 0, (7, 10)),
        (1, 1, 0, (5, 6)),
        (3, 1, 1, (9, 9)),
        (3, 2, 0, (9, 11)),
    ],
)
@pytest.mark.parametrize(("batch", "channels"), [(1, 1), (3, 4)])
@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
def test_unfold_and_fold_equal_im2col_and_col2im(kernel, stride, padding, size, batch, channels, channels_last):
    """A patch embedding (stride = kernel) unfolds by a reshape; other convolutions by im2col: the same columns,
    and the same col2im (remainder rows and columns no patch reads get zero gradient), cast alike."""
    from hot.functional import fold_grad_input, unfold_input

    conv = torch.nn.Conv2d(channels, 8, kernel, stride, padding)
    x = torch.randn(batch, channels, *size)
    x = x.to(memory_format=torch.channels_last) if channels_last else x
    cols = F.unfold(x, conv.kernel_size, conv.dilation, conv.padding, conv.stride)
    expected = cols.transpose(1, 2).reshape(-1, cols.shape[1])
    assert torch.equal(unfold_input(x, conv), expected)
    g_cols = torch.randn_like(expected)
    folded = F.fold(
        g_cols.reshape(batch, -1, cols.shape[1]).transpose(1, 2),
        size,
        conv.kernel_size,
        conv.dilation,
        conv.padding,
        conv.stride,
    )
    for dtype in (torch.float32, torch.bfloat16):
        g_x = fold_grad_input(g_cols, conv, list(x.shape), dtype)
        assert g_x.dtype == dtype and g_x.is_contiguous()
        assert torch.equal(g_x, folded.to(dtype))


class _Ops(TorchDispatchMode):
    """The aten ops a call runs."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("size", [(32, 48), (40, 35)], ids=["divisible", "remainder"])
def test_patch_embedding_unfolds_and_folds_with_one_copy(size):
    """The reshape path moves the data once each way (the cast included): no im2col/col2im, no pad or cast pass."""
    from hot.functional import fold_grad_input, unfold_input

    conv, x = torch.nn.Conv2d(3, 8, 16, 16), torch.randn(2, 3, *size)
    moves = {"clone", "copy_", "_to_copy", "constant_pad_nd", "im2col", "col2im"}
    with _Ops() as unfold:
        cols = unfold_input(x, conv)
    with _Ops() as fold:
        fold_grad_input(cols, conv, list(x.shape), torch.bfloat16)
    assert [n for n in unfold.names if n in moves] == ["clone"]
    assert [n for n in fold.names if n in moves] == ["copy_"]


@pytest.mark.parametrize("method", ["fp", "hot", "hot_abc", "luq"])
@pytest.mark.parametrize("size", [(32, 48), (40, 35)], ids=["divisible", "remainder"])
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "autocast_bf16"])
def test_patch_embedding_layer_equals_its_im2col_path(method, size, amp, monkeypatch):
    """A converted patch embedding gives, by the reshape, the outputs and gradients im2col/col2im give, bit for bit."""
    torch.manual_seed(0)
    fast = hot.convert(nn.Conv2d(3, 32, 16, 16), preset(method))
    im2col = copy.deepcopy(fast)
    x, g_y = torch.randn(2, 3, *size), torch.randn(2, 32, size[0] // 16, size[1] // 16)

    def run(layer: nn.Module) -> list[torch.Tensor]:
        inp = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            y = layer(inp)
        y.backward(g_y.to(y.dtype))
        return [y, inp.grad, layer.weight.grad, layer.bias.grad]

    expected = run(fast)
    monkeypatch.setattr(hot.functional, "_patchifies", lambda _layer: False)
    for a, b in zip(expected, run(im2col), strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("method", ["fp", "hot", "hot_abc_lqs", "luq", "lbp_wht"])
@pytest.mark.parametrize("frozen", [False, True], ids=["trained", "frozen_weights"])
def test_eager_calls_skip_the_op_dispatch_with_the_ops_results(model, method, frozen, monkeypatch):
    """Eager calls run the ops' functions without their dispatch: gradients and saved state bit for bit the ops'."""
    direct, x = converted(model, method)
    through_ops = copy.deepcopy(direct)
    for net in (direct, through_ops):
        for layer in [layer for _, layer in hot.hot_layers(net)][:1] if frozen else []:
            layer.weight.requires_grad_(False)

    def grads(net: nn.Module) -> list[torch.Tensor]:
        inp = x.clone().requires_grad_(True)
        for _ in range(2):  # two steps: the hash step advances the same way
            net.zero_grad()
            inp.grad = None
            F.cross_entropy(net(inp), torch.arange(x.shape[0]) % 10).backward()
        return [inp.grad, *(p.grad for p in net.parameters() if p.requires_grad)]

    calls = []
    real_op = hot.functional.layer_forward
    monkeypatch.setattr(hot.functional, "layer_forward", lambda *a: calls.append(1) or real_op(*a))
    expected_direct = grads(direct)
    assert calls == []  # eager: no op call
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    expected_ops = grads(through_ops)
    assert len(calls) == 2 * len(list(hot.hot_layers(through_ops)))
    for a, b in zip(expected_direct, expected_ops, strict=True):
        assert torch.equal(a, b)
    steps = [[layer.hot_state.step for _, layer in hot.hot_layers(net)] for net in (direct, through_ops)]
    assert steps[0] == steps[1]
