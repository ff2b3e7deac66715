"""The one resolved configuration of a training run: config files, then ``--set`` overrides, over a recipe."""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..config import PRESETS, HOTConfig, check_known_keys, check_one_of
from ..lora import LORA_TABLE3
from .recipes import RECIPES, recipe_values

DATASETS = ("fashion_mnist", "cifar10", "cifar100", "imagenet100", "imagenet1k", "synthetic")
LORA_METHODS = {name: flags for flags, name in LORA_TABLE3.items()}
# Methods that are a HOTConfig but not a preset of the paper's tables: the follow-up's filter and its control.
FILTER_METHODS = ("hla_filter", "grad_dropout")
METHOD_NAMES = (*PRESETS, *FILTER_METHODS, *LORA_METHODS)
# The presets that run HOT itself (HQ on g_x, HLA on g_w, with or without ABC/LQS): what the real backend runs.
HOT_METHODS = tuple(name for name, preset in PRESETS.items() if preset.method == "hot")
OPTIMIZERS = ("adamw", "sgd")
SCHEDULERS = ("cosine", "cosine_restarts", "multistep", "constant")
DEVICES = ("auto", "cpu", "cuda")
TORCH_COMPILE = ("none", "inductor", "aot_eager")  # torch.compile backends for the training forward and backward
LORA_KEYS = ("rank", "alpha", "dropout", "target_modules", "on_frozen", "on_decomposed")
# Keys that may differ between a checkpoint and the run resuming it (they do not change the results).
RESUME_FREE_KEYS = ("device", "num_workers", "keep_checkpoint")


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on; see docs/training.md for each key."""

    model: str = "vit_tiny_fmnist"
    dataset: str = "fashion_mnist"
    data_dir: str = "data"
    classes: tuple[int, ...] | None = None
    train_subset: int | None = None
    test_subset: int | None = None
    synthetic: bool = False  # the dataset's shapes, class count and sizes, random (learnable) data: nothing is read
    method: str = "hot"
    hot: dict[str, Any] = field(default_factory=dict)
    backend_reason: str | None = None  # why hot.backend is what it is (the workflow's backend: auto); recorded only
    exclude: tuple[str, ...] = ()
    lora: dict[str, Any] | None = None
    recipe: str = "embedded_pretrain"
    epochs: int = 1
    batch_size: int = 128
    lr: float = 1e-3
    optimizer: str = "adamw"
    weight_decay: float = 0.0
    momentum: float = 0.9
    eps: float = 1e-8
    scheduler: str = "cosine"
    scheduler_args: dict[str, Any] = field(default_factory=dict)
    int8_warmup_epochs: int = 0
    max_train_batches: int | None = None
    mixup: float = 0.0
    cutmix: float = 0.0
    label_smoothing: float = 0.0
    init: str | None = None
    seed: int = 0
    amp: bool = False
    torch_compile: str = "none"
    device: str = "auto"
    num_workers: int = 0
    image_size: int | None = None
    deterministic: bool = True
    keep_checkpoint: bool = True  # false: checkpoint.pt is deleted once model.pt and metrics.json are written

    def __post_init__(self) -> None:
        check_one_of("dataset", self.dataset, DATASETS)
        check_one_of("method", self.method, METHOD_NAMES)
        check_one_of("recipe", self.recipe, tuple(RECIPES))
        check_one_of("optimizer", self.optimizer, OPTIMIZERS)
        check_one_of("scheduler", self.scheduler, SCHEDULERS)
        check_one_of("device", self.device, DEVICES)
        check_one_of("torch_compile", self.torch_compile, TORCH_COMPILE)
        for name in ("model", "data_dir"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string, got {getattr(self, name)!r}")
        for name in ("epochs", "batch_size"):
            _int_at_least(name, getattr(self, name), 1)
        for name in ("train_subset", "test_subset", "max_train_batches", "image_size"):
            if getattr(self, name) is not None:
                _int_at_least(name, getattr(self, name), 1)
        for name in ("int8_warmup_epochs", "num_workers", "seed"):
            _int_at_least(name, getattr(self, name), 0)
        for name in ("lr", "eps"):
            if not _is_number(getattr(self, name)) or not 0 < getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be a positive finite number, got {getattr(self, name)!r}")
        for name in ("weight_decay", "momentum", "mixup", "cutmix"):
            if not _is_number(getattr(self, name)) or not 0 <= getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be a non-negative finite number, got {getattr(self, name)!r}")
        if not _is_number(self.label_smoothing) or not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing!r}")
        for name in ("amp", "deterministic", "synthetic", "keep_checkpoint"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.classes is not None:
            if not _is_list_of(self.classes, int) or not self.classes:
                raise ValueError(f"classes must be a non-empty list of integer class ids, got {_shown(self.classes)!r}")
            if len(set(self.classes)) != len(self.classes) or min(self.classes) < 0:
                raise ValueError(f"classes must be distinct non-negative ids, got {_shown(self.classes)!r}")
            if len(self.classes) < 2:  # one class is trivially 100% accurate
                raise ValueError(f"classes must name at least two classes, got {_shown(self.classes)!r}")
        if not _is_list_of(self.exclude, str):
            raise ValueError(f"exclude must be a list of module names, got {_shown(self.exclude)!r}")
        if self.lora is not None and not isinstance(self.lora, dict):
            raise ValueError(f"lora must be null or a mapping of LoRA settings, got {self.lora!r}")
        if not isinstance(self.scheduler_args, dict):
            raise ValueError(f"scheduler_args must be a mapping, got {self.scheduler_args!r}")
        if self.backend_reason is not None and not isinstance(self.backend_reason, str):
            raise ValueError(f"backend_reason must be null or a string, got {self.backend_reason!r}")
        if self.init is not None and not isinstance(self.init, str):
            raise ValueError(f"init must be null, 'timm' or a path to a model.pt, got {self.init!r}")
        self.hot_config()  # validates method and hot against each other
        if self.lora_settings() is not None and self.exclude:
            raise ValueError(
                "exclude applies without LoRA only (with LoRA, lora.on_frozen/on_decomposed choose layers)"
            )

    def hot_config(self) -> HOTConfig | None:
        """The HOT layers' config, or None where no layer is converted (FP, and LoRA without HOT)."""
        if not isinstance(self.hot, dict):
            raise ValueError(f"hot must be a mapping of HOTConfig fields, got {self.hot!r}")
        if self.method == "fp" or self.method == "lora":
            if self.hot:
                raise ValueError(f"hot overrides {sorted(self.hot)} have no effect with method {self.method!r}")
            return None
        values = {"seed": self.seed, **self.hot}  # the rounding hash follows the run's seed unless set
        try:
            if self.method in FILTER_METHODS:
                return HOTConfig.from_dict({"method": self.method, **values})
            base = PRESETS["hot" if self.method in LORA_METHODS else self.method]
            return HOTConfig.from_dict({**base.to_dict(), **values})
        except ValueError as err:
            raise ValueError(f"hot: {err}") from None

    def lora_settings(self) -> dict[str, Any] | None:
        """LoRA settings with defaults filled in, or None without LoRA."""
        flags = LORA_METHODS.get(self.method)
        if self.lora is None and flags is None:
            return None
        given = dict(self.lora or {})
        unknown = sorted(set(given) - set(LORA_KEYS))
        if unknown:
            raise ValueError(f"unknown lora key(s) {unknown}; known keys: {list(LORA_KEYS)}")
        if flags is not None:
            for key, implied in zip(("on_frozen", "on_decomposed"), flags, strict=True):
                if key in given and given[key] != implied:
                    raise ValueError(f"lora.{key}={given[key]!r} contradicts method {self.method!r}")
                given[key] = implied
        settings = {
            "rank": 8,
            "alpha": 16,
            "dropout": 0.0,
            "target_modules": None,
            "on_frozen": True,
            "on_decomposed": False,
            **given,
        }
        _int_at_least("lora.rank", settings["rank"], 1)
        if not _is_number(settings["alpha"]) or settings["alpha"] <= 0:
            raise ValueError(f"lora.alpha must be a positive number, got {settings['alpha']!r}")
        for key in ("on_frozen", "on_decomposed"):
            if not isinstance(settings[key], bool):
                raise ValueError(f"lora.{key} must be true or false, got {settings[key]!r}")
        targets = settings["target_modules"]
        if targets is not None and not (isinstance(targets, list) and all(isinstance(t, str) for t in targets)):
            raise ValueError(f"lora.target_modules must be null or a list of module names, got {targets!r}")
        return settings

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        for key in ("classes", "exclude"):
            if values[key] is not None:
                values[key] = list(values[key])
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Resolve a merged mapping: the recipe's values first, then every key given."""
        check_known_keys(cls, values)
        recipe = values.get("recipe", cls.recipe)
        check_one_of("recipe", recipe, tuple(RECIPES))
        resolved = recipe_values(recipe)
        if "scheduler" in values and "scheduler_args" not in values:
            resolved.pop("scheduler_args", None)  # the recipe's arguments belong to the recipe's scheduler
        resolved.update(values)
        for key in ("classes", "exclude"):
            if isinstance(resolved.get(key), list):
                resolved[key] = tuple(resolved[key])
        return cls(**resolved)


