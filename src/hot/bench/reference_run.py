"""Copy a finished preset run into a committed reference folder (``paper_tables/reference/<name>/``): its tables,
figures and summary as the workflow wrote them, and the wall time of every job from Snakemake's benchmark files.

    python -m hot.bench.reference_run RESULTS_DIR TABLES_DIR OUT_DIR [--logs SNAKEMAKE_LOG ...]

``OUT_DIR/job_times.csv``: one row per job (its kind: ``train``, a table, ``kernels``...; the job; seconds; peak RSS
in MiB), from ``RESULTS_DIR/benchmarks/**.tsv``; ``OUT_DIR/run.json``: the machine (from a training run's metrics:
GPU, torch), the jobs and seconds per kind, and, given the Snakemake logs of the run (``.snakemake/log/*.log``, one
per piece of a run resumed in pieces), the workflow's wall time: each log from its first to its last timestamp,
summed. The reference folders' README names each folder's command and machine.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..results import write_atomic, write_json_atomic

USAGE = "usage: python -m hot.bench.reference_run RESULTS_DIR TABLES_DIR OUT_DIR [--logs SNAKEMAKE_LOG ...]"
TRAIN_STAGES = ("pretrain", "finetune", "ablations")
_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$", re.M)


def job_kind(job: str) -> str:
    """The kind of a job from its benchmark file's path under ``benchmarks/`` (without ``.tsv``)."""
    head, _, rest = job.partition("/")
    if head in TRAIN_STAGES:
        return "train"
    return rest if head == "tables" else head


def job_times(benchmarks: Path) -> list[dict[str, Any]]:
    """Every job's seconds and peak RSS from Snakemake's benchmark files (the last row: the last attempt)."""
    rows = []
    for path in sorted(benchmarks.rglob("*.tsv")):
        job = path.relative_to(benchmarks).with_suffix("").as_posix()
        last = list(csv.DictReader(io.StringIO(path.read_text()), delimiter="\t"))[-1]
        rows.append({"kind": job_kind(job), "job": job, "s": float(last["s"]), "max_rss_mib": last["max_rss"]})
    return rows


def log_wall_s(logs: Iterable[Path]) -> float:
    """The time Snakemake ran: each log from its first to its last timestamp, summed over the logs."""
    total = 0.0
    for log in logs:
        found = _STAMP.findall(log.read_text())
        stamps = [datetime.strptime(" ".join(m.split()), "%a %b %d %H:%M:%S %Y") for m in found]
        if stamps:
            total += (max(stamps) - min(stamps)).total_seconds()
    return total


def machine(results: Path) -> dict[str, Any]:
    """The GPU and software a run trained on, from the first training run's metrics that names them."""
    for path in sorted(results.glob("*/*/metrics.json")):
        env = json.loads(path.read_text()).get("environment") or {}
        if env.get("gpu"):
            return {k: env.get(k) for k in ("gpu", "gpu_capability", "cuda_driver", "torch", "torch_cuda", "hot")}
    return {}


def copy_tables(tables: Path, out: Path) -> list[str]:
    """The workflow's tables (md, csv, tex), figures and summary, copied as they are."""
    copied = []
    for path in sorted(tables.rglob("*")):
        if path.is_file() and path.suffix in (".md", ".csv", ".tex", ".png"):
            target = out / path.relative_to(tables)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            copied.append(path.relative_to(tables).as_posix())
    return copied


def collect(results: Path, tables: Path, out: Path, logs: Sequence[Path] = ()) -> dict[str, Any]:
    """Fill ``out`` from a finished run; returns what ``run.json`` holds."""
    if not (tables / "summary.md").is_file():
        raise FileNotFoundError(f"{tables / 'summary.md'} is missing: the run is not finished")
    out.mkdir(parents=True, exist_ok=True)
    copied = copy_tables(tables, out)
    rows = job_times(results / "benchmarks")
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["kind", "job", "s", "max_rss_mib"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(out / "job_times.csv", lambda f: f.write(text.getvalue().encode()))
    kinds: dict[str, dict[str, float]] = {}
    for row in rows:
        kind = kinds.setdefault(row["kind"], {"jobs": 0, "s": 0.0})
        kind["jobs"] += 1
        kind["s"] = round(kind["s"] + row["s"], 2)
    summary = {
        "machine": machine(results),
        "jobs": len(rows),
        "job_seconds_by_kind": kinds,
        "workflow_wall_s": round(log_wall_s(logs), 1) if logs else None,
        "snakemake_logs": [log.name for log in logs],
        "files": copied,
    }
    write_json_atomic(out / "run.json", summary, sort_keys=True)
    return summary


def main(argv: Sequence[str]) -> int:
    logs_at = argv.index("--logs") if "--logs" in argv else len(argv)
    paths, logs = [Path(a) for a in argv[:logs_at]], [Path(a) for a in argv[logs_at + 1 :]]
    if len(paths) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        summary = collect(*paths, logs)
    except FileNotFoundError as err:
        print(f"reference_run: {err}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in summary.items() if k != "files"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
