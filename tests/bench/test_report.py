"""Byte counts, bandwidth fractions and the verdicts against the benchmark's targets, by hand."""

from __future__ import annotations

import pytest
import torch

from hot.bench import report, timing


def test_bytes_bandwidth_and_targets_by_hand() -> None:
    codes, scale = torch.zeros(4, 4, dtype=torch.int8), torch.zeros(4, 1)
    view = torch.zeros(3, 5, dtype=torch.bfloat16).t()
    assert timing.tensor_bytes(codes, scale, view) == 16 + 16 + 30
    b = timing.bandwidth(3_000_000, 1.0, 4000.0, report.BANDWIDTH_TARGET)  # 3 MB in 1 us = 3000 GB/s, 0.75 of 4000
    assert b["gbps"] == pytest.approx(3000.0) and b["fraction_of_copy"] == pytest.approx(0.75)
    assert b["target"] == 0.8 and b["met"] is False
    assert timing.bandwidth(3_200_000, 1.0, 4000.0, report.BANDWIDTH_TARGET)["met"] is True
    assert report.layer_verdict("proj", 100.0, 80.0) == {"speedup_vs_bf16": 1.25, "target": 1.2, "target_met": True}
    assert report.layer_verdict("qkv", 100.0, 80.0)["target_met"] is False
    assert report.meets(None, 1.0) is None and report.meets(0.6, 0.7, higher_is_better=False) is True


def test_step_summary_ratios_and_targets() -> None:
    variants = {
        "bf16": {"step_ms": 125.0, "peak_memory_gib": 12.0},
        "bf16_compile": {"step_ms": 100.0, "peak_memory_gib": 10.0},
        "torchao_float8": {"step_ms": 85.0, "peak_memory_gib": 9.0},
        "hot": {"step_ms": 80.0, "peak_memory_gib": 6.0},
        "hot_compile": {"error": "RuntimeError: no"},
    }
    s = report.step_summary(variants)
    assert s["baseline"] == "bf16_compile"
    assert s["ratios"]["bf16"] == {"speedup": 0.8, "memory_ratio": 1.2}
    assert s["ratios"]["hot"]["speedup"] == pytest.approx(1.25)
    assert s["ratios"]["hot"]["memory_ratio"] == pytest.approx(0.6)
    assert "hot_compile" not in s["ratios"] and "hot_compile" not in s["targets"]
    assert s["targets"]["hot"] == {
        "speedup_ge_1.15": True,
        "faster_than_torchao_float8": True,
        "memory_ratio_le_0.7": True,
    }
    slow = report.step_summary({**variants, "hot": {"step_ms": 90.0, "peak_memory_gib": 7.5}})
    assert slow["targets"]["hot"] == {
        "speedup_ge_1.15": False,
        "faster_than_torchao_float8": False,
        "memory_ratio_le_0.7": False,
    }
    skipped = report.step_summary({**variants, "torchao_float8": {"skipped": "torchao is not importable"}})
    assert skipped["targets"]["hot"]["faster_than_torchao_float8"] is None
