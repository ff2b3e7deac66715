"""The Snakemake workflow: lint, dry runs of both presets, config validation, the experiment plan."""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .helpers import REPO, TABLES, snakemake

sys.path.insert(0, str(REPO / "workflow" / "lib"))
import config_schema
from experiments import STAGES, Run, plan

from hot.train.config import DATASETS, HOT_METHODS, LORA_METHODS, METHOD_NAMES


def _rules() -> set[str]:
    out = snakemake("--list-rules")
    assert out.returncode == 0, out.stderr
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip() and not line.startswith(" ")}


def _dry_run(tmp_path: Path, *extra: str) -> str:
    out = snakemake(
        "-n",
        "--forceall",
        "--nolock",
        "--cores",
        "2",
        "--config",
        f"results_dir={tmp_path}/results",
        f"tables_dir={tmp_path}/tables",
        *extra,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _job_blocks(dry_run: str, field: str = "input") -> dict[str, list[str]]:
    """rule name -> one line of each of its jobs (``input``, ``wildcards``, ``resources``), from a dry run's listing."""
    blocks: dict[str, list[str]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", dry_run):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if head:
            line = re.search(rf"^\s+{field}: (.*)$", block, re.M)
            blocks.setdefault(head.group(1), []).append(line.group(1) if line else "")
    return blocks


def _train_stages(dry_run: str) -> dict[str, int]:
    """stage -> how many training jobs the dry run has in it (the train rule's ``run`` wildcard is stage/name)."""
    counts: dict[str, int] = {}
    for wildcards in _job_blocks(dry_run, "wildcards")["train"]:
        stage = wildcards.removeprefix("run=").split("/")[0]
        counts[stage] = counts.get(stage, 0) + 1
    return counts


def test_lint_passes() -> None:
    out = snakemake("--lint")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Congratulations" in out.stdout + out.stderr


def test_full_config_dry_run_resolves_every_table(tmp_path: Path) -> None:
    text = _dry_run(tmp_path)
    for table in TABLES:
        for ext in ("md", "csv", "tex"):
            assert f"{tmp_path}/tables/{table}.{ext}" in text, f"{table}.{ext} not in the DAG"
    assert f"{tmp_path}/tables/summary.md" in text
    blocks = _job_blocks(text)
    # Table 4: 17 rows x 5 methods, but its CIFAR-100 EfficientFormer-L1 HOT run is Table 2's r = 8 (an ablation)
    stages = _train_stages(text)
    assert stages["pretrain"] == 84 and set(stages) == set(STAGES)
    measured = {"kernels", "kernel_tests", "latency", "bench_latency", "bench_end_to_end", "memory", "gbops"}
    assert measured | {"data", "train"} <= set(blocks)
    # each dataset is found or fetched once, by its own job, before the runs on it
    assert sorted(_job_blocks(text, "output")["data"]) == [
        f"{tmp_path}/results/data/{d}.json" for d in ("cifar10", "cifar100", "imagenet100", "imagenet1k")
    ]
    assert all(f"{tmp_path}/results/data/" in inputs for inputs in blocks["train"])
    for name in ("latency", "end_to_end"):
        assert f"{tmp_path}/results/bench/{name}.json" in text


def test_embedded_dag_contains_every_rule(tmp_path: Path) -> None:
    blocks = _job_blocks(_dry_run(tmp_path, "preset=embedded"))
    assert set(blocks) == _rules()


def test_table_jobs_depend_on_results_and_their_own_code_only(tmp_path: Path) -> None:
    """Editing one table's module (or training code) cannot rerun another table or any training."""
    blocks = _job_blocks(_dry_run(tmp_path, "preset=embedded"))
    shared = {
        "src/hot/commands/tables.py",
        *(f"src/hot/tables/{m}.py" for m in ("__init__", "common", "render", "plots")),
    }
    for table in TABLES:
        (inputs,) = blocks[table]
        for path in inputs.split(", "):
            assert (
                path.startswith(f"{tmp_path}/results/")
                or path in shared
                or path in (f"src/hot/tables/{table}.py", "src/hot/data/paper_values.yaml")
                or (table, path) == ("latency_figure", "kernels/results/latency_h200.json")  # committed, read-only
            ), f"{table} depends on {path}"
    assert all("src/" not in inputs for inputs in blocks["train"])
    # without a GPU the latency figure draws the committed measurement (labelled so)
    assert "kernels/results/latency_h200.json" in blocks["latency_figure"][0].split(", ")


@pytest.mark.parametrize(
    ("override", "named"),
    [
        (["epochz=3"], "$: Additional properties are not allowed ('epochz' was unexpected)"),  # misspelt key
        (["seeds=abc"], "$.seeds: 'abc' is not of type 'array'"),  # wrong type
        (["device=gpu"], "$.device: 'gpu' is not one of"),  # bad value
        (["preset=embedded", "backend=int3"], "$.backend"),
        # train overrides are typed: a bad one stops here, not inside a training job
        (["train_overrides={epochs: abc}"], "$.train_overrides.epochs: 'abc' is not of type 'integer'"),
        (["train_overrides={optimizer: adam}"], "$.train_overrides.optimizer: 'adam' is not one of"),
        (["train_overrides={epochz: 1}"], "$.train_overrides: Additional properties are not allowed ('epochz'"),
        # an experiment's model is part of its runs' directory names
        (["experiments={table2: {model: 'x/../y'}}"], "$.experiments.table2.model: 'x/../y' does not match"),
    ],
)
def test_bad_config_stops_before_any_job_naming_the_key(tmp_path: Path, override: list[str], named: str) -> None:
    out = snakemake("-n", "--nolock", "--config", f"results_dir={tmp_path}/r", *override)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert f"Error validating config: {named}" in text
    assert "Job stats" not in text
    assert len(text.splitlines()) < 30, text  # the key and the problem, not snakemake's dump of the whole schema
    assert "Failed validating" not in text


TEST_CONFIG = REPO / ".test" / "config" / "config.yaml"


def test_test_config_validates_against_the_schema() -> None:
    """.test/config/config.yaml merged as ``--configfile`` merges it: over config.yaml and its preset, winning."""
    from snakemake.utils import update_config

    test = yaml.safe_load(TEST_CONFIG.read_text())
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    update_config(config, yaml.safe_load((REPO / "config" / f"{test['preset']}.yaml").read_text()))
    update_config(config, test)
    config_schema.validate(config)
    assert config["device"] == "cpu" and config["backend"] == "fake" and config["seeds"] == [0]
    p = plan(config)
    assert set(p.tables) == {"table1", "table2", "table3", "table4", "keep_ratio_sweep", "hla_blocking"}
    assert all(p.tables.values()), "a table with no run"
    assert len(p.runs) < 25  # small enough for a few minutes on two cores


def test_test_config_dry_run_runs_every_rule(tmp_path: Path) -> None:
    text = _dry_run(tmp_path, "--configfile", str(TEST_CONFIG))
    blocks = _job_blocks(text)
    assert set(blocks) == _rules()
    assert len(blocks["train"]) < 25
    assert f"{tmp_path}/tables/summary.md" in text


def test_unknown_preset_is_refused_before_it_becomes_a_path(tmp_path: Path) -> None:
    out = snakemake("-n", "--nolock", "--config", f"results_dir={tmp_path}/r", "preset=../../x")
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "unknown preset '../../x'; known presets: full, embedded, gpu" in text
    assert "x.yaml" not in text
    assert len(text.splitlines()) < 30, text


def test_schema_presets_are_the_preset_files() -> None:
    files = sorted(p.stem for p in (REPO / "config").glob("*.yaml"))
    assert config_schema.schema()["properties"]["preset"]["enum"] == ["full", *files]


def _enums(node: object) -> list[list]:
    if isinstance(node, dict):
        return [*([node["enum"]] if "enum" in node else []), *(e for v in node.values() for e in _enums(v))]
    if isinstance(node, list):
        return [e for v in node for e in _enums(v)]
    return []


def _keys(node: object) -> list[str]:
    if isinstance(node, dict):
        return [*node, *(k for v in node.values() for k in _keys(v))]
    if isinstance(node, list):
        return [k for v in node for k in _keys(v)]
    return []


def test_schema_file_lists_no_name_the_library_defines() -> None:
    """The YAML says `x-names: <kind>`; every list of methods, datasets, devices, … comes from hot."""
    raw = yaml.safe_load(config_schema.SCHEMA.read_text())
    kinds = config_schema.names().values()
    assert not [enum for enum in _enums(raw) for names in kinds if len(set(names) & set(enum)) > 1]
    filled = config_schema.schema()
    assert not [key for key in _keys(filled) if key.startswith("x-")]
    methods = filled["$defs"]["method"]["enum"]
    assert methods == [m for m in METHOD_NAMES if m not in LORA_METHODS] and "hla_filter" in methods
    table1 = filled["properties"]["experiments"]["properties"]["table1"]["properties"]["methods"]
    assert table1["default"] == table1["items"]["enum"] == ["fp", *HOT_METHODS]
    datasets = filled["properties"]["datasets"]["additionalProperties"]["properties"]["dataset"]
    assert datasets["enum"] == list(DATASETS)


def test_schema_placeholder_of_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "schema.yaml"
    bad.write_text("type: object\nproperties: {method: {x-names: method}}\n")
    with pytest.raises(KeyError, match="'method' is not a kind of name"):
        config_schema.schema(bad)


def test_workflow_imports_no_timm() -> None:
    """The Snakefile's imports (the plan, the schema, the tables' names) stay light: no timm, no training loop."""
    code = (
        f"import sys; sys.path.insert(0, {str(REPO / 'workflow' / 'lib')!r}); import experiments, config_schema;"
        " import hot.tables; assert 'timm' not in sys.modules and 'hot.train.loop' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_schema_overrides_are_train_config_keys_with_its_choices() -> None:
    import dataclasses

    from hot.train.config import OPTIMIZERS, SCHEDULERS, TORCH_COMPILE, TrainConfig

    schema = config_schema.schema()
    overrides = schema["$defs"]["overrides"]
    assert overrides["additionalProperties"] is False
    assert set(overrides["properties"]) <= {f.name for f in dataclasses.fields(TrainConfig)}
    for key, choices in (("optimizer", OPTIMIZERS), ("scheduler", SCHEDULERS), ("torch_compile", TORCH_COMPILE)):
        assert overrides["properties"][key]["enum"] == list(choices), key


def test_config_values_reach_shell_commands_quoted(tmp_path: Path) -> None:
    """A model string with shell syntax and a results_dir with a space are single arguments of each command."""
    from hot.config import PRESETS
    from hot.tables.table1 import MEMORY_METHOD

    results = f"{tmp_path}/my results"
    models = {"gbops": f"x; touch {tmp_path}/pwned", "memory_figure": f"y$(touch {tmp_path}/pwned2)"}
    settings = tmp_path / "quoting.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "preset": "embedded",
                "results_dir": results,
                "tables_dir": f"{tmp_path}/my tables",
                "analysis": {name: {"model": model} for name, model in models.items()},
            }
        )
    )
    out = snakemake(
        "-n", "--printshellcmds", "--forceall", "--nolock", "--cores", "2", "--configfile", str(settings),
        "--", "table2", "memory_figure",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    shown = [line.removeprefix("Shell command: ") for line in out.stdout.splitlines() if "Shell command: " in line]
    commands = [c for c in shown if c != "None"]  # a script: rule (training, the kernels) has no shell command
    programs = set()
    for command in commands:
        args = shlex.split(command)
        programs.add(next(a for a in args if "=" not in a))  # past the VAR=value prefixes
        assert sum(a.count(results) for a in args) == command.count(results) > 0, command  # no path split
        if "gbops" in args or "memory" in args:
            assert args[args.index("--model") + 1] in models.values(), command
        if "memory" in args:  # every buffer layout Table 1 reads: FP and the HOT presets but LQS (which saves none)
            assert args[args.index("--methods") + 1].split(",") == sorted(
                set(MEMORY_METHOD.values()), key=list(PRESETS).index
            )
    assert programs == {"hot"}  # training and the kernels are script: files (workflow/scripts/), no shell
    assert any("gbops" in c for c in commands) and any("hot memory" in c for c in commands)
    assert any("hot tables table2" in c for c in commands)
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_results_dir_with_a_space_runs(tmp_path: Path) -> None:
    """The kernels job (built: never, nothing to compile) runs its script with the quoted paths."""
    results = tmp_path / "my results"
    out = snakemake(
        "--nolock", "--cores", "1", "--config", f"results_dir={results}", "kernels={build: never}",
        "--", f"{results}/kernels/build.json",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((results / "kernels" / "build.json").read_text())["status"].startswith("not built: disabled")


def test_bad_nested_key_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"checks": {"accuracy_margin": 2.0}, "experiments": {"table2": {"ranks": [0]}}}))
    out = snakemake("-n", "--nolock", "--configfile", str(bad))
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "Error validating config" in text
    assert "accuracy_margin" in text or "ranks" in text


