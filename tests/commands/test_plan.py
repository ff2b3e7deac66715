"""``hot plan``: GPU-hours per table from the workflow's plan.json and a smoke run's measured step times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hot.cli import main
from hot.commands.plan import estimate_plan
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
    assert table1 == {"runs": 2, "gpu_hours": pytest.approx(50 * 391 * 0.56 / 3600), "unmeasured": []}
    assert table2["runs"] == 3 and table2["unmeasured"] == ["ablations/b-hot"]
    assert table2["gpu_hours"] == pytest.approx(50 * (100 + 391) * 0.36 / 3600)
    assert estimate["measured_on"] == ["NVIDIA H100"]


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
    assert json.loads(out.read_text())["tables"]["table2"]["unmeasured"] == ["ablations/b-hot"]


def test_step_times_measured_on_the_cpu_are_flagged(plan_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    measured = plan_file.parent / "cpu"
    _measure(measured, "finetune/a-fp", 2.0, 391, gpu=None)
    assert main(["plan", "--plan", str(plan_file), "--measured", str(measured)]) == 0
    assert "measured on the CPU: those estimates say nothing about a GPU" in capsys.readouterr().out


def test_a_smoke_run_that_timed_another_model_or_batch_size_is_no_measurement(plan_file: Path) -> None:
    """The CPU smoke preset's runs have the planned keys but small models and batches: they time something else."""
    measured = plan_file.parent / "small"
    _measure(measured, "finetune/a-fp", 0.01, 6250, gpu=None, model="vit_tiny_fmnist")
    _measure(measured, "finetune/a-hot", 0.01, 6250, gpu=None, batch_size=8)
    runs = estimate_plan(json.loads(plan_file.read_text()), measured)["runs"]
    assert all(r["gpu_hours"] is None for r in runs.values())
