"""End to end: the CPU smoke preset (the full-scale DAG, synthetic data, small models, a few steps a run) completes
and writes every table, each naming the backend of its cells, and what `hot plan` reads (slow, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hot.cli import main

from .helpers import FIGURES, TABLES, check_markdown, snakemake

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def smoke_cpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("smoke_cpu")
    dirs = [f"results_dir={tmp}/results", f"tables_dir={tmp}/tables"]
    out = snakemake("--cores", "2", "--config", "preset=smoke_cpu", *dirs, timeout=1800)
    (tmp / "snakemake.log").write_text(out.stdout + out.stderr)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return tmp


def test_every_table_is_written_from_runs_that_trained(smoke_cpu: Path) -> None:
    for table in [*TABLES, "summary"]:
        check_markdown((smoke_cpu / "tables" / f"{table}.md").read_text())
    for table in FIGURES:
        assert (smoke_cpu / "tables" / "figures" / f"{table}.png").stat().st_size > 1000
    plan = json.loads((smoke_cpu / "results" / "plan.json").read_text())
    for key in plan["runs"]:
        metrics = json.loads((smoke_cpu / "results" / key / "metrics.json").read_text())
        assert metrics["config"]["synthetic"] and metrics["epochs"][0]["step_time_s"] > 0, key
    assert (
        "cells: no quantisation on CPU (fp); fake backend on CPU (" in (smoke_cpu / "tables" / "table1.md").read_text()
    )


def test_hot_plan_estimates_every_run_from_the_smoke_measurements(
    smoke_cpu: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = smoke_cpu / "results"
    estimate = smoke_cpu / "estimate.json"
    argv = ["plan", "--plan", str(results / "plan.json"), "--measured", str(results), "--json", str(estimate)]
    assert main(argv) == 0
    assert "measured on the CPU" in capsys.readouterr().out
    tables = json.loads(estimate.read_text())["tables"]
    assert all(t["gpu_hours"] > 0 and not t["unmeasured"] for t in tables.values() if t["runs"])
