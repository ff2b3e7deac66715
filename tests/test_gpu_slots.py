"""hot slots (hot.gpu_slots) with the machine's GPUs faked: a fake nvidia-smi on PATH, or CUDA_VISIBLE_DEVICES."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hot.gpu_slots import (
    SlotError,
    _try_lock,
    acquire,
    jobs_per_gpu,
    scheduler_devices,
    try_acquire,
    visible_devices,
)

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = str(Path(sys.executable).parent)


def _fake_bin(tmp_path: Path, gpus: int) -> Path:
    """A directory holding an nvidia-smi that lists ``gpus`` GPUs, as the real one does with ``-L``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    lines = "".join(f"echo 'GPU {i}: Fake GPU (UUID: GPU-{i})'\n" for i in range(gpus))
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n{lines}")
    smi.chmod(0o755)
    return bin_dir


def _env(tmp_path: Path, gpus: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES" and not k.startswith("SLURM_")}
    env["PATH"] = f"{_fake_bin(tmp_path, gpus)}:{VENV_BIN}:{env['PATH']}"
    env["HOT_GPU_SLOTS_DIR"] = str(tmp_path / "locks")
    env.update(extra)
    return env


def _slots(k: int, job: str, *command: str) -> list[str]:
    return [sys.executable, "-m", "hot.cli", "slots", "--gpus", str(k), "--job", job, "--", *command]


def _start(k: int, job: str, env: dict[str, str], script: str) -> subprocess.Popen:
    """A job that writes its CUDA_VISIBLE_DEVICES to ``job``.cvd, then runs ``script`` (sh)."""
    record = Path(env["HOT_GPU_SLOTS_DIR"]).parent / f"{job}.cvd"
    command = _slots(k, job, "sh", "-c", f'echo "$CUDA_VISIBLE_DEVICES" > {record}; {script}')
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists() or not path.read_text().endswith("\n"):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return path.read_text().strip()


def test_visible_devices(tmp_path, monkeypatch):
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "3,5"}) == ["3", "5"]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []
    monkeypatch.setenv("PATH", str(_fake_bin(tmp_path, 2)))
    assert visible_devices({}) == ["0", "1"]
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no nvidia-smi: no GPU
    assert visible_devices({}) == []


def test_two_k1_jobs_get_different_devices(tmp_path):
    first, first_fds = acquire(1, ["0", "1"], tmp_path, "a")
    second, second_fds = acquire(1, ["0", "1"], tmp_path, "b")
    assert sorted(first + second) == ["0", "1"]
    for fd in first_fds + second_fds:
        os.close(fd)


def test_concurrent_cli_jobs_get_different_devices(tmp_path):
    env = _env(tmp_path, 2)
    jobs = [_start(1, name, env, "sleep 1") for name in ("a", "b")]
    assert [job.wait(timeout=60) for job in jobs] == [0, 0]
    assert sorted(_wait_for(tmp_path / f"{name}.cvd") for name in ("a", "b")) == ["0", "1"]


def test_k1_waits_for_a_k2_job_that_holds_both(tmp_path):
    env = _env(tmp_path, 2)
    release = tmp_path / "release"
    big = _start(2, "big", env, f"while [ ! -e {release} ]; do sleep 0.1; done")
    assert _wait_for(tmp_path / "big.cvd") == "0,1"
    small = _start(1, "small", env, "true")
    assert small.stderr.readline() == "hot slots: job small waits for 1 of 2 GPUs\n"
    time.sleep(1)
    assert small.poll() is None and not (tmp_path / "small.cvd").exists()  # still waiting, not running
    release.touch()
    assert big.wait(timeout=30) == 0
    assert small.wait(timeout=30) == 0
    assert _wait_for(tmp_path / "small.cvd") in ("0", "1")


def test_more_gpus_than_exist_fails_at_once(tmp_path):
    with pytest.raises(SlotError, match="job j needs 3 GPUs but only 2 are visible"):
        acquire(3, ["0", "1"], tmp_path, "j")
    result = subprocess.run(_slots(3, "run/x", "true"), env=_env(tmp_path, 2), capture_output=True, text=True,
                            timeout=30, check=False)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip() == "hot slots: job run/x needs 3 GPUs but only 2 are visible"


