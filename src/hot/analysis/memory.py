"""``hot memory``: training memory of a timm model under FP, HOT and HOT+ABC, counted two ways.

``paper``: the authors' accounting (docs/memory.md): fp32 weights, gradients and AdamW's two moments of the trainable
parameters, plus the output of every Linear/Conv at 4 bytes per element, or at the ABC code size for HOT+ABC; with
their quirk that ``qkv`` parameters count three times and ``qkv`` outputs four times.
``measured``: every tensor autograd actually saves for backward (deduplicated by storage, parameters excluded), plus
parameters, gradients and AdamW state; on CUDA also the peak allocated memory of one full training step. With
``--autocast bf16`` the forward runs under ``torch.autocast`` (what a user trains with on a GPU), which also saves
autocast's low-precision copies of the weights once per step, whatever the batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..config import HOTConfig, preset
from ..convert import convert, hot_layers
from ..hla import HLA_BLOCK
from ..paper import paper_values
from ..train.models import create_model, default_image_size

GIB = 2**30
FP32_BYTES = 4
ADAMW_STATES = 2  # exp_avg and exp_avg_sq
AUTOCAST_DTYPES = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def abc_bytes_per_element(config: HOTConfig) -> float:
    """Bytes ABC keeps per element of x: Q8 codes of r of every 16 positions (8 bits · 8/16 = half a byte)."""
    return config.gw_bits / 8 * config.hla_rank / HLA_BLOCK


def paper_activation_bytes_per_element(config: HOTConfig) -> float:
    """The authors' per-element activation cost: ABC's code size with ABC, else fp32 (HOT without ABC keeps x)."""
    return abc_bytes_per_element(config) if config.abc else float(FP32_BYTES)


def _gb(nbytes: float) -> float:
    return nbytes / GIB


def _parameter_rows(model: nn.Module, qkv_quirk: bool) -> dict[str, float]:
    """Bytes of fp32 weights, gradients and AdamW state of the trainable parameters."""
    count = 0
    for name, param in model.named_parameters():
        if param.requires_grad:
            count += param.numel() * (3 if qkv_quirk and "qkv" in name else 1)
    return {
        "weight_bytes": count * FP32_BYTES,
        "gradient_bytes": count * FP32_BYTES,
        "optimizer_bytes": count * FP32_BYTES * ADAMW_STATES,
    }


def layer_output_elements(model: nn.Module, image: torch.Tensor) -> dict[str, int]:
    """Output elements of every nn.Linear / nn.Conv2d (HOT layers included) in one forward of ``image``."""
    counts: dict[str, int] = {}

    def hook(name: str) -> Any:
        def record(module: nn.Module, args: Any, output: torch.Tensor) -> None:
            counts[name] = counts.get(name, 0) + output.numel()

        return record

    handles = [
        module.register_forward_hook(hook(name))
        for name, module in model.named_modules()
        if isinstance(module, (nn.Linear, nn.Conv2d))
    ]
    try:
        with torch.no_grad():
            model(image)
    finally:
        for handle in handles:
            handle.remove()
    return counts


def paper_accounting(
    model_name: str, batch_size: int, num_classes: int, methods: list[str], image_size: int | None = None
) -> list[dict[str, Any]]:
    """The authors' accounting for each method, one row each (shapes traced on the meta device: no allocation)."""
    model = create_model(model_name, num_classes, 3, device="meta").eval()
    size = image_size or default_image_size(model)
    with _image_size_checked(model_name, image_size):
        outputs = layer_output_elements(model, torch.empty(batch_size, 3, size, size, device="meta"))
    # the authors' script counts the fused qkv projection's output four times
    elements = sum(n * (4 if "qkv" in name else 1) for name, n in outputs.items())
    params = _parameter_rows(model, qkv_quirk=True)
    rows = []
    for method in methods:
        activation = elements * paper_activation_bytes_per_element(preset(method))
        rows.append(_row("paper", model_name, method, batch_size, size, {**params, "activation_bytes": activation}))
    return rows


def _row(
    accounting: str, model: str, method: str, batch_size: int, image_size: int, parts: dict[str, float]
) -> dict[str, Any]:
    total = sum(parts[k] for k in ("weight_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes"))
    row: dict[str, Any] = {
        "accounting": accounting,
        "model": model,
        "method": method,
        "batch_size": batch_size,
        "image_size": image_size,
    }
    for key in ("weight", "gradient", "optimizer", "activation"):
        row[f"{key}_gb"] = round(_gb(parts[f"{key}_bytes"]), 4)
    row["total_gb"] = round(_gb(total), 4)
    row.update({k: int(v) for k, v in parts.items()})
    row["total_bytes"] = int(total)
    return row


def _storage_key(t: torch.Tensor) -> int:
    # the StorageImpl address: shared by views, distinct per allocation on every device, meta included
    return t.untyped_storage()._cdata


