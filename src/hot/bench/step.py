"""The end-to-end step benchmark: ViT-B/16 training steps under bf16, torchao float8 and HOT, eager, compiled and
compiled with CUDA graphs."""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from collections import Counter
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..config import HOTConfig
from .report import step_spread

STEP_MODEL = "vit_base_patch16_224"
STEP_CLASSES = 100
# *_compile: torch.compile's default mode; *_graphs: mode="reduce-overhead" (CUDA graphs, no per-kernel host
# work). hot_nohead: HOT eager with the classifier left exact, as torchao_float8 leaves it. hot_recompute*: HOT with
# recompute_inputs="all" (qkv, proj, fc1 and fc2 make their inputs' codes again in their backward, hot.recompute),
# hot_recompute_act_graphs its "activations" (fc2 and proj only). *_fmix32_*: rounding_hash="fmix32" (one finaliser a
# stochastic code, hot.rounding).
STEP_VARIANTS = (
    "bf16",
    "bf16_compile",
    "bf16_graphs",
    "torchao_float8",
    "hot",
    "hot_compile",
    "hot_graphs",
    "hot_nohead",
    "hot_recompute",
    "hot_recompute_graphs",
    "hot_recompute_act_graphs",
    "hot_fmix32_graphs",
    "hot_recompute_act_fmix32_graphs",
)
COMPILE_MODES = {"_compile": "default", "_graphs": "reduce-overhead"}


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, amp: bool) -> Any:
    """One step: forward (bf16 autocast when ``amp``), cross entropy, backward, optimiser step. Returns the loss."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
        loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def time_training(
    net: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    steps: int,
    warmup: int,
    compile_mode: str | None = None,
    calibrate_lqs: bool = False,
    amp: bool = True,
    lr: float = 1e-4,
) -> dict[str, Any]:
    """Median step time (ms) and peak memory of training ``net`` (already on the images' device) with AdamW.

    With ``calibrate_lqs`` the first step runs eagerly inside :func:`hot.lqs.calibrate`, as the training loop
    does on its first batch; compilation (``torch.compile`` in ``compile_mode``, where one is given) comes after
    it, so the compiled graph sees the decisions.
    CUDA steps are timed with CUDA events (peak memory: ``max_memory_allocated`` over the timed steps; under
    ``reduce-overhead`` over the warm-up as well, where CUDA graphs allocate their memory while recording and
    replays allocate nothing), CPU steps with ``perf_counter`` (no peak memory).
    """
    from .. import lqs

    device = images.device
    cuda = device.type == "cuda"
    optimizer = torch.optim.AdamW(net.parameters(), lr=lr)
    result: dict[str, Any] = {}
    if calibrate_lqs:
        with lqs.calibrate(net):
            train_step(net, optimizer, images, labels, amp)
        choices = list(lqs.decisions(net).values())
        result["lqs"] = {str(c).lower(): choices.count(c) for c in ("per_token", "per_tensor", None)}
    model: nn.Module = net if compile_mode is None else torch.compile(net, mode=compile_mode)
    graphs = compile_mode == "reduce-overhead"
    if cuda and graphs:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    for _ in range(warmup):
        train_step(model, optimizer, images, labels, amp)
    if cuda:
        torch.cuda.synchronize(device)
        if not graphs:
            torch.cuda.reset_peak_memory_stats(device)
    result["warmup_s"] = time.perf_counter() - started
    times: list[float] = []
    events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    loss: Any = None
    for _ in range(steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = train_step(model, optimizer, images, labels, amp)
            end.record()
            events.append((start, end))
        else:
            t0 = time.perf_counter()
            loss = train_step(model, optimizer, images, labels, amp)
            times.append((time.perf_counter() - t0) * 1e3)
    if cuda:
        torch.cuda.synchronize(device)
        times = [s.elapsed_time(e) for s, e in events]
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    else:
        result["peak_memory_gib"] = None
    result.update(
        step_ms=statistics.median(times),
        step_ms_min=min(times),
        step_ms_spread=step_spread(times),
        step_ms_all=times,
        images_per_s=len(images) / (statistics.median(times) / 1e3),
        final_loss=float(loss.item()) if loss is not None else None,
    )
    return result


def free_memory() -> None:
    gc.collect()
    with contextlib.suppress(Exception):  # compiled graphs and their guards hold on to the models
        torch._dynamo.reset()
    gc.collect()
    if torch.cuda.is_available():
        with contextlib.suppress(RuntimeError):  # a sticky CUDA error is reported by the next measurement
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def _is_head(fqn: str) -> bool:
    return fqn == "head" or fqn.startswith("head.")


def _torchao_filter(module: nn.Module, fqn: str) -> bool:
    # The classifier (100 classes) stays bf16; torchao's float8 GEMMs need both dims multiples of 16.
    if _is_head(fqn):
        return False
    return not isinstance(module, nn.Linear) or (module.in_features % 16 == 0 and module.out_features % 16 == 0)


def _convert_hot(net: nn.Module, config: HOTConfig, keep_head: bool) -> dict[str, Any]:
    """Converts ``net`` with ``config`` (the classifier left exact with ``keep_head``); returns what was converted."""
    from ..convert import convert, hot_layers

    convert(net, config, module_filter=(lambda name, _: not _is_head(name)) if keep_head else None)
    layers = dict(hot_layers(net))
    return {
        "config": config.to_dict(),
        "converted_layers": len(layers),
        "converted_by_type": dict(Counter(type(layer).__name__ for layer in layers.values())),
        "head_converted": any(_is_head(name) for name in layers),
        "recomputed_inputs": sum(layer.hot_input_source is not None for layer in layers.values()),
    }


def step_variant(
    variant: str,
    batch: int,
    steps: int,
    warmup: int,
    seed: int,
    hot: HOTConfig | None = None,
    *,
    device: str = "cuda",
    model_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One end-to-end variant from a fresh :data:`STEP_MODEL` (same seed), timed on ``device``. ``hot`` is the HOT
    variants' config (default: real backend, ABC, LQS); ``model_kwargs`` go to ``timm.create_model`` (a smaller
    ViT: ``img_size``, ``depth``, ``embed_dim``, ``num_heads``); the images are the model's input size."""
    import timm

    if variant not in STEP_VARIANTS:
        raise ValueError(f"unknown step variant {variant!r}; known step variants: {', '.join(STEP_VARIANTS)}")
    with contextlib.suppress(Exception):
        torch._dynamo.utils.counters.clear()
    torch.manual_seed(seed)
    net = timm.create_model(STEP_MODEL, num_classes=STEP_CLASSES, **(model_kwargs or {}))
    suffix = next((s for s in COMPILE_MODES if variant.endswith(s)), None)
    compile_mode = "default" if variant == "torchao_float8" else COMPILE_MODES.get(suffix or "")
    lqs_ = False
    converted: dict[str, Any] | None = None
    if variant == "torchao_float8":
        try:
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        except ImportError as err:
            return {"skipped": f"torchao is not importable: {err}"}
        recipe = getattr(Float8LinearConfig, "from_recipe_name", None)
        config = recipe("tensorwise") if recipe is not None else Float8LinearConfig()
        convert_to_float8_training(net, module_filter_fn=_torchao_filter, config=config)
    elif variant.startswith("hot"):
        config = hot or HOTConfig(backend="real", abc=True, lqs=True, seed=seed)
        if "recompute" in variant:
            config = config.replace(recompute_inputs="activations" if "_act" in variant else "all")
        if "_fmix32" in variant:
            config = config.replace(rounding_hash="fmix32")
        converted = _convert_hot(net, config, keep_head=variant == "hot_nohead")
        lqs_ = config.lqs
    net = net.to(device).train()
    gen = torch.Generator(device=device).manual_seed(seed)
    height, width = net.patch_embed.img_size
    images = torch.randn(batch, 3, height, width, device=device, generator=gen)
    labels = torch.randint(0, STEP_CLASSES, (batch,), device=device, generator=gen)
    result = time_training(
        net, images, labels, steps=steps, warmup=warmup, compile_mode=compile_mode, calibrate_lqs=lqs_
    )
    result["compiled"] = compile_mode is not None
    result["compile_mode"] = compile_mode
    if converted is not None:
        result["hot"] = converted
    if compile_mode is not None:
        with contextlib.suppress(Exception):  # graphs and graph breaks say whether torch.compile kept one graph
            counters = torch._dynamo.utils.counters
            result["dynamo"] = {
                **{k: int(v) for k, v in counters["stats"].items()},
                "graph_breaks": int(sum(counters["graph_break"].values())),
                "graph_break_reasons": [str(k)[:300] for k in list(counters["graph_break"])[:10]],
                # reduce-overhead: why CUDA graphs were not used, where they were not (empty: they were)
                "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"]),
            }
    return result