def test_killed_holder_frees_its_slot(tmp_path):
    env = _env(tmp_path, 1)
    holder = _start(1, "holder", env, "exec sleep 60")
    assert _wait_for(tmp_path / "holder.cvd") == "0"
    assert _try_lock(tmp_path / "locks" / "gpu0.lock", "probe") is None  # held
    os.kill(holder.pid, signal.SIGKILL)  # the exec'd command itself holds the lock
    holder.wait(timeout=30)
    chosen, fds = acquire(1, ["0"], tmp_path / "locks", "next", poll_s=0.1)
    assert chosen == ["0"]
    os.close(fds[0])


def test_devices_map_through_cuda_visible_devices(tmp_path):
    env = _env(tmp_path, 0, CUDA_VISIBLE_DEVICES="3,5")
    jobs = [_start(1, name, env, "sleep 1") for name in ("a", "b")]
    assert [job.wait(timeout=60) for job in jobs] == [0, 0]
    assert sorted(_wait_for(tmp_path / f"{name}.cvd") for name in ("a", "b")) == ["3", "5"]
    both = _start(2, "both", env, "true")
    assert both.wait(timeout=30) == 0 and _wait_for(tmp_path / "both.cvd") == "3,5"


def test_slurm_devices_are_used_as_given(tmp_path):
    assert scheduler_devices({"CUDA_VISIBLE_DEVICES": "0"}) is None  # no scheduler: allocate
    assert scheduler_devices({"SLURM_JOB_ID": "7"}) is None  # a SLURM job without GPUs assigned
    assert scheduler_devices({"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "4,6"}) == 2
    assert scheduler_devices({"SLURM_JOB_ID": "7", "SLURM_GPUS_ON_NODE": "1"}) == 1
    env = _env(tmp_path, 4, SLURM_JOB_ID="7", CUDA_VISIBLE_DEVICES="2")
    job = _start(1, "slurm", env, "true")
    assert job.wait(timeout=30) == 0 and _wait_for(tmp_path / "slurm.cvd") == "2"
    assert not (tmp_path / "locks").exists()  # nothing allocated
    result = subprocess.run(_slots(2, "slurm", "true"), env=env, capture_output=True, text=True, timeout=30,
                            check=False)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip() == "hot slots: job slurm needs 2 GPUs but SLURM gave it 1"


def test_no_gpus_needed_or_none_present_runs_unchanged(tmp_path):
    for k, gpus in ((0, 2), (1, 0)):
        env = _env(tmp_path, gpus)
        job = _start(k, f"k{k}", env, "true")
        assert job.wait(timeout=30) == 0 and _wait_for(tmp_path / f"k{k}.cvd") == ""
    assert not (tmp_path / "locks").exists()


def _close(*held: tuple[list[str], list[int]] | None) -> None:
    for found in held:
        assert found is not None
        for fd in found[1]:
            os.close(fd)


def test_a_shared_gpu_takes_at_most_its_share_of_jobs_spread_over_the_devices(tmp_path):
    jobs = [try_acquire(1, ["0", "1"], tmp_path, name, per_gpu=2) for name in "abcd"]
    assert [devices for devices, _ in jobs] == [["0"], ["1"], ["0"], ["1"]]  # each device's first slot first
    assert try_acquire(1, ["0", "1"], tmp_path, "e", per_gpu=2) is None  # 2 jobs on each: no more
    assert try_acquire(2, ["0", "1"], tmp_path, "f", per_gpu=2) is None
    _close(jobs[2])  # a slot of device 0 frees
    found = try_acquire(1, ["0", "1"], tmp_path, "g", per_gpu=2)
    assert found is not None and found[0] == ["0"]
    _close(found, *jobs[:2], jobs[3])


def test_a_job_that_needs_a_gpu_to_itself_and_sharing_jobs_exclude_each_other(tmp_path):
    shared = try_acquire(1, ["0"], tmp_path, "shared", per_gpu=4)
    assert shared is not None
    assert try_acquire(1, ["0"], tmp_path, "alone") is None  # the kernel tests wait for the sharing jobs
    _close(shared)
    alone = try_acquire(1, ["0"], tmp_path, "alone")
    assert alone is not None and alone[0] == ["0"]
    assert try_acquire(1, ["0"], tmp_path, "shared", per_gpu=4) is None  # and they wait for it
    _close(alone)
    both = try_acquire(2, ["0", "1"], tmp_path, "two", per_gpu=4)  # one slot on each of two devices
    assert both is not None and both[0] == ["0", "1"]
    _close(both)


def test_sharing_jobs_let_a_job_waiting_for_a_gpu_to_itself_go_first(tmp_path):
    import threading

    shared = try_acquire(1, ["0"], tmp_path, "shared", per_gpu=2)
    got: list = []
    alone = threading.Thread(target=lambda: got.append(acquire(1, ["0"], tmp_path, "alone", poll_s=0.05)))
    alone.start()
    deadline = time.monotonic() + 30
    while (probe := _try_lock(tmp_path / "exclusive-waiting.lock", "probe", shared=True)) is not None:  # it waits
        os.close(probe)
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert try_acquire(1, ["0"], tmp_path, "later", per_gpu=2) is None  # a free slot, but the waiter goes first
    _close(shared)
    alone.join(timeout=30)
    assert got and got[0][0] == ["0"]
    assert try_acquire(1, ["0"], tmp_path, "later", per_gpu=2) is None  # now it runs
    _close(got[0])
    _close(try_acquire(1, ["0"], tmp_path, "later", per_gpu=2))


def test_the_share_comes_from_the_option_or_the_environment(tmp_path):
    assert jobs_per_gpu({}) == 1 and jobs_per_gpu({"HOT_GPU_JOBS_PER_GPU": "3"}) == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(SlotError, match=f"HOT_GPU_JOBS_PER_GPU must be a whole number >= 1, got '{bad}'"):
            jobs_per_gpu({"HOT_GPU_JOBS_PER_GPU": bad})
    # two jobs on one GPU at once: each starts, then waits until the other has started
    env = _env(tmp_path, 1, HOT_GPU_JOBS_PER_GPU="2")
    wait = "while [ ! -e {other} ]; do sleep 0.1; done"
    jobs = [
        _start(1, name, env, f"touch {tmp_path}/{name}.up; " + wait.format(other=f"{tmp_path}/{other}.up"))
        for name, other in (("a", "b"), ("b", "a"))
    ]
    assert [job.wait(timeout=60) for job in jobs] == [0, 0]
    assert [_wait_for(tmp_path / f"{name}.cvd") for name in "ab"] == ["0", "0"]
    result = subprocess.run([*_slots(1, "x", "true")[:-2], "--jobs-per-gpu", "0", "--", "true"], env=env,
                            capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert result.returncode == 1 and result.stderr.strip() == "hot slots: job x: --jobs-per-gpu must be >= 1, got 0"


def _fake_python(tmp_path: Path) -> Path:
    """A ``python`` that records how the train script starts it (hot itself runs on the venv's python)."""
    bin_dir = _fake_bin(tmp_path, 2)
    fake = bin_dir / "python"
    fake.write_text(f'#!/bin/sh\necho "$CUDA_VISIBLE_DEVICES $*" > {tmp_path}/launch\n')
    fake.chmod(0o755)
    return fake


# The workflow's train rule, driven as Snakemake's script: directive runs workflow/scripts/train.py (its `snakemake`
# object stood in for), on ``gpus`` GPUs; ``python`` is the interpreter torchrun is started with.
_TRAIN_RULE = """
import json, runpy, sys
from types import SimpleNamespace
run, settings, gpus, python = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
class Files(dict):
    __getattr__ = dict.__getitem__
with open(run + "/data.json", "w") as f:
    json.dump({"status": "ready"}, f)
smk = SimpleNamespace(
    input=Files(data=run + "/data.json"), output=Files(metrics=run + "/metrics.json", model=run + "/model.pt"),
    params=SimpleNamespace(settings=settings, backend="fake", gpus=gpus, jobs_per_gpu=1, steps_alone=False),
    log=[run + ".log"], threads=1,
)
sys.executable = python
runpy.run_path("workflow/scripts/train.py", init_globals={"snakemake": smk}, run_name="__main__")
"""


def _train_rule(tmp_path: Path, env: dict[str, str], settings: str, gpus: int, python: str = sys.executable):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    result = subprocess.run([sys.executable, "-c", _TRAIN_RULE, str(run), settings, str(gpus), python], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    return result, run, (tmp_path / "run.log").read_text()


def test_train_rule_runs_torchrun_over_exactly_its_slots(tmp_path):
    fake = _fake_python(tmp_path)
    env = _env(tmp_path, 2)
    result, _, log = _train_rule(tmp_path, env, "{}", 2, str(fake))
    assert result.returncode == 0, log
    cvd, *argv = (tmp_path / "launch").read_text().split()
    assert cvd == "0,1"
    assert argv[:4] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    result, run, log = _train_rule(tmp_path, env, "{}", 8, str(fake))
    assert result.returncode == 1
    assert f"job {run} needs 8 GPUs but only 2 are visible" in log


@pytest.mark.slow
def test_train_rule_two_processes_on_cpu(tmp_path):
    """The torchrun branch for real: two gloo processes on CPU, on the two faked slots."""
    env = _env(tmp_path, 2)
    settings = {"dataset": "synthetic", "epochs": 1, "batch_size": 16, "max_train_batches": 2, "train_subset": 64,
                "test_subset": 30, "method": "hot_abc_lqs", "device": "cpu"}  # fmt: skip
    result, run, log = _train_rule(tmp_path, env, json.dumps(settings), 2)
    assert result.returncode == 0, log[-3000:]
    assert "CUDA_VISIBLE_DEVICES=0,1" in log
    assert json.loads((run / "metrics.json").read_text())["world_size"] == 2


def test_sharing_jobs_with_steps_alone_compute_one_at_a_time(tmp_path):
    # Two jobs share one GPU; each holds the steps lock for 0.6 s. Their locked intervals must not overlap, while
    # both hold a slot of the GPU at once (each waits until the other has started before locking).
    env = _env(tmp_path, 1, HOT_GPU_JOBS_PER_GPU="2")
    code = (
        "import os, pathlib, sys, time\n"
        "from hot.gpu_slots import steps_alone\n"
        "me, other = sys.argv[1], sys.argv[2]\n"
        "d = pathlib.Path(sys.argv[3])\n"
        "(d / (me + '.up')).touch()\n"
        "while not (d / (other + '.up')).exists(): time.sleep(0.05)\n"
        "with steps_alone() as held:\n"
        "    start = time.monotonic(); time.sleep(0.6); end = time.monotonic()\n"
        "(d / (me + '.span')).write_text(f\"{held} {start} {end} {os.environ['HOT_GPU_STEPS_LOCK']}\\n\")\n"
    )
    jobs = []
    for me, other in (("a", "b"), ("b", "a")):
        argv = _slots(1, me, sys.executable, "-c", code, me, other, str(tmp_path))
        argv[6:6] = ["--steps-alone"]  # after --gpus 1
        jobs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    assert [job.wait(timeout=60) for job in jobs] == [0, 0], [job.stderr.read() for job in jobs]
    spans = {name: (tmp_path / f"{name}.span").read_text().split() for name in "ab"}
    assert all(s[0] == "True" and s[3] == str(tmp_path / "locks" / "gpu0.steps.lock") for s in spans.values())
    (a0, a1), (b0, b1) = [(float(spans[n][1]), float(spans[n][2])) for n in "ab"]
    assert a1 <= b0 or b1 <= a0, spans


def test_steps_alone_is_nothing_without_the_variable_or_a_gpu_to_share(tmp_path):
    from hot.gpu_slots import slot_environment, steps_alone

    with steps_alone({}) as held:
        assert held is False
    env, locks = {"CUDA_VISIBLE_DEVICES": "0,1"}, tmp_path / "locks"
    own, fds = slot_environment(1, "own", locks, env, per_gpu=1, steps_alone=True)
    assert "HOT_GPU_STEPS_LOCK" not in own  # a GPU of its own: nothing to wait for
    shared, more = slot_environment(1, "shared", locks, env, per_gpu=3, steps_alone=True)
    assert shared["CUDA_VISIBLE_DEVICES"] == "1"  # device 0 is the first job's
    assert shared["HOT_GPU_STEPS_LOCK"] == str(locks / "gpu1.steps.lock")
    _close((["x"], fds + more))
