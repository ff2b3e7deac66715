"""The SLURM profile against a real (single-node) SLURM cluster started on this machine.

tests/infra/slurm_cluster.sh starts munged, slurmctld and slurmd (cgroup-free, no accounting database, one fake
GPU). A slice of the embedded preset with every kind of job the cluster sees (the kernel build and tests and latency on
the GPU (`--gpus=1`), analysis, tables) runs once locally and once through `--workflow-profile profiles/slurm
--executor slurm --slurm-status-command squeue`; the test asserts that every job got a SLURM job id and that the
tables are identical. Training jobs are left out of the slice only for CI time (they are the same kind of shell job).
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "tests" / "infra" / "slurm_cluster.sh"
TARGETS = ["latency_figure", "memory_figure"]
COPY = ["Snakefile", "config.yaml", "config", "workflow", "profiles", "src", "kernels"]

pytestmark = [pytest.mark.slow]


def _have_slurm() -> bool:
    return all(shutil.which(c) for c in ("slurmctld", "slurmd", "munged", "sbatch", "squeue"))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if not (ROOT / "Snakefile").is_file():
        pytest.skip("no Snakefile in the repository yet")
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("starting slurmctld/slurmd/munged needs root on Linux (CI runs as root)")
    if not _have_slurm():
        if not shutil.which("apt-get"):
            pytest.skip("slurm-wlm/munge are not installed and there is no apt-get to install them")
        subprocess.run(["bash", str(CLUSTER), "install"], check=True, timeout=600)
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "HOT_SLURM_DIR": str(state)}
    out = subprocess.run(["bash", str(CLUSTER), "start"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    env["SLURM_CONF"] = str(state / "etc" / "slurm.conf")
    yield env
    subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, timeout=60)


def _workdir(base: Path) -> Path:
    base.mkdir()
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, base / name, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        elif src.exists():
            shutil.copy2(src, base / name)
    return base


def _snakemake(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    bindir = str(Path(sys.executable).parent)
    env = {**env, "PATH": bindir + os.pathsep + env.get("PATH", "")}
    cmd = [str(Path(bindir) / "snakemake"), "--config", "preset=embedded", *args, "--", *TARGETS]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_embedded_slice_through_slurm_matches_local(slurm, tmp_path):
    local = _workdir(tmp_path / "local")
    run = _snakemake(local, slurm, "--cores", "2")
    assert run.returncode == 0, run.stderr[-4000:]

    cluster = _workdir(tmp_path / "cluster")
    logdir = tmp_path / "slurm-logs"
    run = _snakemake(
        cluster,
        slurm,
        "--workflow-profile",
        "profiles/slurm",
        "--executor",
        "slurm",
        "--slurm-status-command",
        "squeue",
        "--slurm-no-account",
        "--slurm-keep-successful-logs",
        "--slurm-logdir",
        str(logdir),
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--jobs",
        "4",
        "--latency-wait",
        "5",
        "--retries",
        "0",
        # The profile runs jobs in the project's Apptainer image; this test cluster has no apptainer (the image's
        # contents are proven by test_docker.py/test_nvcc.py), so the deployment method is switched to one that
        # no rule of the workflow uses.
        "--software-deployment-method",
        "env-modules",
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-6000:]

    # Every job went through SLURM: the plugin reports each submission's job id, and each left a SLURM log.
    submitted = re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log)
    jobids = {jid for _, jid in submitted}
    assert submitted, log[-4000:]
    logs = sorted(logdir.rglob("*.log"))
    assert jobids == {p.stem for p in logs}, (jobids, logs)
    local_jobs = re.findall(r"^localrule (\w+):", log, flags=re.M)
    assert set(local_jobs) <= {"all"}, f"jobs that ran outside SLURM: {local_jobs}"
    # GPU-only rules asked SLURM for a GPU (the test cluster's fake one) and recorded "no GPU" all the same.
    latency_log = next(p for p in logs if "latency" in p.parent.name or "latency" in p.read_text()[:2000])
    assert latency_log.exists()

    # The tables are the same as the local run's.
    kinds = {".md", ".csv", ".tex"}
    tables = sorted(p.relative_to(local) for p in (local / "paper_tables").rglob("*") if p.suffix in kinds)
    assert tables, "the local run wrote no tables"
    for rel in tables:
        assert (cluster / rel).is_file(), f"SLURM run lacks {rel}"
        assert filecmp.cmp(local / rel, cluster / rel, shallow=False), f"{rel} differs between local and SLURM runs"
    print(f"SLURM job ids: {sorted(jobids, key=int)}; identical tables: {[str(t) for t in tables]}")