# ---------------------------------------------------------------- the experiment plan (no snakemake)


def _config(preset: str = "full") -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    if preset != "full":
        from snakemake.utils import update_config

        update_config(config, yaml.safe_load((REPO / "config" / f"{preset}.yaml").read_text()))
    return config_schema.validate(config)


def test_unset_keys_get_the_schemas_defaults_and_a_bad_value_is_named() -> None:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    del config["kernels"], config["checks"], config["experiments"]["table2"]["method"]
    config_schema.validate(config)
    assert config["kernels"] == {"build": "auto"} and config["checks"]["memory_rel_tol"] == 0.03
    assert config["experiments"]["table2"]["method"] == "hot"
    config["experiments"]["keep_ratio"]["methods"] = ["hla_filter", "hot"]
    named = r"^\$.experiments.keep_ratio.methods\[1\]: 'hot' is not one of"
    with pytest.raises(config_schema.ConfigError, match=named):
        config_schema.validate(config)


def test_embedded_plan() -> None:
    p = plan(_config("embedded"))
    stages = {r.stage for r in p.runs.values()}
    assert stages == {"pretrain", "finetune", "ablations"}
    assert set(p.tables) == {"table1", "table2", "table3", "table4", "keep_ratio_sweep", "hla_blocking"}
    assert all(key in p.runs for roles in p.tables.values() for key in roles.values())
    # fine-tuning starts from the base run pre-trained on classes 0-4 and trains on 5-9
    for key in p.tables["table1"].values():
        run = p.runs[key]
        assert run.init_run and p.runs[run.init_run].settings["classes"] == [0, 1, 2, 3, 4]
        assert run.settings["classes"] == [5, 6, 7, 8, 9]
    # backend: fake, named where HOT runs (the library's default, auto, would choose at run time)
    assert p.runs[p.tables["table2"]["r4@s0"]].settings["hot"] == {"hla_rank": 4, "backend": "fake"}
    assert p.runs[p.tables["table3"]["f0d1@s0"]].settings["method"] == "lora_hot_decomposed"
    assert p.runs[p.tables["keep_ratio_sweep"]["grad_dropout/0.5@s0"]].settings["method"] == "grad_dropout"
    # identical settings are one run, whichever tables use it (a HOTConfig field at its default is not spelt out)
    assert p.tables["keep_ratio_sweep"]["fp@s0"] == p.tables["hla_blocking"]["fp@s0"]
    assert p.tables["table2"]["r8@s1"] == p.tables["hla_blocking"]["spatial@s1"]
    assert p.runs[p.tables["hla_blocking"]["paper@s0"]].settings["hot"] == {"hla_blocking": "paper", "backend": "fake"}
    assert all(r.settings["device"] == "cpu" and r.settings["epochs"] == 2 for r in p.runs.values())
    # two seeds everywhere, so every accuracy check can state a spread
    assert {role.rpartition("@s")[2] for roles in p.tables.values() for role in roles} == {"0", "1"}
    # the classifier stays exact wherever HOT is applied without LoRA
    converted = [r for r in p.runs.values() if r.settings["method"] != "fp" and "lora" not in r.settings]
    assert converted and all(r.settings["exclude"] == ["head", "fc"] for r in converted)


