"""Byte counts, bandwidth fractions, the verdicts against the benchmark's targets and the comparison of two runs,
by hand."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert report.layer_verdict("proj", 100.0, 80.0) == {"speedup_vs_bf16": 1.25, "target": 1.0, "target_met": True}
    assert report.layer_verdict("qkv", 100.0, 101.0)["target_met"] is False
    assert report.layer_verdict("fc1", 100.0, 80.0) | {"speedup_vs_bf16": 0} == {
        "speedup_vs_bf16": 0,
        "target": 1.0,
        "target_met": True,
        "stretch": 1.3,
        "stretch_met": False,
    }
    assert report.meets(None, 1.0) is None and report.meets(0.6, 0.7, higher_is_better=False) is True


def test_step_spread_marks_a_jittery_variant_unsteady() -> None:
    steady = [55.4] * 18 + [56.6, 55.5]
    jittery = [71.6, 79.2, 89.2, 81.3, 73.3, 72.5, 76.7, 85.1, 80.2, 86.8, 69.2, 78.3, 69.3, 64.9, 64.9, 65.7]
    assert report.step_spread(steady) < report.UNSTEADY_SPREAD < report.step_spread(jittery)
    assert report.step_spread([3.0]) == 0.0
    payload = {"step": {"variants": {
        "hot": {"step_ms": 55.4, "step_ms_min": 55.4, "step_ms_spread": report.step_spread(steady)},
        "hot_compile": {"step_ms": 75.0, "step_ms_min": 64.9, "step_ms_spread": report.step_spread(jittery)},
    }}}  # fmt: skip
    lines = {line.split()[0]: line for line in report.summary_lines(payload) if line.startswith("hot")}
    assert "UNSTEADY" in lines["hot_compile"] and "UNSTEADY" not in lines["hot"]
    assert "64.90" in lines["hot_compile"]


def test_step_summary_ratios_and_targets() -> None:
    variants = {
        "bf16": {"step_ms": 125.0, "peak_memory_gib": 12.0},
        "bf16_compile": {"step_ms": 100.0, "peak_memory_gib": 10.0},
        "torchao_float8": {"step_ms": 85.0, "peak_memory_gib": 9.0},
        "hot": {"step_ms": 80.0, "peak_memory_gib": 6.0},
        "hot_compile": {"error": "RuntimeError: no"},
    }
    s = report.step_summary(variants)
    assert s["baseline"] == "bf16"
    assert s["ratios"]["bf16_compile"] == {"speedup": 1.25, "memory_ratio": pytest.approx(10 / 12)}
    assert s["ratios"]["hot"] == {"speedup": pytest.approx(125 / 80), "memory_ratio": 0.5}
    assert "hot_compile" not in s["ratios"] and "hot_compile" not in s["targets"]
    assert s["targets"]["hot"] == {
        "faster_than_torchao_float8": True,
        "faster_than_bf16": True,
        "memory_vs_bf16_le_0.75": True,
        "stretch_faster_than_bf16_compile": True,
    }
    # 9.0 of bf16's 12.0 GiB is 0.75 exactly: met; 90 ms is slower than torchao's 85 but faster than bf16's 125
    slow = report.step_summary({**variants, "hot": {"step_ms": 90.0, "peak_memory_gib": 9.0}})
    assert slow["targets"]["hot"] == {
        "faster_than_torchao_float8": False,
        "faster_than_bf16": True,
        "memory_vs_bf16_le_0.75": True,
        "stretch_faster_than_bf16_compile": True,
    }
    big = report.step_summary({**variants, "hot": {"step_ms": 130.0, "peak_memory_gib": 9.1}})
    assert big["targets"]["hot"]["faster_than_bf16"] is False
    assert big["targets"]["hot"]["memory_vs_bf16_le_0.75"] is False
    skipped = report.step_summary({**variants, "torchao_float8": {"skipped": "torchao is not importable"}})
    assert skipped["targets"]["hot"]["faster_than_torchao_float8"] is None
    # without bf16 eager: the ratios against the first variant measured, and the targets that need bf16 unknown
    no_bf16 = report.step_summary({k: v for k, v in variants.items() if k != "bf16"})
    assert no_bf16["baseline"] == "bf16_compile" and no_bf16["ratios"]["hot"]["speedup"] == 1.25
    assert no_bf16["targets"]["hot"]["faster_than_bf16"] is None
    assert no_bf16["targets"]["hot"]["memory_vs_bf16_le_0.75"] is None


def _run(date: str, step_ms: dict[str, float], speedups: dict[str, float] | None = None, **settings: object) -> dict:
    variants = {name: {"step_ms": ms, "peak_memory_gib": 8.0} for name, ms in step_ms.items()}
    layers = {name: {"hot_backward_us": 100.0 / s, "speedup_vs_bf16": s} for name, s in (speedups or {}).items()}
    return {
        "status": "measured",
        "environment": {"gpu": "NVIDIA H100 80GB HBM3", "git_commit": "0123456789abcdef", "date": date},
        "settings": {"batch": 128, "steps": 20, **settings},
        "step": {"variants": variants},
        **({"layers": layers} if layers else {}),
    }


def test_result_names_carry_the_gpu_and_the_commit() -> None:
    assert report.gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert report.gpu_slug("NVIDIA GeForce RTX 4090 (laptop)") == "nvidia-geforce-rtx-4090-laptop"
    assert report.gpu_slug(None) == "no-gpu"
    name = report.result_name("NVIDIA H200", "5d903a2b1c0e9f8a", False)
    assert name == "bench_nvidia-h200_5d903a2b1c.json"
    assert report.result_name("NVIDIA H200", "5d903a2b1c0e9f8a", True) == "bench_nvidia-h200_5d903a2b1c-dirty.json"
    assert report.result_name(None, None, None) == "bench_no-gpu_unknown.json"


def test_compare_flags_what_got_worse_by_more_than_ten_percent() -> None:
    old = _run("2026-11-25T10:00:00+00:00", {"bf16": 54.0, "hot": 121.4, "hot_compile": 100.0}, {"qkv": 0.5})
    new = _run("2026-11-26T10:00:00+00:00", {"bf16": 59.5, "hot": 78.0, "torchao_float8": 53.3}, {"qkv": 0.45})
    new["step"]["variants"]["hot"]["peak_memory_gib"] = 8.8  # 1.1× exactly: not more than 10 % worse
    new["layers"]["proj"] = {"error": "RuntimeError: no"}
    rows = {r["metric"]: r for r in report.compare(old, new)}
    bf16 = rows["step.bf16.step_ms"]  # 59.5 / 54 = 1.102: slower by more than 10 %
    assert bf16["old"] == 54.0 and bf16["new"] == 59.5 and bf16["ratio"] == pytest.approx(59.5 / 54.0)
    assert bf16["regressed"] is True
    assert rows["step.hot.step_ms"]["regressed"] is False and rows["step.hot.step_ms"]["ratio"] < 1
    assert rows["step.hot.peak_memory_gib"]["regressed"] is False
    # a speedup is better higher: 0.45 after 0.5 is 1 / 0.9 = 1.11× worse
    assert rows["layers.qkv.speedup_vs_bf16"]["regressed"] is True
    assert rows["layers.qkv.hot_backward_us"]["ratio"] == pytest.approx(0.5 / 0.45)
    assert rows["layers.qkv.hot_backward_us"]["regressed"] is True
    assert rows["step.torchao_float8.step_ms"] == {
        "metric": "step.torchao_float8.step_ms",
        "old": None,
        "new": 53.3,
        "ratio": None,
        "regressed": None,
    }
    assert rows["step.hot_compile.step_ms"]["new"] is None and rows["step.hot_compile.step_ms"]["regressed"] is None
    assert not any(m.startswith("layers.proj") for m in rows)  # an error contributes no metric
    order = [r["metric"] for r in report.compare(old, new)]
    assert order.index("step.torchao_float8.step_ms") < order.index("step.hot_compile.step_ms")  # new first
    improved = report.compare(old, _run("d", {"bf16": 59.0}, {"qkv": 0.46}))
    assert not any(r["regressed"] for r in improved)  # 59 / 54 = 1.093 and 0.5 / 0.46 = 1.087


def test_comparison_lines_show_old_new_ratio_and_the_flags() -> None:
    old = _run("2026-11-25T10:00:00+00:00", {"bf16": 54.0, "hot_compile": 100.0}, gemm="auto")
    new = _run("2026-11-26T10:00:00+00:00", {"bf16": 60.0, "hot": 78.0}, gemm="cublas")
    lines = report.comparison_lines(report.compare(old, new), "kernels/results/old.json", old, new)
    assert lines[0].startswith("compared with kernels/results/old.json (commit 0123456789abcdef, 2026-11-25T10:00")
    assert [line for line in lines if "settings differ" in line] == [
        "  settings differ: gemm 'auto' then, 'cublas' now"
    ]
    row = next(line for line in lines if line.startswith("step.bf16.step_ms "))
    assert row.split() == ["step.bf16.step_ms", "54.00", "60.00", "1.11", "REGRESSED"]
    assert next(line for line in lines if line.startswith("step.hot.step_ms ")).split()[1:] == [
        "-",
        "78.00",
        "-",
        "new",
    ]
    gone = next(line for line in lines if line.startswith("step.hot_compile.step_ms "))
    assert gone.endswith("not measured now")
    new["step"]["variants"]["bf16"]["step_ms_spread"] = 0.32  # a host-bound run's steps wander
    lines = report.comparison_lines(report.compare(old, new), "kernels/results/old.json", old, new)
    row = next(line for line in lines if line.startswith("step.bf16.step_ms "))
    assert row.endswith("REGRESSED (a run UNSTEADY)")
    assert not next(line for line in lines if line.startswith("step.bf16.peak_memory_gib ")).endswith("UNSTEADY)")


def _save(directory: Path, name: str, payload: dict) -> Path:
    path = directory / name
    path.write_text(json.dumps(payload))
    return path


def test_previous_run_is_the_newest_tracked_run_on_the_same_gpu(tmp_path: Path) -> None:
    older = _save(tmp_path, "bench_nvidia-h100-80gb-hbm3_aaaa.json", _run("2026-11-20T00:00:00+00:00", {"hot": 1}))
    newer = _save(tmp_path, "bench_nvidia-h100-80gb-hbm3_bbbb.json", _run("2026-11-25T00:00:00+00:00", {"hot": 2}))
    untracked = _save(tmp_path, "bench_nvidia-h100-80gb-hbm3_cccc.json", _run("2026-11-26T00:00:00+00:00", {}))
    other_gpu = _save(tmp_path, "bench_nvidia-h100-80gb-hbm3-pcie_dddd.json", _run("2026-11-27T00:00:00+00:00", {}))
    broken = tmp_path / "bench_nvidia-h100-80gb-hbm3_eeee.json"
    broken.write_text("{not json")
    current = tmp_path / "bench_nvidia-h100-80gb-hbm3_ffff.json"
    gpu = "NVIDIA H100 80GB HBM3"
    tracked = {p.resolve() for p in (older, newer, other_gpu, broken)}
    path, payload = report.previous_run(tmp_path, gpu, current, tracked)
    assert path == newer and payload["step"]["variants"]["hot"]["step_ms"] == 2
    # without git: the newest other file of that GPU, tracked or not, but not the one this run writes
    assert report.previous_run(tmp_path, gpu, current, None)[0] == untracked
    assert report.previous_run(tmp_path, gpu, untracked, None)[0] == newer
    # a committed run of this very commit is the one to compare with (read before it is overwritten)
    assert report.previous_run(tmp_path, gpu, newer, tracked)[0] == newer
    assert report.previous_run(tmp_path, "NVIDIA H200", current, None) is None
    assert report.previous_run(tmp_path, gpu, current, set()) is None


def test_settings_that_differ_make_runs_incomparable_and_an_unrecorded_hash_is_the_spec() -> None:
    old = {"settings": {"batch": 128, "gemm": "auto"}}  # written before rounding_hash was recorded
    assert (
        report.settings_differences(old, {"settings": {"batch": 128, "gemm": "auto", "rounding_hash": "fmix32x2"}})
        == {}
    )
    new = {"settings": {"batch": 64, "gemm": "auto", "rounding_hash": "fmix32"}}
    assert report.settings_differences(old, new) == {"batch": (128, 64), "rounding_hash": ("fmix32x2", "fmix32")}


def test_the_equivalence_line_puts_each_bound_beside_the_difference_it_bounds() -> None:
    """The H200 run of 28fc0c8 printed '3.41e-03 (< 0.001: True)': the whole run's difference against the first
    steps' bound. Each difference now stands beside its own bound, and a failed check says FAILED."""
    eq = {
        "max_rel_loss_diff": 3.41e-3,
        "max_rel_loss_diff_early": 3.3e-4,
        "tolerance": 1e-3,
        "early_steps": 10,
        "drift_tolerance": 1e-2,
        "steps": 20,
        "passed": True,
        "runs": [{"held_out_accuracy": 0.87}, {"held_out_accuracy": 0.86}],
        "code_mismatches": {"elements": 8},
    }
    line = report.equivalence_line(eq)
    assert line.startswith("equivalence: passed: ")
    assert "3.30e-04 over the first 10 steps (< 0.001) and 3.41e-03 over 20 (< 0.01)" in line
    assert report.equivalence_line({**eq, "passed": False}).startswith("equivalence: FAILED: ")
    assert "over the first 5 steps" in report.equivalence_line({**eq, "steps": 5})
    older = {k: v for k, v in eq.items() if k not in ("max_rel_loss_diff_early", "early_steps", "drift_tolerance")}
    assert "max rel loss diff 3.41e-03 (< 0.001)" in report.equivalence_line(older)  # a run from before the drift bound
