"""docker/Dockerfile's layers after the CUDA base, built for real with buildah (no Docker engine, no registry here),
then run as the image's user and as an arbitrary uid.

The `system` stage (the CUDA base and Ubuntu/PPA packages) cannot be fetched here, so the `hot` stage is built on a
local stand-in passed as --build-arg SYSTEM: a Debian bookworm rootfs (debootstrap) with the same system packages
(python3.11, python3.11-venv, tini, git, dataset-fashion-mnist). The Dockerfile is used as written except the two
envs/install.sh calls, which get --print (the torch CUDA wheels' index and nvcc are out of reach): the script runs
in the image and plans its installs, and an empty venv is created where the deps step puts it. Every other
instruction (user, permissions, the .snakemake link, entrypoint, volumes) runs verbatim. .ci/run installs buildah
and debootstrap; without them (or without root) the test is skipped, except under CI where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
MIRROR = os.environ.get("HOT_DEBIAN_MIRROR", "http://deb.debian.org/debian")
STANDIN_PACKAGES = "python3.11,python3.11-venv,python3-distutils,tini,git,dataset-fashion-mnist,ca-certificates"
OTHER_UID = 4321

DEPS = 'RUN bash envs/install.sh --python python3.11 --venv /opt/venv --variant "${TORCH_VARIANT}" --steps deps\n'
PROJECT = (
    'RUN bash envs/install.sh --venv /opt/venv --variant "${TORCH_VARIANT}" --steps project,kernels \\\n'
    " && python -c \"import hot, hot_kernels; print('hot and hot_kernels import')\" \\\n"
)


def standin_dockerfile(text: str) -> str:
    """The Dockerfile with only its two install steps planned instead of run (each must occur exactly once, so a
    changed Dockerfile breaks this test rather than silently building something else)."""
    assert text.count(DEPS) == 1 and text.count(PROJECT) == 1, "the Dockerfile's install steps changed shape"
    text = text.replace(DEPS, f"RUN python3.11 -m venv /opt/venv && {DEPS[4:-1]} --print\n")
    return text.replace(PROJECT, f"{PROJECT.splitlines()[0][:-2]} --print \\\n && python --version \\\n")


def test_standin_dockerfile_keeps_everything_else():
    text = DOCKERFILE.read_text()
    derived = standin_dockerfile(text)
    kept = [line for line in text.splitlines() if "install.sh" not in line and "import hot, hot_kernels" not in line]
    assert all(line in derived.splitlines() for line in kept)


class Image:
    def __init__(self, work: Path, tag: str):
        self.buildah = ["buildah", "--root", str(work / "storage"), "--runroot", str(work / "run")]
        self.buildah += ["--storage-driver", "vfs"]
        self.work, self.tag = work, tag

    def cmd(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run([*self.buildah, *args], capture_output=True, text=True, timeout=900)
        if check and out.returncode != 0:
            raise AssertionError(f"buildah {' '.join(args)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return out

    def run(self, script: str, *opts: str) -> subprocess.CompletedProcess:
        """The image's entrypoint (as ENTRYPOINT runs it) on `bash -c script`, in a fresh container."""
        ctr = self.cmd("from", "--pull-never", self.tag).stdout.strip()
        try:
            return self.cmd(
                "run", "--isolation", "chroot", *opts, ctr, "--",
                "/usr/bin/tini", "--", "bash", "/opt/hot/docker/entrypoint.sh", "bash", "-c", script,
                check=False,
            )  # fmt: skip
        finally:
            self.cmd("rm", ctr, check=False)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    missing = [tool for tool in ("buildah", "debootstrap") if shutil.which(tool) is None]
    if missing or os.geteuid() != 0:
        why = f"needs root and {', '.join(missing) or 'buildah, debootstrap'} (apt-get install buildah debootstrap)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must build the image's layers: {why}")
        pytest.skip(why)
    work = tmp_path_factory.mktemp("image")
    img = Image(work, "localhost/hot-standin")
    rootfs = os.environ.get("HOT_TEST_ROOTFS")  # an existing stand-in rootfs, to skip debootstrap when iterating
    if not rootfs:
        rootfs = str(work / "rootfs")
        boot = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={STANDIN_PACKAGES}", "bookworm", rootfs, MIRROR],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert boot.returncode == 0, boot.stdout[-3000:] + boot.stderr[-3000:]
    ctr = img.cmd("from", "scratch").stdout.strip()
    img.cmd("copy", ctr, rootfs, "/")
    img.cmd("commit", "--quiet", ctr, "localhost/hot-system-standin")
    img.cmd("rm", ctr)
    (work / "Containerfile").write_text(standin_dockerfile(DOCKERFILE.read_text()))
    img.cmd(
        "bud", "--isolation", "chroot", "--pull-never", "--layers=false",
        "--build-arg", "SYSTEM=localhost/hot-system-standin", "--target", "hot",
        "--ignorefile", str(ROOT / "docker" / "Dockerfile.dockerignore"),
        "-f", str(work / "Containerfile"), "-t", img.tag, str(ROOT),
    )  # fmt: skip
    yield img
    img.cmd("rm", "--all", check=False)
    img.cmd("rmi", "--all", "--force", check=False)
    shutil.rmtree(work, ignore_errors=True)