def test_gpu_plan() -> None:
    p = plan(_config("gpu"))
    hot = [r for r in p.runs.values() if r.settings["method"] in HOT_METHODS]
    assert hot and all(r.backend == "real" and r.settings["hot"]["backend"] == "real" for r in hot)
    assert all(r.settings["device"] == "cuda" and "train_subset" not in r.settings for r in p.runs.values())
    assert {role.rpartition("@s")[2] for roles in p.tables.values() for role in roles} == {"0", "1", "2"}
    assert set(p.tables["hla_blocking"]) == {f"{c}@s{s}" for c in ("fp", "spatial", "paper") for s in range(3)}
    # what no check reads is not trained: Table 4's INT4 and LUQ baselines, the `official` blocking
    assert {r.settings["method"] for r in p.runs.values()} & {"int4", "luq"} == set()
    assert {key.rsplit("/", 1)[1].split("@")[0] for key in p.tables["table4"]} == {"fp", "lbp_wht", "hot"}
    # the blocking ablation's FP and spatial runs are Table 4's ViT runs
    assert p.tables["hla_blocking"]["spatial@s2"] == p.tables["table4"]["fmnist/vit_tiny_fmnist/hot@s2"]
    assert p.tables["hla_blocking"]["fp@s2"] == p.tables["table4"]["fmnist/vit_tiny_fmnist/fp@s2"]


