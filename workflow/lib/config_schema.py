"""The workflow's config schema, with every name it shares with the library filled in from :mod:`hot`.

``workflow/schemas/config.schema.yaml`` holds no list of methods, datasets, devices, … : where one belongs it says
``x-names: <kind>`` (the value is one of the kind's names) or ``x-all-names: <kind>`` (a list of them, all by
default), and :func:`schema` replaces the placeholder by ``enum`` (and ``default``) from the library's constants.
Plain Python, no Snakemake: the Snakefile validates with :func:`validate`, the tests call it directly.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import validators

from hot.config import BACKENDS
from hot.hla import BLOCKINGS
from hot.train.config import (
    DATASETS,
    DEVICES,
    FILTER_METHODS,
    HOT_METHODS,
    LORA_METHODS,
    METHOD_NAMES,
    OPTIMIZERS,
    SCHEDULERS,
    TORCH_COMPILE,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
FULL = "full"  # the preset that is config.yaml alone


class ConfigError(ValueError):
    """The config does not match the schema; the message names the key (its JSON path) and the problem."""


def presets(root: Path = ROOT) -> tuple[str, ...]:
    """The presets: ``full`` and one per ``config/<name>.yaml``."""
    return (FULL, *sorted(p.stem for p in (root / "config").glob("*.yaml")))


def names(root: Path = ROOT) -> dict[str, tuple[Any, ...]]:
    """Each kind of name the schema refers to, from the library (and the preset files)."""
    return {
        "presets": presets(root),
        "methods": tuple(m for m in METHOD_NAMES if m not in LORA_METHODS),  # LoRA's are Table 3's own
        "table1_methods": ("fp", *HOT_METHODS),
        "hot_methods": HOT_METHODS,
        "filter_methods": FILTER_METHODS,
        "datasets": DATASETS,
        "devices": DEVICES,
        "backends": ("auto", *BACKENDS),  # auto: resolved per run by the train rule (hot train sees fake or real)
        "blockings": BLOCKINGS,
        "optimizers": OPTIMIZERS,
        "schedulers": SCHEDULERS,
        "torch_compile": TORCH_COMPILE,
    }


def schema(path: Path = SCHEMA, root: Path = ROOT) -> dict[str, Any]:
    """The schema file with its ``x-names`` / ``x-all-names`` placeholders filled in."""
    known = names(root)
    filled = yaml.safe_load(path.read_text(encoding="utf-8"))
    for node in _mappings(filled):
        for key in ("x-names", "x-all-names"):
            if key not in node:
                continue
            kind = node.pop(key)
            if kind not in known:
                raise KeyError(f"{path}: {key}: {kind!r} is not a kind of name (known: {sorted(known)})")
            if key == "x-names":
                node["enum"] = list(known[kind])
            else:
                node.update(type="array", items={"enum": list(known[kind])}, uniqueItems=True, minItems=1)
                node.setdefault("default", list(known[kind]))
    return filled


def _mappings(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in list(value.values()):
            yield from _mappings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _mappings(item)


def _with_defaults(validator_class: type) -> type:
    """A validator that also sets each missing property's ``default`` (as snakemake.utils.validate does)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Mapping[str, Any], instance: Any, subschema: Any) -> Iterator[Any]:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from validate_properties(validator, properties, instance, subschema)

    return validators.extend(validator_class, {"properties": set_defaults})


def validate(config: dict[str, Any], filled: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check ``config`` against the filled schema and set the defaults of unset keys (in place; also returned).

    Raises :class:`ConfigError` naming the first problem's key, e.g. ``$.seeds: 'abc' is not of type 'array'``.
    """
    checker = _with_defaults(jsonschema.Draft202012Validator)(filled if filled is not None else schema())
    problem = jsonschema.exceptions.best_match(checker.iter_errors(config))
    if problem is not None:
        raise ConfigError(f"{problem.json_path}: {problem.message}")
    return config
