"""``hot bench`` without a GPU: the status file, argument errors, the pure formulas, and CPU smoke runs of the
training and equivalence helpers (the GPU measurements themselves run only on a Hopper machine)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch

from hot import cli
from hot.bench import hopper
from hot.config import HOTConfig
from hot.methods import create_method


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
    assert hopper.parse_sections("step, layers,step") == ["layers", "step"]
    assert hopper.parse_variants("hot_compile,bf16") == ["bf16", "hot_compile"]
    with pytest.raises(Exception, match="no section"):
        hopper.parse_sections(" , ")
    parser = __import__("argparse").ArgumentParser()
    hopper.add_arguments(parser)
    args = parser.parse_args([])
    assert args.sections == list(hopper.SECTIONS) and args.batch == 128 and args.steps == 20
    assert args.out == Path("results/bench/hopper.json") and args.warmup_steps == 5 and args.equiv_steps == 30


def test_arithmetic_limit_by_hand() -> None:
    # L=1000, O=100, I=10, 500 HLA rows; FP8 at 1 TFLOP/s, copy at 100 GB/s, bf16 g_y:
    # t_fp8 = 2e6 / 1e12 s = 2 us, t_int8 = 1e6 / 1e12 s = 1 us,
    # bytes = 1000·100·2 + 1000·100 + 500·100 = 350 000 -> 3.5 us; floor 6.5 us; 13 us of bf16 -> 2.0
    r = hopper.arithmetic_limit(13.0, 1000, 100, 10, 500, 1e12, 1e11)
    assert r["t_fp8_us"] == pytest.approx(2.0)
    assert r["t_int8_halfK_us"] == pytest.approx(1.0)
    assert r["transform_bytes"] == 350_000
    assert r["t_transform_us"] == pytest.approx(3.5)
    assert r["floor_us"] == pytest.approx(6.5)
    assert r["limit"] == pytest.approx(2.0)


def test_bytes_bandwidth_and_targets_by_hand() -> None:
    codes, scale = torch.zeros(4, 4, dtype=torch.int8), torch.zeros(4, 1)
    view = torch.zeros(3, 5, dtype=torch.bfloat16).t()
    assert hopper.tensor_bytes(codes, scale, view) == 16 + 16 + 30
    b = hopper.bandwidth(3_000_000, 1.0, 4000.0)  # 3 MB in 1 us = 3000 GB/s, 0.75 of 4000
    assert b["gbps"] == pytest.approx(3000.0) and b["fraction_of_copy"] == pytest.approx(0.75)
    assert b["target"] == 0.8 and b["met"] is False
    assert hopper.bandwidth(3_200_000, 1.0, 4000.0)["met"] is True
    assert hopper.layer_verdict("proj", 100.0, 80.0) == {"speedup_vs_bf16": 1.25, "target": 1.2, "target_met": True}
    assert hopper.layer_verdict("qkv", 100.0, 80.0)["target_met"] is False
    assert hopper.meets(None, 1.0) is None and hopper.meets(0.6, 0.7, higher_is_better=False) is True


def test_step_summary_ratios_and_targets() -> None:
    variants = {
        "bf16": {"step_ms": 125.0, "peak_memory_gib": 12.0},
        "bf16_compile": {"step_ms": 100.0, "peak_memory_gib": 10.0},
        "torchao_float8": {"step_ms": 85.0, "peak_memory_gib": 9.0},
        "hot": {"step_ms": 80.0, "peak_memory_gib": 6.0},
        "hot_compile": {"error": "RuntimeError: no"},
    }
    s = hopper.step_summary(variants)
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
    slow = hopper.step_summary({**variants, "hot": {"step_ms": 90.0, "peak_memory_gib": 7.5}})
    assert slow["targets"]["hot"] == {
        "speedup_ge_1.15": False,
        "faster_than_torchao_float8": False,
        "memory_ratio_le_0.7": False,
    }
    skipped = hopper.step_summary({**variants, "torchao_float8": {"skipped": "torchao is not importable"}})
    assert skipped["targets"]["hot"]["faster_than_torchao_float8"] is None


def test_max_relative_difference() -> None:
    assert hopper.max_relative_difference([2.0, 4.0], [2.002, 4.0]) == pytest.approx(1e-3)
    assert hopper.max_relative_difference([1.0], [1.0]) == 0.0
    with pytest.raises(ValueError, match="equally long"):
        hopper.max_relative_difference([1.0], [1.0, 2.0])


def _tiny_hot_vit(config: HOTConfig) -> torch.nn.Module:
    from hot.convert import convert
    from hot.train.models import create_model

    torch.manual_seed(0)
    return convert(create_model("vit_tiny_fmnist", 10, 1), config)


def test_time_training_runs_a_tiny_hot_model_on_the_cpu() -> None:
    from hot.convert import hot_layers

    net = _tiny_hot_vit(HOTConfig(backend="fake", abc=True, lqs=True))
    images, labels = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    r = hopper.time_training(net, images, labels, steps=2, warmup=1, calibrate_lqs=True, amp=False)
    assert r["step_ms"] > 0 and len(r["step_ms_all"]) == 2 and all(t > 0 for t in r["step_ms_all"])
    assert r["images_per_s"] > 0 and r["peak_memory_gib"] is None and math.isfinite(r["final_loss"])
    # every layer decided, but the patch embedding: its input needs no gradient, so it computes no g_x to calibrate
    assert r["lqs"]["per_token"] + r["lqs"]["per_tensor"] == len(list(hot_layers(net))) - 1 and r["lqs"]["none"] == 1
    assert all(layer.hot_state.step == 4 for _, layer in hot_layers(net))  # calibration + warm-up + 2 timed


def test_equivalence_of_a_backend_with_itself_is_exact_on_the_cpu() -> None:
    r = hopper.equivalence("cpu", steps=2, batch=8, backends=("fake", "fake"))
    assert [run["backend"] for run in r["runs"]] == ["fake", "fake"]
    assert len(r["runs"][0]["losses"]) == 2 and r["runs"][0]["losses"] == r["runs"][1]["losses"]
    assert all(math.isfinite(x) and x > 0 for x in r["runs"][0]["losses"])
    assert r["max_rel_loss_diff"] == 0.0 and r["passed"] is True and r["tolerance"] == 1e-3
    assert 0.0 <= r["runs"][0]["held_out_accuracy"] <= 1.0 and r["accuracy_diff"] == 0.0
    assert "order" in r["why_not_zero"]


def test_measure_layer_on_the_cpu_with_the_fake_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layers/kernels bookkeeping, with a stand-in clock (each timed function still runs once)."""
    timed = []

    def clock(fn: object, reps: int, warmup: int) -> tuple[float, str]:
        fn()  # type: ignore[operator]
        timed.append(fn)
        return 10.0 * len(timed), "stub"

    gemms = {"fp8_gemm_us": 1.0, "fp8_tflops": 1.0, "int8_gemm_us": 1.0, "int8_tops": 1.0, "int8_over_fp8_rate": 1.0}
    monkeypatch.setattr(hopper, "time_us", clock)
    monkeypatch.setattr(hopper, "_gemm_rates", lambda *a: {**gemms, "_fp8_flops": 1e12, "_modes": {}})
    method = create_method(HOTConfig(backend="fake", abc=True))
    layer, kernel = hopper.measure_layer("proj", 768, 768, 1, method, hopper.SECTIONS, 1000.0, 1, 0, 0, device="cpu")
    length, rows = 197, 16 * 8 + 1  # 14×14 patches padded to 4×4 windows of 16×16, and the class token
    assert (layer["L"], layer["O"], layer["I"], layer["hla_rows"]) == (length, 768, 768, rows)
    assert len(timed) == 7  # g_y quantiser, pack_input, bf16, hot backward, weight quantiser, two GEMMs
    assert layer["speedup_vs_bf16"] == pytest.approx(layer["bf16_us"] / layer["hot_backward_us"])
    assert set(layer["stages_us"]) == {"quantize_grad_output", "hq_quantize_weight", "hq_matmul", "hla_matmul"}
    assert layer["arithmetic_limit"]["transform_bytes"] == length * 768 * 3 + rows * 768
    # g_y (bf16) read once + int8 codes + per-token float32 scales + HLA int8 codes + one float32 scale
    unique = length * 768 * 2 + length * 768 + length * 4 + rows * 768 + 4
    g = kernel["grad_output_quantizer"]
    assert g["unique"]["bytes"] == unique
    assert g["moved"]["bytes"] == unique + length * 768 * 2 and g["moved_bytes_source"] == "assumed: g_y read twice"
    assert g["unique"]["gbps"] == pytest.approx(unique / g["us"] / 1e3)
    assert kernel["pack_input"]["unique"]["bytes"] == length * 768 * 2 + rows * 768 + 4
    payload = {
        "status": "measured",
        "environment": {"gpu": "cpu"},
        "copy_bandwidth": {"gbps": 1000.0},
        "layers": {"proj": layer},
        "kernels": {"target_fraction_of_copy": 0.8, "proj": kernel},
        "step": {"variants": {"bf16_compile": {"step_ms": 1.0, "peak_memory_gib": 1.0}, "hot": {"error": "x"}}},
        "equivalence": {"max_rel_loss_diff": 0.0, "tolerance": 1e-3, "passed": True, "runs": []},
    }
    payload["step"].update(hopper.step_summary(payload["step"]["variants"]))
    text = "\n".join(hopper.summary_lines(payload))
    assert "proj" in text and "bf16_compile" in text and "equivalence" in text