def test_full_plan_is_the_paper_grid() -> None:
    config = _config()
    p = plan(config)
    assert len(p.tables["table4"]) == 17 * 5
    assert len(p.tables["table2"]) == 5 and len(p.tables["keep_ratio_sweep"]) == 1 + 2 * 5
    # backend: auto, the default: HOT's runs wait for the kernel tests; their settings name no backend (the train
    # rule resolves it at job time); the other methods are fake
    # LoRA with HOT on some layers is among them (its HOT layers are HOT's own)
    auto = [r for r in p.runs.values() if r.uses_kernels]
    lora_hot = [r for r in auto if r.settings["method"].startswith("lora_hot")]
    assert lora_hot and all(r.backend == "auto" for r in auto)
    assert all(r.settings["method"] in HOT_METHODS for r in auto if r not in lora_hot)
    assert all("backend" not in (r.settings.get("hot") or {}) for r in p.runs.values())
    assert {r.backend for r in p.runs.values() if r not in auto} == {"fake"}
    config = copy.deepcopy(config)
    config["backend"] = "real"
    config["seeds"] = [1, 2]
    p = plan(config)
    real = [r for r in p.runs.values() if r.uses_kernels]
    assert real and all(r.settings["hot"]["backend"] == "real" for r in real)
    assert any(r.settings["method"].startswith("lora_hot") for r in real)
    assert len(p.tables["table1"]) == 8