def load_config(files: Iterable[str | Path] = (), overrides: Iterable[str] = ()) -> TrainConfig:
    """Merge YAML files left to right (nested mappings merge), then ``KEY=VALUE`` overrides (dotted keys)."""
    merged: dict[str, Any] = {}
    for path in files:
        data = _read_yaml(path)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a config file must hold a mapping of keys, got {type(data).__name__}")
        merged = deep_merge(merged, data)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            value: Any = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError as err:
            raise ValueError(f"--set {item}: {_yaml_problem(err)}") from None
        for part in reversed(key.split(".")[1:]):
            value = {part: value}
        merged = deep_merge(merged, {key.split(".")[0]: value})
    return TrainConfig.from_dict(merged)


def _read_yaml(path: str | Path) -> Any:
    """One config file's YAML; what makes it unreadable becomes a ValueError that starts with the file's name."""
    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_Loader)
    except OSError as err:
        raise ValueError(f"{path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: {_yaml_problem(err)}") from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML error in one line, with the 1-based line and column where the parser gives them."""
    if isinstance(err, yaml.reader.ReaderError):  # its text names "<unicode string>", not the file
        code = err.character if isinstance(err.character, int) else ord(err.character)
        return f"unacceptable character #x{code:04x} at offset {err.position}: {err.reason}"
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        where = f"line {err.problem_mark.line + 1}, column {err.problem_mark.column + 1}: " if err.problem_mark else ""
        context = f" ({err.context})" if err.context else ""
        return f"{where}{err.problem}{context}"
    return " ".join(str(err).split())


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads ``1e-3`` as a string; this loader reads it as a float, as YAML 1.2 does."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_list_of(value: object, kind: type) -> bool:
    """A list (a tuple once resolved) of ``kind`` items; bools are not integers here."""
    return isinstance(value, (list, tuple)) and all(
        isinstance(item, kind) and not isinstance(item, bool) for item in value
    )


def _shown(value: object) -> object:
    """A resolved tuple as the list the config file wrote."""
    return list(value) if isinstance(value, tuple) else value


def _int_at_least(name: str, value: object, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