def test_moved_bytes_come_from_the_backend_when_it_counts_them() -> None:
    class Counting:
        def grad_output_bytes(self, g_y: torch.Tensor, hq: object, hla: object) -> int:
            return 2 * g_y.numel() * g_y.element_size() + 7

    g_y = torch.randn(4, 8, dtype=torch.bfloat16)
    assert hopper._moved_grad_output_bytes(Counting(), g_y, None, None, 100) == (135, "Counting.grad_output_bytes")
    moved, source = hopper._moved_grad_output_bytes(object(), g_y, None, None, 100)
    assert (moved, source) == (100 + 64, "assumed: g_y read twice")


def test_code_mismatches_counts_every_code_of_the_three_quantisers() -> None:
    found = hopper.code_mismatches("cpu", 2 * 50, 32, 16, 50, backends=("fake", "fake"))
    rows = 2 * 4 * 8  # two samples of 50 positions: 4 blocks of 16, 8 kept rows each
    assert found == {"hq_grad_output": 0, "hla_grad_output": 0, "hla_input": 0, "elements": 100 * 32 + rows * (32 + 16)}


def test_a_failing_part_is_recorded_and_the_rest_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    def variant(name: str, *args: object) -> dict:
        if name == "hot":
            raise torch.cuda.OutOfMemoryError("out of memory")
        return {"step_ms": 100.0, "peak_memory_gib": 10.0}

    monkeypatch.setattr(hopper, "copy_bandwidth", broken)
    monkeypatch.setattr(hopper, "step_variant", variant)
    monkeypatch.setattr(hopper, "equivalence", broken)
    parser = __import__("argparse").ArgumentParser()
    hopper.add_arguments(parser)
    args = parser.parse_args(["--step-variants", "bf16_compile,hot"])
    payload: dict = {"status": "partial", "environment": {}}
    saves = []
    hopper._run_sections(args, payload, lambda: saves.append(1))
    assert payload["layers"] == {"error": "RuntimeError: boom"} and payload["kernels"] == {
        "error": "RuntimeError: boom"
    }
    assert payload["step"]["variants"]["hot"] == {"error": "OutOfMemoryError: out of memory"}
    assert payload["step"]["ratios"]["bf16_compile"] == {"speedup": 1.0, "memory_ratio": 1.0}
    assert payload["equivalence"] == {"error": "RuntimeError: boom", "passed": False}
    assert len(saves) == 4  # after the layers, each step variant, and the equivalence
    text = "\n".join(hopper.summary_lines(payload))
    assert "boom" in text and "out of memory" in text
