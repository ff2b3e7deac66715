"""hot.bench.gpu_share: N concurrent hot train processes, timed as a group (here on the CPU, two batches each)."""

import json

import pytest

from hot.bench import gpu_share
from hot.train import sources


@pytest.mark.skipif(not sources.SYSTEM_DIR.is_dir(), reason="dataset-fashion-mnist is not installed")
def test_groups_of_concurrent_runs_are_timed_per_method_and_count(tmp_path):
    out = tmp_path / "share.json"
    sets = ["device=cpu", "max_train_batches=2", "test_subset=16", "data_dir=data", "hot.backend=fake"]
    gpu_share.main([str(out), "1", "2", *(a for s in sets for a in ("--set", s))])
    result = json.loads(out.read_text())
    groups = {(g["method"], g["processes"]): g for g in result["groups"]}
    assert set(groups) == {("fp", 1), ("fp", 2), ("hot", 1), ("hot", 2)}
    for (_, n), group in groups.items():
        assert len(group["runs"]) == n and all(r["step_ms"] > 0 for r in group["runs"])
        assert group["runs_per_hour"] == pytest.approx(3600 * n / group["group_wall_s"])
    assert result["environment"]["torch"]
