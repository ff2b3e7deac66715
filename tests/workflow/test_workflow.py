"""The Snakemake workflow: lint, dry runs of both presets, config validation, the experiment plan."""

from __future__ import annotations

import copy
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from .helpers import REPO, TABLES, snakemake

sys.path.insert(0, str(REPO / "workflow" / "lib"))
from experiments import Run, plan


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


def _job_blocks(dry_run: str) -> dict[str, list[str]]:
    """rule name -> the input lines of its jobs, from a dry run's listing."""
    blocks: dict[str, list[str]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", dry_run):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if head:
            inputs = re.search(r"^\s+input: (.*)$", block, re.M)
            blocks.setdefault(head.group(1), []).append(inputs.group(1) if inputs else "")
    return blocks


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
    assert len(blocks["pretrain"]) == 84
    measured = {"kernels", "kernel_tests", "latency", "bench_latency", "bench_end_to_end", "memory", "gbops"}
    assert measured | {"finetune", "ablations"} <= set(blocks)
    for name in ("latency", "end_to_end"):
        assert f"{tmp_path}/results/bench/{name}.json" in text


def test_embedded_dag_contains_every_rule(tmp_path: Path) -> None:
    blocks = _job_blocks(_dry_run(tmp_path, "preset=embedded"))
    assert set(blocks) == _rules()


def test_table_jobs_depend_on_results_and_their_own_code_only(tmp_path: Path) -> None:
    """Editing one table's module (or training code) cannot rerun another table or any training."""
    blocks = _job_blocks(_dry_run(tmp_path, "preset=embedded"))
    shared = {f"src/hot/tables/{m}.py" for m in ("__init__", "cli", "common", "render", "plots")}
    for table in TABLES:
        (inputs,) = blocks[table]
        for path in inputs.split(", "):
            assert (
                path.startswith(f"{tmp_path}/results/")
                or path in shared
                or path in (f"src/hot/tables/{table}.py", "src/hot/data/paper_values.yaml")
            ), f"{table} depends on {path}"
    for stage in ("pretrain", "finetune", "ablations"):
        assert all("src/" not in inputs for inputs in blocks[stage])


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


def test_unknown_preset_is_refused_before_it_becomes_a_path(tmp_path: Path) -> None:
    out = snakemake("-n", "--nolock", "--config", f"results_dir={tmp_path}/r", "preset=../../x")
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "unknown preset '../../x'; known presets: full, embedded, gpu" in text
    assert "x.yaml" not in text
    assert len(text.splitlines()) < 30, text


def test_schema_presets_are_the_preset_files() -> None:
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    files = sorted(p.stem for p in (REPO / "config").glob("*.yaml"))
    assert schema["properties"]["preset"]["enum"] == ["full", *files]


def test_schema_overrides_are_train_config_keys_with_its_choices() -> None:
    import dataclasses

    from hot.train.config import OPTIMIZERS, SCHEDULERS, TORCH_COMPILE, TrainConfig

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    overrides = schema["$defs"]["overrides"]
    assert overrides["additionalProperties"] is False
    assert set(overrides["properties"]) <= {f.name for f in dataclasses.fields(TrainConfig)}
    for key, choices in (("optimizer", OPTIMIZERS), ("scheduler", SCHEDULERS), ("torch_compile", TORCH_COMPILE)):
        assert overrides["properties"][key]["enum"] == list(choices), key


def test_config_values_reach_shell_commands_quoted(tmp_path: Path) -> None:
    """A model string with shell syntax and a results_dir with a space are single arguments of each command."""
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
    commands = [line.removeprefix("Shell command: ") for line in out.stdout.splitlines() if "Shell command: " in line]
    programs = set()
    for command in commands:
        args = shlex.split(command)
        programs.add(next(a for a in args if "=" not in a))  # past the VAR=value prefixes
        assert sum(a.count(results) for a in args) == command.count(results) > 0, command  # no path split
        if "train.sh" in args:
            assert json.loads(args[args.index("workflow/scripts/train.sh") + 2])["model"] == "vit_tiny_fmnist"
        if "gbops" in args or "memory" in args:
            assert args[args.index("--model") + 1] in models.values(), command
    assert {"hot", "bash"} <= programs
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
    from snakemake.utils import validate

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    if preset != "full":
        from snakemake.utils import update_config

        update_config(config, yaml.safe_load((REPO / "config" / f"{preset}.yaml").read_text()))
    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    return config


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
    assert p.runs[p.tables["table2"]["r4@s0"]].settings["hot"] == {"hla_rank": 4}
    assert p.runs[p.tables["table3"]["f0d1@s0"]].settings["method"] == "lora_hot_decomposed"
    assert p.runs[p.tables["keep_ratio_sweep"]["grad_dropout/0.5@s0"]].settings["method"] == "grad_dropout"
    # identical settings are one run, whichever tables use it (a HOTConfig field at its default is not spelt out)
    assert p.tables["keep_ratio_sweep"]["fp@s0"] == p.tables["hla_blocking"]["fp@s0"]
    assert p.tables["table2"]["r8@s1"] == p.tables["hla_blocking"]["spatial@s1"]
    assert p.runs[p.tables["hla_blocking"]["paper@s0"]].settings["hot"] == {"hla_blocking": "paper"}
    assert all(r.settings["device"] == "cpu" and r.settings["epochs"] == 2 for r in p.runs.values())
    # two seeds everywhere, so every accuracy check can state a spread
    assert {role.rpartition("@s")[2] for roles in p.tables.values() for role in roles} == {"0", "1"}
    # the classifier stays exact wherever HOT is applied without LoRA
    converted = [r for r in p.runs.values() if r.settings["method"] != "fp" and "lora" not in r.settings]
    assert converted and all(r.settings["exclude"] == ["head", "fc"] for r in converted)


def test_gpu_plan() -> None:
    p = plan(_config("gpu"))
    hot = [r for r in p.runs.values() if r.settings["method"] in ("hot", "hot_abc", "hot_abc_lqs")]
    assert hot and all(r.real for r in hot)
    assert all(r.settings["device"] == "cuda" and "train_subset" not in r.settings for r in p.runs.values())
    assert {role.rpartition("@s")[2] for roles in p.tables.values() for role in roles} == {"0", "1", "2"}
    assert set(p.tables["hla_blocking"]) == {
        f"{c}@s{s}" for c in ("fp", "spatial", "paper", "official") for s in range(3)
    }
    # the blocking ablation's FP and spatial runs are Table 4's ViT runs
    assert p.tables["hla_blocking"]["spatial@s2"] == p.tables["table4"]["fmnist/vit_tiny_fmnist/hot@s2"]
    assert p.tables["hla_blocking"]["fp@s2"] == p.tables["table4"]["fmnist/vit_tiny_fmnist/fp@s2"]


def test_full_plan_is_the_paper_grid() -> None:
    config = _config()
    p = plan(config)
    assert len(p.tables["table4"]) == 17 * 5
    assert len(p.tables["table2"]) == 5 and len(p.tables["keep_ratio_sweep"]) == 1 + 2 * 5
    assert all(not r.real for r in p.runs.values())
    config = copy.deepcopy(config)
    config["backend"] = "real"
    config["seeds"] = [1, 2]
    p = plan(config)
    real = [r for r in p.runs.values() if r.real]
    assert real and all(r.settings["method"] in ("hot", "hot_abc", "hot_abc_lqs") for r in real)
    assert len(p.tables["table1"]) == 8


def test_conflicting_run_definitions_are_refused() -> None:
    from experiments import Plan

    p = Plan()
    p.add(Run("pretrain", "x", {"epochs": 1}))
    p.add(Run("pretrain", "x", {"epochs": 1}))
    with pytest.raises(ValueError, match="differently"):
        p.add(Run("pretrain", "x", {"epochs": 2}))