def test_conflicting_run_definitions_are_refused() -> None:
    from experiments import Plan

    p = Plan()
    p.add(Run("pretrain", "x", {"epochs": 1}))
    p.add(Run("pretrain", "x", {"epochs": 1}))
    with pytest.raises(ValueError, match="differently"):
        p.add(Run("pretrain", "x", {"epochs": 2}))


def test_plan_fetches_each_dataset_once_from_one_data_dir() -> None:
    p = plan(_config())
    expected = {d: f"data/{d}" for d in ("cifar10", "cifar100", "imagenet100")}
    assert p.datasets == {**expected, "imagenet1k": "data/imagenet"}
    assert plan(_config("embedded")).datasets == {"fashion_mnist": "data"}
    config = _config("embedded")
    config["datasets"]["fmnist_small"]["data_dir"] = "elsewhere"
    with pytest.raises(ValueError, match="'fashion_mnist' is read from two data_dirs"):
        _ = plan(config).datasets


@pytest.mark.parametrize(
    ("extra", "gpus"),
    [
        ({}, (1, 1)),  # the kernel tests ask for a GPU: so does the build (on a cluster: a GPU node)
        ({"kernels": {"build": "never"}}, (0, 1)),  # nothing to build
        ({"resources": {"kernel_tests": {"gpu": 0}}, "backend": "fake"}, (0, 0)),
        ({"resources": {"kernel_tests": {"gpu": 0}}, "backend": "real"}, (1, 1)),  # real-quant runs need the kernels
        ({"resources": {"kernel_tests": {"gpu": 0}}}, (1, 1)),  # and so do backend: auto's (the default)
    ],
)
def test_kernels_are_built_and_tested_on_a_gpu_where_needed(tmp_path: Path, extra: dict, gpus: tuple[int, int]) -> None:
    settings = tmp_path / "extra.yaml"
    settings.write_text(yaml.safe_dump(extra))
    text = _dry_run(tmp_path, "--configfile", str(settings), "--", f"{tmp_path}/results/kernels/tests.json")
    resources = _job_blocks(text, "resources")
    for rule, gpu in zip(("kernels", "kernel_tests"), gpus, strict=True):
        (line,) = resources[rule]
        assert f"gpu={gpu}," in line, (rule, line)


