import json
import os
import socket
import subprocess
import sys

import pytest


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