def test_image_layout(image):
    out = image.run(
        "readlink /opt/hot/.snakemake; id -un; echo $HOME;"
        "test -r /opt/hot/docker/entrypoint.sh && test -x /opt/venv/bin/python && echo ok"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["results/.snakemake", "hot", "/home/hot", "ok"]
    # the volumes' directories as stored in the image (what Docker copies into an anonymous volume): like /tmp
    ctr = image.cmd("from", "--pull-never", image.tag).stdout.strip()
    try:
        fs = Path(image.cmd("mount", ctr).stdout.strip())
        for volume in ("results", "paper_tables"):
            assert stat.S_IMODE((fs / "opt" / "hot" / volume).stat().st_mode) == 0o1777, volume
    finally:
        image.cmd("rm", ctr, check=False)
    config = json.loads(image.cmd("inspect", "--type", "image", image.tag).stdout)["OCIv1"]["config"]
    assert set(config["Volumes"]) == {"/opt/hot/results", "/opt/hot/paper_tables"}
    assert config["User"] == "1000:1000" and config["WorkingDir"] == "/opt/hot"
    assert config["Entrypoint"][:2] == ["/usr/bin/tini", "--"] and config["Cmd"] == ["snakemake", "--cores", "4"]


def test_arbitrary_uid_with_a_results_volume(image, tmp_path):
    """`docker run --user 4321:4321 -v results:/opt/hot/results` (and Apptainer: another start directory)."""
    results = tmp_path / "results"
    results.mkdir()
    os.chown(results, OTHER_UID, OTHER_UID)
    out = image.run(
        'set -e; pwd; echo "$HOME"; touch .snakemake/probe "$HOME/.cache/probe";'
        "python -c 'import getpass, sys; print(getpass.getuser(), sys.prefix)';"
        "touch /opt/venv/lib/python3.11/site-packages/probe /opt/hot/kernels/probe; echo writable",
        "--user", f"{OTHER_UID}:{OTHER_UID}", "--volume", f"{results}:/opt/hot/results", "--workingdir", "/tmp",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "/opt/hot"
    assert lines[1] == f"/tmp/hot-home-{OTHER_UID}"
    assert lines[2] == f"uid{OTHER_UID} /opt/venv"
    assert lines[3] == "writable"  # the kernels rule may reinstall the extension into the venv
    assert (results / ".snakemake" / "probe").is_file()


def test_arbitrary_uid_with_an_anonymous_volume(image):
    out = image.run("touch .snakemake/probe && echo ok", "--user", f"{OTHER_UID}:{OTHER_UID}")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