def test_a_run_whose_data_is_missing_is_not_attempted(tmp_path: Path) -> None:
    """Its cells say which dataset is missing where, and how to get it; the table is still written."""
    missing = tmp_path / "no-imagenet"
    settings = tmp_path / "missing.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "preset": "embedded",
                "results_dir": f"{tmp_path}/results",
                "tables_dir": f"{tmp_path}/tables",
                "datasets": {"inet": {"dataset": "imagenet100", "data_dir": str(missing)}},
                "experiments": {
                    "table4": {
                        "grid": [{"datasets": ["inet"], "models": ["vit_tiny_fmnist"], "recipe": "embedded_pretrain"}]
                    }
                },
            }
        )
    )
    out = snakemake("--nolock", "--cores", "2", "--configfile", str(settings), "--", "table4", timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    status = json.loads((tmp_path / "results" / "data" / "imagenet100.json").read_text())
    assert status["status"] == "missing"
    reason = f"imagenet100 not found at {missing} (how to get it: "
    assert status["reason"].startswith(reason)
    runs = sorted((tmp_path / "results" / "pretrain").glob("*/metrics.json"))
    assert len(runs) == 4  # fp and hot, two seeds
    assert all(json.loads(r.read_text())["status"] == f"not run: {status['reason']}" for r in runs)
    assert f"not run: {reason}" in (tmp_path / "tables" / "table4.md").read_text()


def test_smoke_plan_is_the_full_plan_on_synthetic_data_a_few_steps_a_run_from_scratch() -> None:
    full, smoke = plan(_config()), plan(_config("smoke"))
    capped = set(yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())["train_overrides"]) | {"init"}
    assert smoke.runs.keys() == full.runs.keys() and smoke.tables == full.tables  # the same DAG
    for key, run in smoke.runs.items():
        assert run.synthetic and run.settings["max_train_batches"] <= 10 and run.settings["epochs"] == 1
        assert "init" not in run.settings  # from scratch: no timm weights
        assert run.backend == full.runs[key].backend  # auto for HOT's runs: the kernels where they passed
        full_settings = full.runs[key].settings
        assert {k: v for k, v in run.settings.items() if k not in capped} == {
            k: v for k, v in full_settings.items() if k not in capped
        }
    assert smoke.synthetic_datasets == set(smoke.datasets)
    cpu = plan(_config("smoke_cpu"))
    assert cpu.tables.keys() == full.tables.keys() and all(r.backend == "fake" for r in cpu.runs.values())
    assert {r.settings["model"] for r in cpu.runs.values()} == {"vit_tiny_fmnist", "resnet_tiny_fmnist"}


def test_smoke_dag_reads_no_dataset_and_writes_the_plan(tmp_path: Path) -> None:
    text = _dry_run(tmp_path, "preset=smoke", "--printshellcmds")
    assert _train_stages(text) == _train_stages(_dry_run(tmp_path))
    shells = re.findall(r"hot data fetch .*", text)
    assert len(shells) == 4 and all("--synthetic" in s for s in shells)
    assert f"{tmp_path}/results/plan.json" in text


