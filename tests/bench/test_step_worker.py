"""A step variant in a fresh process, on the CPU with a one-block ViT and the fake backend: the result crosses the
process boundary with every setting passed through, and a worker that fails, crashes or hangs becomes an error
entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hot.bench import step, step_worker
from hot.config import HOTConfig

TINY_VIT = {"img_size": 32, "depth": 1, "embed_dim": 64, "num_heads": 2}  # 2×2 patches, 5 tokens
HOT = HOTConfig(backend="fake", abc=True, lqs=True, seed=3)


def test_a_fresh_process_measures_what_the_same_variant_measures_in_process() -> None:
    fresh = step_worker.measure_in_fresh_process(
        step_worker.worker_request("hot", 2, 2, 1, 7, HOT, device="cpu", model_kwargs=TINY_VIT)
    )
    assert "error" not in fresh, fresh
    here = step.step_variant("hot", 2, 2, 1, 7, HOT, device="cpu", model_kwargs=TINY_VIT)
    # Same seed, batch, steps and HOT config on the other side: the same weights, data and codes give the same loss
    # (a different seed, batch or step count would not).
    assert fresh["final_loss"] == pytest.approx(here["final_loss"], rel=1e-6)
    assert len(fresh["step_ms_all"]) == 2 and fresh["step_ms"] > 0 and fresh["compiled"] is False
    # patch embedding, qkv, proj, fc1, fc2, head
    assert fresh["hot"] == {
        "config": HOT.to_dict(),
        "converted_layers": 6,
        "converted_by_type": {"HOTConv2d": 1, "HOTLinear": 5},
        "head_converted": True,
        "recomputed_inputs": 0,
    }
    assert fresh["lqs"]["none"] == 1 and fresh["lqs"]["per_token"] + fresh["lqs"]["per_tensor"] == 5


def test_hot_nohead_leaves_the_classifier_exact() -> None:
    r = step.step_variant("hot_nohead", 2, 1, 0, 0, HOT, device="cpu", model_kwargs=TINY_VIT)
    assert r["hot"]["converted_layers"] == 5 and r["hot"]["head_converted"] is False
    assert r["hot"]["converted_by_type"] == {"HOTConv2d": 1, "HOTLinear": 4}


def test_hot_recompute_pairs_qkv_proj_fc1_and_fc2_of_every_block_with_their_sources() -> None:
    r = step.step_variant("hot_recompute", 2, 1, 0, 0, HOT, device="cpu", model_kwargs=TINY_VIT)
    assert r["hot"]["config"]["recompute_inputs"] == "all"
    assert r["hot"]["recomputed_inputs"] == 4 * TINY_VIT["depth"] and r["hot"]["converted_layers"] == 6


def test_the_worker_records_its_own_error_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    request = step_worker.worker_request("hot", 2, 1, 0, 0, None, device="cpu", model_kwargs=TINY_VIT)
    request["hot"] = {"backend": "fake", "nonsense": 1}
    (tmp_path / "q.json").write_text(json.dumps(request))
    code = step_worker.main([str(tmp_path / "q.json"), str(out)])
    assert code == 1
    assert json.loads(out.read_text()) == {
        "error": "ValueError: unknown HOTConfig key(s) ['nonsense']; known keys: " + str(sorted(HOTConfig().to_dict()))
    }


def test_a_worker_that_dies_without_a_result_is_an_error_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(step_worker, "WORKER_MODULE", "hot.bench.no_such_worker")
    r = step_worker.measure_in_fresh_process(step_worker.worker_request("bf16", 2, 1, 0, 0, None, device="cpu"))
    assert r["exit_code"] == 1
    assert r["error"].startswith("step worker for 'bf16' exited with code 1 without a result; its stderr ended:")
    assert "No module named hot.bench.no_such_worker" in r["error"]


def test_a_worker_past_its_timeout_is_killed_and_an_error_entry() -> None:
    r = step_worker.measure_in_fresh_process(
        step_worker.worker_request("bf16", 2, 1, 0, 0, None, device="cpu"), timeout_s=0.5
    )
    assert r["error"].startswith("step worker for 'bf16' timed out after 0.5 s without a result")
    assert r["exit_code"] == -9  # SIGKILL, sent to its process group
