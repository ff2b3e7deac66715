import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from hot.train import loop
from hot.train.distributed import Distributed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_torchrun_two_processes_gloo(tmp_path):
    out = tmp_path / "ddp"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={_free_port()}",
        "-m", "hot.cli", "train", "--out", str(out),
        "--set", "dataset=synthetic", "--set", "epochs=1", "--set", "batch_size=16", "--set", "max_train_batches=2",
        "--set", "train_subset=64", "--set", "test_subset=30", "--set", "method=hot_abc_lqs", "--set", "device=cpu",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    assert metrics["epochs"][0]["train_batches"] == 2  # per process: 8 samples each
    assert metrics["test_samples"] == 30 and 0 <= metrics["final_top1"] <= 100
    assert metrics["lqs"] == json.loads((out / "lqs.json").read_text())


# Every process trains the same tiny run but for the rounding seed, which is its rank.
_SEEDS_BY_RANK = """
import json, os, sys
from hot.train import TrainConfig, train
values = {**json.loads(sys.argv[2]), "hot": {"seed": int(os.environ["RANK"])}}
train(TrainConfig.from_dict(values), sys.argv[1])
"""


@pytest.mark.slow
def test_ranks_that_disagree_on_the_hot_config_fail_at_start_naming_the_field(tmp_path, tiny):
    worker = tmp_path / "worker.py"
    worker.write_text(_SEEDS_BY_RANK)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(worker),
               str(tmp_path / "out"), json.dumps(tiny)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert result.returncode != 0
    assert "the processes disagree on the HOT config: hot.seed is 0 on rank 0 but 1 on rank 1" in result.stderr
    assert not (tmp_path / "out" / "checkpoint.pt").exists()


def test_more_processes_than_gpus_fail_naming_both_numbers(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    run = loop._Run.__new__(loop._Run)
    run.config, run.place = loop.TrainConfig(device="auto"), Distributed(rank=1, world=2, local_rank=1, local_world=2)
    with pytest.raises(ValueError, match=r"^2 processes on this machine need a GPU each, but torch sees 1 GPU\(s\)"):
        run._device()
