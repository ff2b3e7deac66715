"""The workflow profiles: what the SLURM profile's Apptainer arguments hand the container."""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from snakemake.deployment import singularity

from .helpers import REPO

SLURM = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())


def _container_env(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """The variables the container gets through --env, from the command Snakemake runs for a job under the profile
    (a stand-in `singularity` records its arguments; --env's value is parsed as CSV, as Apptainer does)."""
    fake = tmp_path / "bin" / "singularity"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {tmp_path}/args\n')
    fake.chmod(0o755)
    command = singularity.shellcmd("hot.sif", "hot info", args=SLURM["apptainer-args"])
    base = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES" and not k.startswith("SLURM_")}
    run_env = {**base, **env, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", command], env=run_env, check=True, timeout=30)
    args = (tmp_path / "args").read_text().splitlines()
    assert "--cleanenv" in args and "--nv" in args
    passed = {}
    for i, arg in enumerate(args):
        if arg == "--env":
            for pair in next(csv.reader([args[i + 1]])):
                key, _, value = pair.partition("=")
                passed[key] = value
    return passed


@pytest.mark.parametrize(
    "env",
    [
        {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_GPUS": "2,3", "SLURM_STEP_GPUS": "2,3"},
        {"CUDA_VISIBLE_DEVICES": "1"},
        {"CUDA_VISIBLE_DEVICES": ""},  # no GPU for this job: the container must not see the node's
    ],
)
def test_slurm_profile_hands_the_jobs_gpus_through_cleanenv(tmp_path: Path, env: dict[str, str]) -> None:
    assert _container_env(tmp_path, env) == env


def test_slurm_profile_sets_no_gpu_variable_the_job_lacks(tmp_path: Path) -> None:
    assert _container_env(tmp_path, {}) == {}
