"""``hot plan``: GPU-hours per table from the workflow's plan.json and a smoke run's measured step times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hot.cli import main
from hot.commands.plan import estimate_plan, report
from hot.train.config import TrainConfig


def _settings(model: str, method: str, **extra: object) -> dict:
    return {"dataset": "cifar100", "model": model, "method": method, "recipe": "vit_finetune", "seed": 0, **extra}


def _measure(
    root: Path, key: str, step_time: float, batches: int, gpu: str | None = "NVIDIA H100", **changed: object
) -> None:
    """A smoke run's metrics: its settings are the planned run's (``changed``: but these) with a few steps."""
    path = root / key / "metrics.json"
    path.parent.mkdir(parents=True)
    epoch = {"epoch": 1, "step_time_s": step_time, "batches_per_epoch": batches, "train_batches": 6}
    config = TrainConfig.from_dict({**RUNS[key], "max_train_batches": 6, "epochs": 1, **changed}).to_dict()
    metrics = {"epochs": [epoch], "device": "cuda:0" if gpu else "cpu", "environment": {"gpu": gpu}, "config": config}
    path.write_text(json.dumps(metrics))


RUNS = {
    "finetune/a-fp": _settings("vit_base_patch16_224", "fp"),  # measured itself
    "finetune/a-hot": _settings("vit_base_patch16_224", "hot"),  # measured itself
    "ablations/a-hot-r4": _settings("vit_base_patch16_224", "hot", hot={"hla_rank": 4}, max_train_batches=100),
    "ablations/b-hot": _settings("resnet18", "hot", recipe="resnet_pretrain"),  # nothing like it measured
}


@pytest.fixture
def plan_file(tmp_path: Path) -> Path:
    plan = {
        "preset": "full",
        "runs": {k: {"settings": s, "backend": "auto", "init_run": None} for k, s in RUNS.items()},
        "tables": {
            "table1": {"fp@s0": "finetune/a-fp", "hot@s0": "finetune/a-hot"},
            "table2": {"r4@s0": "ablations/a-hot-r4", "r8@s0": "finetune/a-hot", "x@s0": "ablations/b-hot"},
        },
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    measured = tmp_path / "smoke"
    _measure(measured, "finetune/a-fp", 0.2, 391)
    _measure(measured, "finetune/a-hot", 0.36, 391)
    (measured / "ablations" / "b-hot").mkdir(parents=True)  # a run that did not train ("not measured: ...")
    (measured / "ablations" / "b-hot" / "metrics.json").write_text('{"status": "not measured: no GPU"}')
    return path


def test_gpu_hours_are_runs_x_epochs_x_steps_x_step_time(plan_file: Path) -> None:
    estimate = estimate_plan(json.loads(plan_file.read_text()), plan_file.parent / "smoke")
    runs = estimate["runs"]
    assert runs["finetune/a-fp"]["gpu_hours"] == pytest.approx(50 * 391 * 0.2 / 3600)  # vit_finetune: 50 epochs
    # no measurement of its own: HOT on the same model, dataset and batch size; its max_train_batches caps the steps
    assert runs["ablations/a-hot-r4"]["from"] == "finetune/a-hot"
    assert runs["ablations/a-hot-r4"]["gpu_hours"] == pytest.approx(50 * 100 * 0.36 / 3600)
    assert runs["ablations/b-hot"]["gpu_hours"] is None
    table1, table2 = estimate["tables"]["table1"], estimate["tables"]["table2"]
    assert table1 == {"runs": 2, "gpu_hours": pytest.approx(50 * 391 * 0.56 / 3600), "derived": [], "unmeasured": []}
    assert runs["finetune/a-fp"]["priced"] == "measured" and runs["ablations/a-hot-r4"]["priced"] == "derived"
    assert runs["ablations/b-hot"]["why"] == "no run of model resnet18 was measured"
    assert table2["runs"] == 3 and table2["unmeasured"] == ["ablations/b-hot"]
    assert table2["gpu_hours"] == pytest.approx(50 * (100 + 391) * 0.36 / 3600)
    assert estimate["measured_on"] == ["NVIDIA H100"]
    assert estimate["methods"] == {
        "fp": {"runs": 1, "gpu_hours": pytest.approx(50 * 391 * 0.2 / 3600), "unpriced": 0},
        "hot": {"runs": 3, "gpu_hours": pytest.approx(50 * (391 + 100) * 0.36 / 3600), "unpriced": 1},
    }


def test_hot_plan_prints_each_table_and_names_what_has_no_measurement(
    plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "estimate.json"
    argv = ["plan", "--plan", str(plan_file), "--measured", str(tmp_path / "smoke"), "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "step times measured on NVIDIA H100" in text
    assert f"{'table1':<18} {2:>5} {50 * 391 * 0.56 / 3600:>11.1f}" in text
    assert "no measurement (1 runs, not in the sums above):\n  ablations/b-hot" in text
    hot_hours, total = 50 * 491 * 0.36 / 3600, 50 * (391 * 0.56 + 100 * 0.36) / 3600
    assert f"{'hot':<20} {3:>5} {hot_hours:>11.1f} {hot_hours / total:>6.0%}  1" in text  # the larger share first
    assert text.index(f"{'hot':<20} ") < text.index(f"{'fp':<20} ")
    assert json.loads(out.read_text())["tables"]["table2"]["unmeasured"] == ["ablations/b-hot"]


def test_step_times_measured_on_the_cpu_are_flagged(plan_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    measured = plan_file.parent / "cpu"
    _measure(measured, "finetune/a-fp", 2.0, 391, gpu=None)
    assert main(["plan", "--plan", str(plan_file), "--measured", str(measured)]) == 0
    assert "measured on the CPU: those estimates say nothing about a GPU" in capsys.readouterr().out


def test_a_smoke_run_that_timed_another_model_is_no_measurement_another_batch_size_is_scaled(plan_file: Path) -> None:
    """The CPU smoke preset's runs have the planned keys but small models and batches: they time something else."""
    measured = plan_file.parent / "small"
    _measure(measured, "finetune/a-fp", 0.01, 6250, gpu=None, model="vit_tiny_fmnist")
    runs = estimate_plan(json.loads(plan_file.read_text()), measured)["runs"]
    assert all(r["gpu_hours"] is None for r in runs.values())
    assert runs["finetune/a-hot"]["why"] == "no run of model vit_base_patch16_224 was measured"
    _measure(measured, "finetune/a-hot", 0.01, 6250, gpu=None, batch_size=8)
    run = estimate_plan(json.loads(plan_file.read_text()), measured)["runs"]["finetune/a-hot"]
    assert run["priced"] == "derived" and run["from"] == "finetune/a-hot"
    # the steps of an epoch of CIFAR-100 at batch 128 are what the vit_tiny run measured (a property of the data)
    assert run["scaled"] == ["batch 128/8"]
    assert run["gpu_hours"] == pytest.approx(50 * 6250 * (0.01 * 16) / 3600)


