"""docker/entrypoint.sh run for real under bash, with a temporary directory standing in for the image's /opt/hot
(HOT_WORKDIR): a `.snakemake` link into a results "volume", an unwritable HOME, no passwd entry for the uid, a start
in another directory (Apptainer keeps the host's), and a real Snakemake run through it. As root the script runs as
uid 4321 (setpriv), as in `docker run --user 4321:4321`; otherwise as the (equally unprivileged) current user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
OTHER_UID = 4321
AS_ROOT = os.geteuid() == 0


@pytest.fixture
def image(tmp_path_factory):
    """A fake image tree: opt/hot (the repository, with .snakemake -> results/.snakemake), opt/hot/results (the
    volume, owned by the running uid), home/hot (the image's HOME, not writable by the running uid), tmp."""
    if AS_ROOT and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv to drop to another uid")
    base = Path(tempfile.mkdtemp(prefix="hot-entrypoint-"))  # not under pytest's 0700 root-only directory
    try:
        base.chmod(0o755)
        work = base / "opt" / "hot"
        (work / "results").mkdir(parents=True)
        (work / "paper_tables").mkdir()
        (work / ".snakemake").symlink_to("results/.snakemake")
        home = base / "home" / "hot"
        home.mkdir(parents=True)
        (base / "tmp").mkdir(mode=0o1777)
        (base / "tmp").chmod(0o1777)
        (base / "host-dir").mkdir()
        # A copy other uids can read: the checkout may lie under a directory only its owner can enter (mktemp -d).
        shutil.copy2(ENTRYPOINT, base / "entrypoint.sh")
        (base / "entrypoint.sh").chmod(0o755)
        for p in (base / "opt", work):
            p.chmod(0o755)
        if AS_ROOT:
            os.chown(work / "results", OTHER_UID, OTHER_UID)
        else:
            home.chmod(0o555)
        yield base
    finally:
        for p in base.rglob("*"):  # an unwritable HOME would stop rmtree as non-root
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def run(image: Path, *cmd: str, env: dict[str, str] | None = None, cwd: Path | None = None, other_uid: bool = True):
    """The entrypoint as `docker run --user 4321:4321` would start it: a bare environment with the image's ENV
    (other_uid=False: as the current user, for programs that only it can execute)."""
    base_env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(image / "home" / "hot"),
        "TMPDIR": str(image / "tmp"),
        "HOT_WORKDIR": str(image / "opt" / "hot"),
    }
    prefix = ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups"]
    if not (AS_ROOT and other_uid):
        prefix = []
    return subprocess.run(
        [*prefix, "bash", str(image / "entrypoint.sh"), *cmd],
        env={**base_env, **(env or {})},
        cwd=cwd or image / "host-dir",
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runs_in_the_workdir_with_snakemake_metadata_on_the_volume(image):
    out = run(image, "bash", "-c", 'pwd; echo "$HOME"; touch .snakemake/probe "$HOME/.cache/probe"; echo "$USER"')
    assert out.returncode == 0, out.stderr
    pwd, home, user = out.stdout.split()
    # Apptainer starts in the host's directory: the entrypoint still runs in the repository, where the binds are
    assert pwd == str(image / "opt" / "hot")
    assert (image / "opt" / "hot" / "results" / ".snakemake" / "probe").is_file()
    # the image's HOME is not writable for this uid: HOME moved to a private writable directory
    assert home.startswith(str(image / "tmp")) and Path(home, ".cache", "probe").is_file()
    assert user == ("uid4321" if AS_ROOT else user)  # set although the uid has no passwd entry


def test_getpass_works_without_a_passwd_entry(image):
    """torch derives cache paths from getpass.getuser(), which raises for a uid missing from /etc/passwd."""
    # this environment's interpreter may sit in a directory only its owner can enter: the system's python3
    python = "/usr/bin/python3" if AS_ROOT else sys.executable
    if not os.access(python, os.X_OK):
        pytest.skip(f"no {python} that uid {OTHER_UID} can run")
    out = run(image, python, "-c", "import getpass; print(getpass.getuser())")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_unwritable_cache_variables_are_dropped(image):
    out = run(
        image,
        "bash",
        "-c",
        'echo "${XDG_CACHE_HOME-unset} ${TORCH_HOME-unset}"',
        env={"XDG_CACHE_HOME": str(image / "home" / "hot" / ".cache"), "TORCH_HOME": str(image / "tmp" / "t")},
    )
    assert out.returncode == 0, out.stderr
    xdg, torch_home = out.stdout.split()
    assert xdg == "unset" and torch_home == str(image / "tmp" / "t")


def test_unwritable_results_volume_stops_snakemake_in_one_line(image):
    results = image / "opt" / "hot" / "results"
    if AS_ROOT:
        os.chown(results, 0, 0)
    results.chmod(0o755)
    out = run(image, "snakemake", "--cores", "1")
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "not writable by uid" in out.stderr, out.stderr
    assert "-v" in out.stderr and "--bind" in out.stderr
    # other commands (a shell to look around) still start
    assert run(image, "true").returncode == 0


def test_no_arguments_run_the_default_snakemake_command_from_the_venv(image):
    venv = image / "opt" / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "snakemake"):
        fake = venv / "bin" / name
        fake.write_text(f'#!/bin/sh\necho "{name} $*"\n')
        fake.chmod(0o755)
    venv.parent.chmod(0o755)
    out = run(image, env={"VIRTUAL_ENV": str(venv)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "snakemake --cores 4"


def test_empty_cuda_visible_devices_is_reported(image):
    out = run(image, "true", env={"CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0 and "CUDA_VISIBLE_DEVICES is set but empty" in out.stderr
    assert "CUDA_VISIBLE_DEVICES" not in run(image, "true", env={"CUDA_VISIBLE_DEVICES": "0"}).stderr


def test_missing_workdir_fails_in_one_line(image):
    out = run(image, "true", env={"HOT_WORKDIR": str(image / "nowhere")})
    assert out.returncode == 2 and "HOT_WORKDIR" in out.stderr


def test_snakemake_through_the_entrypoint_keeps_its_metadata_on_the_volume(image):
    """A real Snakemake run through the entrypoint: .snakemake/ (a link, as in the image) resolves into the volume,
    and a second run finds the first one's output there and has nothing to do. (As the current user: this
    environment's interpreter may not be executable by another uid; the uid side is tested above and, in a built
    image, by tests/infra/test_image_build.py.)"""
    snakemake = Path(sys.executable).parent / "snakemake"
    if not snakemake.exists():
        pytest.skip("snakemake is not installed in this environment")
    work = image / "opt" / "hot"
    (work / "Snakefile").write_text('rule a:\n    output: "results/a.txt"\n    shell: "echo hi > {output}"\n')
    out = run(image, str(snakemake), "--cores", "1", "--quiet", other_uid=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (work / "results" / "a.txt").read_text() == "hi\n"
    meta = work / "results" / ".snakemake"
    assert (meta / "metadata").is_dir() and any((meta / "log").glob("*.snakemake.log"))
    assert (work / ".snakemake").is_symlink()  # not replaced by a directory in the (read-only) image
    again = run(image, str(snakemake), "--cores", "1", "--dry-run", other_uid=False)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
