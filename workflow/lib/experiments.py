"""The experiments of config.yaml as data: every training run (stage, name, settings) and each table's inputs.

Plain Python, no Snakemake: the Snakefile calls :func:`plan` once, the tests call it directly.
A run's *settings* are exactly what ``hot train`` gets as its config file; a table's *roles* name its inputs
(``hot@s0``: the metrics of the HOT run with seed 0) as :mod:`hot.tables` expects them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hot.config import HOTConfig
from hot.lora import LORA_TABLE3
from hot.train.config import HOT_METHODS, TrainConfig
from hot.train.data import SHAPES
from hot.train.recipes import recipe_values

STAGES = ("pretrain", "finetune", "ablations")
HOT_DEFAULTS = HOTConfig().to_dict()
_UNSET = object()


@dataclass(frozen=True)
class Run:
    stage: str
    name: str
    settings: Mapping[str, Any]
    init_run: str | None = None  # "stage/name" of the run whose model.pt this one starts from
    # fake | real | auto: auto is resolved by the train rule (real where the kernels passed their tests, else fake);
    # the settings name the backend only where it is real for certain
    backend: str = "fake"

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.name}"

    @property
    def uses_kernels(self) -> bool:
        """Runs, or may run, on the hot-kernels extension: it waits for the kernel tests."""
        return self.backend in ("real", "auto")

    @property
    def relative_cost(self) -> int:
        """A rough size of the run, for the scheduler's priority (the longest runs start first, so none of them is
        left alone at the end): its training steps, times 3 for a backward other than FP's (quantised, projected or
        both) and times 2 for a ResNet's convolutions. Only the order matters."""
        values = {**recipe_values(self.settings.get("recipe", TrainConfig.recipe)), **self.settings}
        shape = SHAPES.get(self.dataset, SHAPES["synthetic"])
        classes = values.get("classes")
        samples = shape.train * len(classes) // shape.classes if classes else shape.train
        samples = min(samples, values.get("train_subset") or samples)
        batches = -(-samples // values.get("batch_size", TrainConfig.batch_size))
        batches = min(batches, values.get("max_train_batches") or batches)
        weight = (1 if values.get("method") in ("fp", "lora") else 3) * (2 if "resnet" in values["model"] else 1)
        return values.get("epochs", TrainConfig.epochs) * batches * weight

    @property
    def synthetic(self) -> bool:
        """Trains on data made per sample (``synthetic: true``): its dataset is never read."""
        return bool(self.settings.get("synthetic"))

    @property
    def dataset(self) -> str:
        return self.settings.get("dataset", TrainConfig.dataset)

    @property
    def data_dir(self) -> str:
        return self.settings.get("data_dir", TrainConfig.data_dir)


@dataclass
class Plan:
    runs: dict[str, Run] = field(default_factory=dict)  # key "stage/name"
    tables: dict[str, dict[str, str]] = field(default_factory=dict)  # table -> role -> run key

    def add(self, run: Run) -> str:
        """Register a run; one with the same settings as a registered run (of any table) is that run."""
        for other in self.runs.values():
            if (other.settings, other.init_run, other.backend) == (run.settings, run.init_run, run.backend):
                return other.key
        if run.key in self.runs:
            old = self.runs[run.key].settings
            raise ValueError(f"two experiments define run {run.key} differently:\n{old}\n{run.settings}")
        self.runs[run.key] = run
        return run.key

    def priority(self, key: str) -> int:
        """The scheduler's priority of a run: its own :attr:`Run.relative_cost` plus the priorities of the runs that
        start from its model. A base model thus trains first, while the long runs start, and the many short runs
        waiting for it fill the GPU's last minutes instead of starting only once the long runs are done."""
        return self.runs[key].relative_cost + sum(
            self.priority(other.key) for other in self.runs.values() if other.init_run == key
        )

    @property
    def datasets(self) -> dict[str, str]:
        """dataset -> the data_dir its runs read it from (one per dataset: the workflow fetches each once)."""
        found: dict[str, str] = {}
        for run in self.runs.values():
            if found.setdefault(run.dataset, run.data_dir) != run.data_dir:
                raise ValueError(
                    f"dataset {run.dataset!r} is read from two data_dirs, {found[run.dataset]!r} and {run.data_dir!r};"
                    " give every view of one dataset the same data_dir"
                )
        return found

    @property
    def synthetic_datasets(self) -> set[str]:
        """The datasets that only synthetic runs use: nothing to find or fetch."""
        runs = self.runs.values()
        return {r.dataset for r in runs if r.synthetic} - {r.dataset for r in runs if not r.synthetic}


def _clean(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    return value


def _tag(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class _Builder:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.plan = Plan()

    def settings(
        self,
        exp: Mapping[str, Any],
        dataset: str,
        model: str,
        method: str,
        seed: int,
        recipe: str | None = None,
        hot: Mapping[str, Any] | None = None,
        lora: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        cfg = self.config
        try:
            ds = cfg["datasets"][dataset]
        except KeyError:
            raise ValueError(f"experiment uses dataset {dataset!r}, not defined under 'datasets:'") from None
        # A HOTConfig field at its default is left out, so runs that differ only in spelling it are one run
        # (Table 2's r = 8 is the blocking ablation's spatial run). The seed stays: it replaces the run's seed.
        hot = {k: v for k, v in (hot or {}).items() if k == "seed" or HOT_DEFAULTS.get(k, _UNSET) != v}
        # HOT's own layers name their backend unless the train rule resolves it (auto); the library's default, auto,
        # would choose at run time whatever loads. Baselines always run PyTorch reference code.
        if self.runs_hot(method) and self.backend(method) != "auto":
            hot["backend"] = self.backend(method)
        settings = {
            **{k: ds.get(k) for k in ("dataset", "data_dir", "classes", "train_subset", "test_subset")},
            "model": cfg["model_map"].get(model, model),
            "method": method,
            "recipe": recipe or exp["recipe"],
            "seed": seed,
            "hot": hot or None,
            "lora": dict(lora) if lora else None,
            "amp": cfg["amp"],
            "device": cfg["device"],
            **cfg["train_overrides"],
            **(exp.get("overrides") or {}),
        }
        return _clean(settings)

    @staticmethod
    def runs_hot(method: str) -> bool:
        """Its layers run HOT's method (HQ + HLA): a preset of it, or LoRA with HOT on some layers."""
        return method in HOT_METHODS or (method in LORA_TABLE3.values() and method != LORA_TABLE3[(False, False)])

    def backend(self, method: str) -> str:
        """The configured backend of a run of ``method``: runs with HOT layers (LoRA's too) take it; baselines
        quantise in PyTorch only, with no real backend."""
        return self.config["backend"] if self.runs_hot(method) else "fake"

    def run(
        self,
        stage: str,
        exp: Mapping[str, Any],
        dataset: str,
        model: str,
        method: str,
        seed: int,
        tag: str = "",
        **kw: Any,
    ) -> str:
        settings = self.settings(exp, dataset, model, method, seed, **kw)
        init_run = None
        init = exp.get("init")
        if init == "base":
            init_run = self.base(model, seed)
            settings["init"] = None  # filled in by the rule: the base run's model.pt
        elif init is not None:
            settings["init"] = init
        name = f"{dataset}-{model}-{method}{tag}-s{seed}"
        return self.plan.add(Run(stage, name, settings, init_run, self.backend(method)))

    def base(self, model: str, seed: int) -> str:
        base = self.config.get("base_pretrain")
        if not base:
            raise ValueError("an experiment has init: base, but base_pretrain is not configured")
        method = base.get("method", "fp")
        settings = self.settings(base, base["dataset"], model, method, seed)
        name = f"base-{base['dataset']}-{model}-s{seed}"
        return self.plan.add(Run("pretrain", name, settings, None, self.backend(method)))

    def seeds(self) -> Iterable[int]:
        return self.config["seeds"]


def plan(config: Mapping[str, Any]) -> Plan:
    """Every run the enabled experiments need, and each table's role -> run mapping."""
    b = _Builder(config)
    exps = config["experiments"]
    tables = b.plan.tables

    e = exps["table1"]
    tables["table1"] = {
        f"{m}@s{s}": b.run("finetune", e, e["dataset"], e["model"], m, s) for m in e["methods"] for s in b.seeds()
    }

    e = exps["table2"]
    tables["table2"] = {
        f"r{r}@s{s}": b.run("ablations", e, e["dataset"], e["model"], e["method"], s, f"-r{r}", hot={"hla_rank": r})
        for r in e["ranks"]
        for s in b.seeds()
    }

    e = exps["table3"]
    tables["table3"] = {
        f"f{int(f)}d{int(d)}@s{s}": b.run("ablations", e, e["dataset"], e["model"], method, s, lora=e["lora"])
        for (f, d), method in LORA_TABLE3.items()
        for s in b.seeds()
    }

    e = exps["table4"]
    tables["table4"] = {}
    for block in e["grid"]:
        for dataset in block["datasets"]:
            for model in block["models"]:
                for m in e["methods"]:
                    for s in b.seeds():
                        tables["table4"][f"{dataset}/{model}/{m}@s{s}"] = b.run(
                            "pretrain", e, dataset, model, m, s, recipe=block["recipe"]
                        )

    e = exps["hla_blocking"]
    hb = tables["hla_blocking"] = {
        f"fp@s{s}": b.run("ablations", e, e["dataset"], e["model"], "fp", s) for s in b.seeds()
    }
    for blocking in e["blockings"]:
        for s in b.seeds():
            hb[f"{blocking}@s{s}"] = b.run(
                "ablations", e, e["dataset"], e["model"], "hot", s, f"-{blocking}", hot={"hla_blocking": blocking}
            )

    e = exps["keep_ratio"]
    kr = tables["keep_ratio_sweep"] = {
        f"fp@s{s}": b.run("ablations", e, e["dataset"], e["model"], "fp", s) for s in b.seeds()
    }
    for m in e["methods"]:
        for keep in e["keep_ratios"]:
            for s in b.seeds():
                kr[f"{m}/{keep:g}@s{s}"] = b.run(
                    "ablations", e, e["dataset"], e["model"], m, s, f"-keep{_tag(keep)}", hot={"keep_ratio": keep}
                )
    return b.plan