def _full_plan(tmp_path: Path, runs: dict[str, dict]) -> dict:
    return {
        "preset": "full",
        "runs": {k: {"settings": s, "backend": "auto", "init_run": None} for k, s in runs.items()},
        "tables": {"table4": {k.replace("/", "|"): k for k in runs}},
    }


def test_every_run_of_a_measured_model_is_priced_from_its_nearest_measured_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run without a measurement of its own takes the nearest of its model's: its method family first, then its
    input size, method, dataset and batch size; the steps are the run's own."""
    runs = {
        "pretrain/c10-r18-hot": _settings("resnet18", "hot", dataset="cifar10", recipe="resnet_pretrain"),
        "pretrain/c100-r18-hot": _settings("resnet18", "hot", dataset="cifar100", recipe="resnet_pretrain"),
        "pretrain/c10-r18-abc": _settings("resnet18", "hot_abc", dataset="cifar10", recipe="resnet_pretrain"),
        "pretrain/in100-r18-hot": _settings("resnet18", "hot", dataset="imagenet100", recipe="resnet_pretrain"),
        "pretrain/c10-r18-int4": _settings("resnet18", "int4", dataset="cifar10", recipe="resnet_pretrain"),
        "pretrain/c10-r18-fp": _settings("resnet18", "fp", dataset="cifar10", recipe="resnet_pretrain"),
        "pretrain/c10-r34-hot": _settings("resnet34", "hot", dataset="cifar10", recipe="resnet_pretrain"),
    }
    for key, settings in runs.items():  # _measure reads the planned settings from RUNS
        monkeypatch.setitem(RUNS, key, settings)
    measured = tmp_path / "smoke"
    _measure(measured, "pretrain/c10-r18-hot", 0.05, 391)
    _measure(measured, "pretrain/c10-r18-fp", 0.02, 391)
    estimate = estimate_plan(_full_plan(tmp_path, runs), measured)
    priced = estimate["runs"]
    epochs = TrainConfig.from_dict(runs["pretrain/c10-r18-hot"]).epochs
    assert priced["pretrain/c10-r18-hot"]["priced"] == "measured"
    # the same family on another dataset of the same input size: its own steps (computed: 50000 / 128)
    c100 = priced["pretrain/c100-r18-hot"]
    assert (c100["priced"], c100["from"]) == ("derived", "pretrain/c10-r18-hot")
    assert c100["scaled"] == ["steps per epoch from the dataset's size"]
    assert c100["gpu_hours"] == pytest.approx(epochs * 391 * 0.05 / 3600)
    # another HOT preset: the family's measurement, not FP's
    assert priced["pretrain/c10-r18-abc"]["from"] == "pretrain/c10-r18-hot"
    assert priced["pretrain/c10-r18-abc"]["scaled"] == []  # cifar10 at batch 128 was measured: 391 steps
    # ImageNet-100's 224² from CIFAR's 32²: the pixel ratio, and ImageNet-100's steps (126689 / 128)
    in100 = priced["pretrain/in100-r18-hot"]
    assert in100["scaled"] == ["input 224²/32²", "steps per epoch from the dataset's size"]
    assert in100["gpu_hours"] == pytest.approx(epochs * 990 * 0.05 * 49 / 3600)
    # no INT4 run of the model measured: another family's, and the report says which
    int4 = priced["pretrain/c10-r18-int4"]
    assert int4["from"] == "pretrain/c10-r18-hot" and int4["scaled"] == ["another method family (hot)"]
    assert priced["pretrain/c10-r34-hot"]["gpu_hours"] is None
    assert estimate["tables"]["table4"]["unmeasured"] == ["pretrain/c10-r34-hot"]
    text = report(estimate)
    assert "derived (no measurement of their own; 4 runs, in the sums above):" in text
    assert (
        "  pretrain/in100-r18-hot <- pretrain/c10-r18-hot (input 224²/32²; steps per epoch from the dataset's size)"
        in text
    )
    assert "  pretrain/c10-r34-hot: no run of model resnet34 was measured" in text
