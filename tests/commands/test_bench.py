"""``hot bench`` without a GPU: the status file, argument errors, and a failing section recorded while the rest
runs (the GPU measurements themselves run only on a Hopper machine)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
import torch

from hot import cli
from hot.bench import report
from hot.commands import bench


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
    assert args.out == Path("results/bench/hopper.json") and args.warmup_steps == 5 and args.equiv_steps == 30


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
    args = parser.parse_args(["--step-variants", "bf16_compile,hot"])
    payload: dict = {"status": "partial", "environment": {}}
    saves = []
    bench._run_sections(args, payload, lambda: saves.append(1))
    assert payload["layers"] == {"error": "RuntimeError: boom"} and payload["kernels"] == {
        "error": "RuntimeError: boom"
    }
    assert payload["step"]["variants"]["hot"] == {"error": "OutOfMemoryError: out of memory"}
    assert payload["step"]["ratios"]["bf16_compile"] == {"speedup": 1.0, "memory_ratio": 1.0}
    assert payload["equivalence"] == {"error": "RuntimeError: boom", "passed": False}
    assert len(saves) == 4  # after the layers, each step variant, and the equivalence
    text = "\n".join(report.summary_lines(payload))
    assert "boom" in text and "out of memory" in text