@contextmanager
def _recording_abc_codes(model: nn.Module, keys: set[int]) -> Iterator[None]:
    """Note the storages of what ABC layers pack, so they can be counted at their integer width."""
    originals = []
    for _, layer in hot_layers(model):
        method = layer.hot_method
        original = method.pack_input

        def pack(x: torch.Tensor, windows: Any, layer_keys: Any, _original: Any = original) -> tuple:
            packed = _original(x, windows, layer_keys)
            keys.add(_storage_key(packed[0]))  # the codes; the scale stays fp32
            return packed

        method.pack_input = pack
        originals.append(method)
    try:
        yield
    finally:
        for method in originals:
            del method.pack_input


def saved_tensor_bytes(model: nn.Module, image: torch.Tensor, code_bytes: float) -> tuple[torch.Tensor, dict[str, int]]:
    """Run the forward; bytes of the distinct non-parameter storages autograd saves for backward.

    ``stored``: as held (the fake backend keeps integer codes in float32); ``packed``: ABC codes counted at
    ``code_bytes`` per element, what the integer backend holds.
    """
    param_keys = {_storage_key(p) for p in model.parameters()}
    seen: dict[int, torch.Tensor] = {}
    code_keys: set[int] = set()

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in param_keys and key not in seen:
            seen[key] = t
        return t

    with _recording_abc_codes(model, code_keys), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = model(image)
    stored = packed = 0
    for key, t in seen.items():
        nbytes = t.untyped_storage().nbytes()
        stored += nbytes
        packed += int(nbytes / t.element_size() * code_bytes) if key in code_keys else nbytes
    return output, {"stored": stored, "packed": packed}


def measured_accounting(
    model_name: str,
    batch_size: int,
    num_classes: int,
    methods: list[str],
    device: str = "meta",
    image_size: int | None = None,
    autocast: str = "none",
) -> list[dict[str, Any]]:
    """Saved-for-backward bytes of one forward per method plus parameter state; on CUDA also a step's peak.

    ``autocast`` (``none``, ``bf16``, ``fp16``) runs the forward under ``torch.autocast`` (not on ``meta``).
    """
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda asked for, but no CUDA device is available")
    if autocast not in AUTOCAST_DTYPES:
        raise ValueError(f"--autocast must be one of {list(AUTOCAST_DTYPES)}, got {autocast!r}")
    amp_dtype = AUTOCAST_DTYPES[autocast]
    if amp_dtype is not None and device == "meta":
        raise ValueError("--autocast needs --device cpu or cuda: the meta device has no autocast")
    rows = []
    for method in methods:
        config = preset(method)
        model = create_model(model_name, num_classes, 3, device=device).train()
        if method != "fp":  # FP is plain PyTorch, the baseline HOT is compared with
            convert(model, config)
        size = image_size or default_image_size(model)
        generator_device = "cpu" if device == "meta" else device
        image = torch.randn(batch_size, 3, size, size, device=generator_device).to(device)
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        autocast_context = torch.autocast(device, dtype=amp_dtype) if amp_dtype is not None else nullcontext()
        with _image_size_checked(model_name, image_size), autocast_context:
            output, saved = saved_tensor_bytes(model, image, config.gw_bits / 8)  # one code per kept row element
        parts = {**_parameter_rows(model, qkv_quirk=False), "activation_bytes": saved["packed"]}
        row = _row("measured", model_name, method, batch_size, size, parts)
        row["activation_stored_bytes"] = saved["stored"]
        row["device"] = device
        row["autocast"] = autocast
        if device == "cuda":
            row["cuda_peak_bytes"] = _cuda_step_peak(model, output, num_classes)
            row["cuda_peak_gb"] = round(_gb(row["cuda_peak_bytes"]), 4)
        rows.append(row)
        del model, output
    return rows


@contextmanager
def _image_size_checked(model_name: str, image_size: int | None) -> Iterator[None]:
    """A model built for one input size (a ViT's patch grid) fails in its forward on another: say so in one line."""
    try:
        yield
    except (AssertionError, RuntimeError) as err:
        if image_size is None:
            raise
        problem = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"--image-size {image_size} does not fit {model_name}: {problem}") from err


def _cuda_step_peak(model: nn.Module, output: torch.Tensor, num_classes: int) -> int:
    """Finish one training step (loss, backward, AdamW) and return the peak allocated bytes since the forward began."""
    labels = torch.randint(0, num_classes, (output.shape[0],), device=output.device)
    F.cross_entropy(output, labels).backward()
    optimizer = torch.optim.AdamW(model.parameters())
    optimizer.step()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def paper_reference(model_name: str, batch_size: int) -> dict[str, Any]:
    """The paper's numbers this run can be compared with (memory figure at its batch, Table 1 for ViT-B)."""
    values = paper_values()
    figure, table1 = values["memory_figure"], values["table1"]
    ref: dict[str, Any] = {}
    if model_name == figure["model"]:
        if batch_size == figure["batch_size"]:
            ref["memory_figure"] = {k: figure[k] for k in ("fp", "hot_abc")}
        ref["table1_memory_gb"] = {row["method"]: row["memory_gb"] for row in table1["rows"]}
    return ref
