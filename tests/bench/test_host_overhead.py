"""hot.bench.host_overhead: per-layer host time of nn.Linear and of HOT's harness, eager and through the ops."""

import json

import torch

from hot import functional
from hot.bench import host_overhead


def test_the_harness_is_timed_eagerly_and_through_the_ops(tmp_path, monkeypatch):
    monkeypatch.setattr(host_overhead, "ROUNDS", 1)
    monkeypatch.setattr(host_overhead, "STEPS", 3)
    calls = []
    op = functional.layer_forward
    monkeypatch.setattr(functional, "layer_forward", lambda *a: calls.append(1) or op(*a))
    out = tmp_path / "host.json"
    threads = torch.get_num_threads()
    assert host_overhead.main([str(out)]) == 0
    assert torch.get_num_threads() == threads  # measured on one thread, the process's setting left as it was
    results = json.loads(out.read_text())["results"]
    for name in ("fp", "hot_fake"):
        assert results[f"{name}_beyond_linear_eager_us"] == results[f"{name}_eager_us"] - results["nn_linear_us"]
        assert results[f"{name}_ops_us"] > 0 and results[f"{name}_eager_us"] > 0
    # only the "ops" timings went through the custom op: (10 warm-up + 3 timed steps) x 10 layers, for two methods
    assert len(calls) == 2 * 13 * host_overhead.LAYERS
