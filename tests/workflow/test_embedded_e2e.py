"""End to end: the embedded preset, at a reduced size, produces every table file, well formed (slow, CPU)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .helpers import FIGURES, TABLES, check_csv, check_latex, check_markdown, snakemake

pytestmark = [pytest.mark.slow]

# Smaller than the embedded preset itself: one epoch of a few batches per run; every rule still runs.
REDUCED = {
    "preset": "embedded",
    "seeds": [0],
    "train_overrides": {"epochs": 1, "batch_size": 32, "max_train_batches": 4},
    "base_pretrain": {"overrides": {"epochs": 1}},
    "datasets": {
        name: {"train_subset": 512, "test_subset": 200}
        for name in ("fmnist", "fmnist_small", "fmnist_0_4", "fmnist_5_9")
    },
    "experiments": {"keep_ratio": {"keep_ratios": [0.5, 0.9]}},
}


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("embedded")
    config = tmp / "reduced.yaml"
    config.write_text(yaml.safe_dump({**REDUCED, "results_dir": f"{tmp}/results", "tables_dir": f"{tmp}/tables"}))
    out = snakemake("--cores", "2", "--configfile", str(config), timeout=1500)
    (tmp / "snakemake.log").write_text(out.stdout + out.stderr)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return tmp


def test_every_table_file_exists_and_is_well_formed(embedded: Path) -> None:
    tables = embedded / "tables"
    for table in TABLES:
        check_markdown((tables / f"{table}.md").read_text())
        check_csv((tables / f"{table}.csv").read_text())
        check_latex((tables / f"{table}.tex").read_text())
    for figure in FIGURES:
        assert (tables / "figures" / f"{figure}.png").stat().st_size > 1000
    summary = (tables / "summary.md").read_text()
    check_markdown(summary)
    assert all(f"[{t}]({t}.md)" in summary for t in TABLES)


def test_measurements_without_a_gpu_say_so(embedded: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert "not measured: no GPU" in (embedded / "tables" / "latency_figure.md").read_text()
    assert "not built: no GPU" in (embedded / "tables" / "summary.md").read_text()


def test_deterministic_checks_hold_in_the_embedded_preset(embedded: Path) -> None:
    """Memory and GBOPs are computed for the paper's own models even here, so they must match."""
    memory = (embedded / "tables" / "memory_figure.md").read_text()
    assert "✗ FAIL" not in memory, memory


def test_a_complete_run_has_nothing_left_to_do(embedded: Path) -> None:
    """Rerunning schedules no training or analysis; only a source file edited meanwhile (kernels, a table's module)
    may rerun the jobs that depend on it."""
    out = snakemake("-n", "--cores", "2", "--configfile", str(embedded / "reduced.yaml"))
    assert out.returncode == 0, out.stderr[-3000:]
    scheduled = set(re.findall(r"^(?:local)?rule (\w+):", out.stdout, re.M))
    assert not scheduled & {"data", "train", "memory", "gbops"}, out.stdout[-3000:]
    if scheduled:
        assert "Updated input files: " in out.stdout, out.stdout[-3000:]


def test_report(embedded: Path) -> None:
    report = embedded / "report.html"
    out = snakemake("--configfile", str(embedded / "reduced.yaml"), "--report", str(report), timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert report.stat().st_size > 10_000
    warnings = [line for line in (out.stdout + out.stderr).splitlines() if "warn" in line.lower()]
    assert not warnings, warnings[:10]  # a quiet report: every table and figure it lists exists and is captioned