@pytest.mark.parametrize("preset", ["gpu", "smoke"], ids=["gpu_preset", "smoke_preset"])  # "gpu": the GPU tests' mark
def test_a_gpu_preset_on_a_machine_without_a_gpu_stops_in_one_line_before_any_job(tmp_path: Path, preset: str) -> None:
    config = ("--config", f"preset={preset}", f"results_dir={tmp_path}/results", f"tables_dir={tmp_path}/tables")
    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}
    out = snakemake("--nolock", "--cores", "2", *config, env=no_gpu)
    assert out.returncode == 1
    last = (out.stdout + out.stderr).strip().splitlines()[-1]
    assert last.startswith(f"preset={preset} needs a CUDA GPU (") and "none is visible here" in last
    assert "--config needs_gpu=False runs it anyway" in last
    assert not (tmp_path / "results").exists()  # nothing started
    # a dry run only plans, and a target of jobs that need no GPU runs
    assert snakemake("-n", "--nolock", "--cores", "2", *config, env=no_gpu).returncode == 0
    plan = snakemake("--nolock", "--cores", "1", *config, "--", f"{tmp_path}/results/plan.json", env=no_gpu)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    # the kernel tests run on a GPU: refused, unless needs_gpu=False says to run anyway (they then record why not)
    tests = ("kernels={build: never}", "--", f"{tmp_path}/results/kernels/tests.json")
    out = snakemake("--nolock", "--cores", "1", *config, *tests, env=no_gpu)
    assert out.returncode == 1 and "needs a CUDA GPU (1 of the jobs to run use one)" in out.stderr
    out = snakemake("--nolock", "--cores", "1", *config, "needs_gpu=False", *tests, env=no_gpu)
    assert out.returncode == 0, out.stdout + out.stderr
    status = json.loads((tmp_path / "results" / "kernels" / "tests.json").read_text())["status"]
    assert status == "not run: disabled in config (kernels.build: never)"


def test_training_runs_share_the_gpu_where_the_preset_says_so(tmp_path: Path) -> None:
    text = _dry_run(tmp_path, "preset=gpu", "--printshellcmds")
    resources = _job_blocks(text, "resources")
    for line in resources["train"]:  # Snakemake's gpu limit is for jobs that need a GPU to themselves
        assert "gpu=0," in line and "gpu_shared=1," in line and "gpu_mem_mb=4000," in line, line
    assert all("gpu=1," in line and "gpu_shared=0," in line for line in resources["latency"])
    assert "hot slots --gpus 1 --jobs-per-gpu 1 --job latency" in text
    full = _job_blocks(_dry_run(tmp_path, "--", f"{tmp_path}/tables/table2.md"), "resources")
    assert all("gpu=1," in line and "gpu_shared=0," in line for line in full["train"])


def test_runs_are_prioritised_longest_first() -> None:
    runs = plan(_config("gpu")).runs
    cost = {key: run.relative_cost for key, run in runs.items()}
    # 6 epochs of 60k images at batch 128 = 2814 steps; a quantised backward 3x, a ResNet 2x
    assert cost["pretrain/fmnist-vit_tiny_fmnist-fp-s0"] == 6 * 469
    assert cost["pretrain/fmnist-resnet_tiny_fmnist-hot-s0"] == 6 * 469 * 6
    assert cost["ablations/fmnist-vit_tiny_fmnist-hot-r4-s1"] == 6 * 469 * 3
    # fine-tuning on classes 5-9: 30k images, 4 epochs
    assert cost["finetune/fmnist_5_9-vit_tiny_fmnist-fp-s1"] == 4 * 235
    assert max(cost, key=cost.__getitem__).startswith("pretrain/fmnist-resnet_tiny_fmnist-")
    # a base model's priority counts the runs that wait for it: it starts before the longest run
    base = plan(_config("gpu"))
    base_key = next(key for key, run in base.runs.items() if key.startswith("pretrain/base-"))
    waiting = [key for key, run in base.runs.items() if run.init_run == base_key]
    assert waiting and base.priority(base_key) == cost[base_key] + sum(cost[key] for key in waiting)
    assert base.priority(base_key) > max(cost.values())
    assert all(base.priority(key) == cost[key] for key in waiting)  # nothing starts from a fine-tuned model
    capped = plan(_config("smoke")).runs  # max_train_batches caps the steps
    fp = [run for run in capped.values() if run.settings["method"] == "fp"]
    assert fp and all(run.relative_cost == 6 * (2 if "resnet" in run.settings["model"] else 1) for run in fp)


def test_gpu_checks_first_put_the_kernel_tests_and_latency_before_every_run(tmp_path: Path) -> None:
    first = _job_blocks(_dry_run(tmp_path, "preset=gpu"))["train"]
    assert first and all("kernels/tests.json" in line and "latency/latency.json" in line for line in first)
    plain = _job_blocks(_dry_run(tmp_path, "preset=gpu", "gpu_checks_first=False"))["train"]
    waiting = [line for line in plain if "kernels/tests.json" in line]
    assert 0 < len(waiting) < len(plain) and not any("latency/latency.json" in line for line in plain)
