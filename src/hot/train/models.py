"""The models of ``hot train``: timm models by name, with their initial weights, HOT and LoRA as the method says
(:func:`build_model`), and small models for the embedded (CPU) experiments, registered with timm so configs name
them like any timm model:

``vit_tiny_fmnist``: a 3-block ViT, patch 4, width 64, on 28x28 grey images (50 tokens).
``resnet_tiny_fmnist``: a narrow one-block-per-stage ResNet with a CIFAR-style stem, for 28x28 grey images.
``resnet18_cifar``: ResNet-18 with the usual CIFAR stem (3x3 stride-1 convolution, no max-pool), for 32x32.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

import timm
import torch
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models.resnet import BasicBlock, ResNet
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from ..convert import convert
from ..lora import apply_lora
from .data import CIFAR10_MEAN, CIFAR10_STD, FASHION_MNIST_MEAN, FASHION_MNIST_STD

if TYPE_CHECKING:
    from .config import TrainConfig


def _cfg(input_size: tuple[int, int, int], mean: tuple, std: tuple, classifier: str, **kwargs: Any) -> dict:
    return {
        "input_size": input_size,
        "num_classes": 10,
        "mean": mean,
        "std": std,
        "classifier": classifier,
        "crop_pct": 1.0,
        **kwargs,
    }


# timm's register_model reads this module-level name to attach the configs.
default_cfgs = generate_default_cfgs(
    {
        "vit_tiny_fmnist": _cfg(
            (1, 28, 28), FASHION_MNIST_MEAN, FASHION_MNIST_STD, "head", first_conv="patch_embed.proj"
        ),
        "resnet_tiny_fmnist": _cfg((1, 28, 28), FASHION_MNIST_MEAN, FASHION_MNIST_STD, "fc", first_conv="conv1"),
        "resnet18_cifar": _cfg((3, 32, 32), CIFAR10_MEAN, CIFAR10_STD, "fc", first_conv="conv1"),
    }
)


@register_model
def vit_tiny_fmnist(pretrained: bool = False, **kwargs: Any) -> VisionTransformer:
    args = {
        "img_size": 28,
        "patch_size": 4,
        "in_chans": 1,
        "num_classes": 10,
        "embed_dim": 64,
        "depth": 3,
        "num_heads": 4,
        "mlp_ratio": 2.0,
        **kwargs,
    }
    return build_model_with_cfg(VisionTransformer, "vit_tiny_fmnist", pretrained, **args)


def _cifar_stem(model: ResNet, in_chans: int) -> ResNet:
    # Small images: a 3x3 stride-1 stem and no max-pool keep enough resolution for the four stages.
    model.conv1 = nn.Conv2d(in_chans, model.conv1.out_channels, 3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


@register_model
def resnet_tiny_fmnist(pretrained: bool = False, **kwargs: Any) -> ResNet:
    args = {"in_chans": 1, "num_classes": 10, "stem_width": 16, "channels": (16, 32, 64, 128), **kwargs}
    model = build_model_with_cfg(
        ResNet, "resnet_tiny_fmnist", pretrained, block=BasicBlock, layers=(1, 1, 1, 1), **args
    )
    return _cifar_stem(model, args["in_chans"])


@register_model
def resnet18_cifar(pretrained: bool = False, **kwargs: Any) -> ResNet:
    args = {"in_chans": 3, "num_classes": 10, **kwargs}
    model = build_model_with_cfg(ResNet, "resnet18_cifar", pretrained, block=BasicBlock, layers=(2, 2, 2, 2), **args)
    return _cifar_stem(model, args["in_chans"])


def create_model(
    name: str, num_classes: int, in_chans: int = 3, pretrained: bool = False, device: str | torch.device | None = None
) -> nn.Module:
    """A timm model by name, built on ``device`` (``meta``: shapes only); ``pretrained`` loads hub weights from the
    local cache only, never the network."""
    if name not in timm.list_models() and name.split(".")[0] not in timm.list_models():
        close = timm.list_models(f"*{name.split('_')[0]}*")[:8]
        hint = f"; similar names: {', '.join(close)}" if close else ""
        raise ValueError(f"model {name!r} is not a timm model (nor one of this project's small variants){hint}")
    if not pretrained:
        with torch.device(device) if device is not None else contextlib.nullcontext():
            return timm.create_model(name, num_classes=num_classes, in_chans=in_chans)
    with _hub_offline():
        try:
            return timm.create_model(name, pretrained=True, num_classes=num_classes, in_chans=in_chans)
        except Exception as err:  # any failure to find cached weights: hub, file and timm errors differ by version
            raise RuntimeError(
                f"init: 'timm' needs the pretrained weights of {name!r} in the local Hugging Face cache, which this "
                f"run could not read ({type(err).__name__}: {err}). Fetch them once where the network is reachable, "
                f"e.g. python -c \"import timm; timm.create_model('{name}', pretrained=True)\", "
                "or point HF_HUB_CACHE (or HF_HOME) at a cache that holds them."
            ) from err


@contextlib.contextmanager
def _hub_offline() -> Any:
    # huggingface_hub reads HF_HUB_OFFLINE once at import; its module constant is what each download consults.
    try:
        from huggingface_hub import constants
    except ImportError:
        yield
        return
    with mock.patch.object(constants, "HF_HUB_OFFLINE", True):
        yield


def classifier_name(model: nn.Module) -> str | None:
    """Qualified name of the classifier head (timm's pretrained_cfg), or None where the model names none."""
    cfg = getattr(model, "pretrained_cfg", None) or {}
    head = cfg.get("classifier")
    return head if isinstance(head, str) else None


def default_image_size(model: nn.Module) -> int:
    """The square input side the model was defined for (timm's pretrained_cfg), 224 if unknown."""
    cfg = getattr(model, "pretrained_cfg", None) or {}
    return int(cfg.get("input_size", (3, 224, 224))[-1])


def build_model(config: TrainConfig, num_classes: int, in_chans: int) -> nn.Module:
    """The timm model with its initial weights, then HOT (or a baseline) and LoRA as the method says."""
    model = create_model(config.model, num_classes, in_chans, pretrained=config.init == "timm")
    if config.init not in (None, "timm"):
        load_init(model, Path(config.init))
    hot_config, lora = config.hot_config(), config.lora_settings()
    if lora is not None:
        from peft import LoraConfig

        head = classifier_name(model)
        targets = lora["target_modules"] or _lora_targets(model, head)
        lora_config = LoraConfig(
            r=lora["rank"],
            lora_alpha=lora["alpha"],
            lora_dropout=lora["dropout"],
            target_modules=targets,
            modules_to_save=[head] if head else None,
        )
        return apply_lora(
            model,
            lora_config,
            hot_config,
            on_frozen=lora["on_frozen"] and hot_config is not None,
            on_decomposed=lora["on_decomposed"] and hot_config is not None,
        )
    if hot_config is not None:
        convert(model, hot_config, exclude=config.exclude)
    return model


def _lora_targets(model: nn.Module, head: str | None) -> list[str]:
    # Every Linear and non-grouped Conv2d but the classifier (which trains fully, as modules_to_save).
    names = [
        name
        for name, mod in model.named_modules()
        if (type(mod) is nn.Linear or (type(mod) is nn.Conv2d and mod.groups == 1))
        and not (head and (name == head or name.startswith(head + ".")))
    ]
    if not names:
        raise ValueError(
            "lora: the model has no Linear or Conv2d layer besides the classifier; set lora.target_modules"
        )
    return names


def load_init(model: nn.Module, path: Path) -> None:
    """Weights from another run's model.pt; a classifier of another class count is left freshly initialised."""
    if not path.is_file():
        raise FileNotFoundError(f"init: {path} is not a file (expected another run's model.pt)")
    saved = torch.load(path, map_location="cpu", weights_only=True)
    state, own, head = dict(saved["state_dict"]), model.state_dict(), classifier_name(model)

    def in_head(key: str) -> bool:
        return head is not None and key.startswith(head + ".")

    for key in [k for k in state if in_head(k) and k in own and state[k].shape != own[k].shape]:
        del state[key]
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not in_head(k)]
    if missing or unexpected:
        raise ValueError(
            f"init: {path} does not fit model {saved.get('model')!r} -> this model: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]} (model.pt of a LoRA run holds peft names and cannot be an init)"
        )
