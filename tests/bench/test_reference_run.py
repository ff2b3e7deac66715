"""hot.bench.reference_run: a finished run's tables and job times, copied into a reference folder."""

import csv
import json
from pathlib import Path

from hot.bench import reference_run

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(path: Path, *seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "".join(f"{s}\t0:00:00\t100.5\t1\t1\t1\t0\t0\t1\t1\n" for s in seconds))


def _run(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    results, tables = tmp_path / "results", tmp_path / "tables"
    _bench(results / "benchmarks" / "pretrain" / "a-s0.tsv", 99.0, 12.5)  # a retried job: its last attempt counts
    _bench(results / "benchmarks" / "ablations" / "b-s1.tsv", 30.0)
    _bench(results / "benchmarks" / "tables" / "table2.tsv", 5.5)
    _bench(results / "benchmarks" / "kernels.tsv", 8.0)
    run = results / "pretrain" / "a-s0"
    run.mkdir(parents=True)
    env = {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cpu": "x"}
    (run / "metrics.json").write_text(json.dumps({"environment": env}))
    (tables / "figures").mkdir(parents=True)
    for name in ("summary.md", "table2.md", "table2.csv", "figures/table2.png"):
        (tables / name).write_text(name)
    logs = [tmp_path / "one.log", tmp_path / "two.log"]
    logs[0].write_text("[Wed Nov 25 13:26:20 2026]\nlocalrule train:\n[Wed Nov 25 13:33:21 2026]\nFinished\n")
    logs[1].write_text("nothing timed\n[Wed Nov 25 13:33:28 2026]\nx\n[Wed Nov 25 13:35:00 2026]\n")
    return results, tables, logs


def test_a_finished_run_is_copied_with_its_job_times_and_wall_time(tmp_path):
    results, tables, logs = _run(tmp_path)
    out = tmp_path / "reference"
    summary = reference_run.collect(results, tables, out, logs)
    assert sorted(summary["files"]) == ["figures/table2.png", "summary.md", "table2.csv", "table2.md"]
    assert (out / "figures" / "table2.png").read_text() == "figures/table2.png"
    rows = list(csv.DictReader((out / "job_times.csv").open()))
    assert [(r["kind"], r["job"], float(r["s"])) for r in rows] == [
        ("train", "ablations/b-s1", 30.0), ("kernels", "kernels", 8.0),
        ("train", "pretrain/a-s0", 12.5), ("table2", "tables/table2", 5.5),
    ]  # fmt: skip
    assert summary["job_seconds_by_kind"]["train"] == {"jobs": 2, "s": 42.5}
    assert summary["workflow_wall_s"] == 421 + 92  # 7 min 1 s in the first piece, 92 s in the second
    assert summary["machine"]["gpu"] == "NVIDIA H100 80GB HBM3" and "cpu" not in summary["machine"]
    assert json.loads((out / "run.json").read_text())["jobs"] == 4


def test_an_unfinished_run_is_refused_by_name(tmp_path, capsys):
    results, tables, _ = _run(tmp_path)
    (tables / "summary.md").unlink()
    assert reference_run.main([str(results), str(tables), str(tmp_path / "out")]) == 2
    assert "summary.md is missing: the run is not finished" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert reference_run.main([str(results), str(tables)]) == 2
    assert capsys.readouterr().err.startswith("usage: python -m hot.bench.reference_run RESULTS_DIR")
