"""``hot bench`` without a GPU: the status file, argument errors, and a failing section recorded while the rest
runs (the GPU measurements themselves run only on a Hopper machine)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from hot import cli
from hot.bench import report
from hot.bench.step import STEP_VARIANTS
from hot.bench.step_worker import worker_request
from hot.commands import bench
from hot.config import HOTConfig


def test_no_gpu_writes_the_status_json_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "bench" / "hopper.json"
    out.parent.mkdir()
    out.write_text("stale")
    assert cli.main(["bench", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["status"] == "not measured: no GPU"
    env = data["environment"]
    assert env["torch"] == torch.__version__ and "timm" in env and "torchao" in env and env["gpu"] is None
    assert sorted(os.listdir(out.parent)) == ["hopper.json"]  # the temporary file was renamed, not left behind
    assert out.stat().st_mode & 0o777 == 0o644  # write_json_atomic's mode (tempfile alone gives 0600)


def test_unknown_section_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["bench", "--sections", "layers,kernal"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--sections" in err and "'kernal'" in err and "layers, kernels, step, equivalence" in err


def test_unknown_step_variant_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["bench", "--step-variants", "hot,fp16"])
    assert "'fp16'" in capsys.readouterr().err


def test_sections_parse_to_the_canonical_order() -> None:
    assert bench.parse_sections("step, layers,step") == ["layers", "step"]
    assert bench.parse_variants("hot_compile,bf16") == ["bf16", "hot_compile"]
    with pytest.raises(Exception, match="no section"):
        bench.parse_sections(" , ")
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args([])
    assert args.sections == list(bench.DEFAULT_SECTIONS) and args.batch == 128 and args.steps == 20
    assert args.out is None and args.warmup_steps == 5 and args.equiv_steps == 20 and not args.step_in_process


def test_a_failing_part_is_recorded_and_the_rest_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    def variant(name: str, *args: object) -> dict:
        if name == "hot":
            raise torch.cuda.OutOfMemoryError("out of memory")
        return {"step_ms": 100.0, "peak_memory_gib": 10.0}

    monkeypatch.setattr(bench, "copy_bandwidth", broken)
    monkeypatch.setattr(bench, "step_variant", variant)
    monkeypatch.setattr(bench, "equivalence", broken)
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(["--step-variants", "bf16_compile,hot", "--step-in-process"])
    payload: dict = {"status": "partial", "environment": {}}
    saves = []
    bench._run_sections(args, payload, lambda: saves.append(1))
    assert payload["layers"] == {"error": "RuntimeError: boom"} and payload["kernels"] == {
        "error": "RuntimeError: boom"
    }
    assert payload["step"]["variants"]["hot"] == {"error": "OutOfMemoryError: out of memory"}
    assert payload["step"]["isolation"] == "one process for all variants"
    assert payload["step"]["ratios"]["bf16_compile"] == {"speedup": 1.0, "memory_ratio": 1.0}
    assert payload["equivalence"] == {"error": "RuntimeError: boom", "passed": False}
    assert len(saves) == 4  # after the layers, each step variant, and the equivalence
    text = "\n".join(report.summary_lines(payload))
    assert "boom" in text and "out of memory" in text


def test_each_step_variant_runs_in_a_process_of_its_own_with_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fresh(request: dict, **kw: object) -> dict:
        calls.append((request, kw))
        if request["variant"] == "hot":
            return {"error": "step worker for 'hot' exited with code -11 without a result", "exit_code": -11}
        return {"step_ms": 50.0, "peak_memory_gib": 9.0}

    def in_process(*args: object, **kwargs: object) -> None:
        raise AssertionError("the default runs no variant in this process")

    monkeypatch.setattr(bench, "measure_in_fresh_process", fresh)
    monkeypatch.setattr(bench, "step_variant", in_process)
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    argv = ["--sections", "step", "--batch", "64", "--steps", "7", "--warmup-steps", "2", "--seed", "3"]
    args = parser.parse_args([*argv, "--gemm", "cublas", "--step-timeout", "99"])
    payload: dict = {}
    bench._run_sections(args, payload, lambda: None)
    hot = HOTConfig(backend="real", abc=True, lqs=True, seed=3, gemm="cublas")
    want = [(worker_request(v, 64, 7, 2, 3, hot), {"timeout_s": 99}) for v in STEP_VARIANTS]
    assert calls == want
    step = payload["step"]
    assert step["isolation"] == "a fresh process per variant" and list(step["variants"]) == list(STEP_VARIANTS)
    assert step["variants"]["hot"]["exit_code"] == -11 and step["variants"]["hot_compile"]["step_ms"] == 50.0
    assert step["ratios"]["hot_nohead"]["speedup"] == 1.0


def test_a_run_writes_under_kernels_results_and_compares_with_the_last_committed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"gpu": "NVIDIA H100 80GB HBM3", "git_commit": "fedcba9876543210", "git_dirty": False, "date": "2026-11-26"}
    committed = tmp_path / "bench_nvidia-h100-80gb-hbm3_0123456789.json"
    old = {"environment": {**env, "git_commit": "0123456789", "date": "2026-11-25"}, "settings": {"batch": 128}}
    old["step"] = {"variants": {"bf16": {"step_ms": 50.0}, "hot": {"step_ms": 121.4}}}
    committed.write_text(json.dumps(old))

    def sections(args: argparse.Namespace, payload: dict, save: object) -> None:
        payload["step"] = {"variants": {"bf16": {"step_ms": 56.0}, "hot": {"step_ms": 78.0}}}

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "environment", lambda: dict(env))
    monkeypatch.setattr(bench, "results_directory", lambda: tmp_path)
    monkeypatch.setattr(
        bench, "git_tracked", lambda directory: {committed.resolve()} if directory == tmp_path else None
    )
    monkeypatch.setattr(bench, "_run_sections", sections)
    assert cli.main(["bench", "--sections", "step"]) == 0
    written = json.loads((tmp_path / "bench_nvidia-h100-80gb-hbm3_fedcba9876.json").read_text())
    assert written["status"] == "measured" and written["environment"] == env
    assert written["step"]["variants"]["hot"] == {"step_ms": 78.0}
    out = capsys.readouterr().out
    assert f"compared with {committed} (commit 0123456789, 2026-11-25)" in out
    lines = out.splitlines()
    assert next(line for line in lines if line.startswith("step.bf16.step_ms")).split() == [
        "step.bf16.step_ms",
        "50.00",
        "56.00",
        "1.12",
        "REGRESSED",
    ]
    assert next(line for line in lines if line.startswith("step.hot.step_ms")).split()[1:] == [
        "121.40",
        "78.00",
        "0.64",
    ]
    # --commit names the file where git cannot tell; a first run on a GPU has nothing to compare with
    monkeypatch.setattr(bench, "environment", lambda: {**env, "gpu": "NVIDIA H200", "git_commit": None})
    assert cli.main(["bench", "--sections", "step", "--commit", "abc1234"]) == 0
    assert (tmp_path / "bench_nvidia-h200_abc1234.json").exists()
    assert f"no earlier run on nvidia-h200 under {tmp_path} to compare with" in capsys.readouterr().out


def test_the_default_file_without_a_gpu_names_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bench, "results_directory", lambda: tmp_path)
    assert cli.main(["bench"]) == 0
    (written,) = tmp_path.iterdir()
    head = subprocess.run(
        ["git", "-C", str(Path(bench.__file__).parent), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert written.name.startswith(f"bench_no-gpu_{head[:10] or 'unknown'}")
    assert json.loads(written.read_text())["status"] == "not measured: no GPU"


def test_the_results_directory_is_kernels_results_of_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "checkout" / "kernels").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench, "git_toplevel", lambda: tmp_path / "checkout")
    assert bench.results_directory() == tmp_path / "checkout" / "kernels" / "results"
    monkeypatch.setattr(bench, "git_toplevel", lambda: tmp_path)  # a checkout of something else: no kernels/
    assert bench.results_directory() == tmp_path / "kernels" / "results"
    monkeypatch.chdir(tmp_path / "checkout")
    monkeypatch.setattr(bench, "git_toplevel", lambda: None)  # no git: the working directory's
    assert bench.results_directory() == tmp_path / "checkout" / "kernels" / "results"
