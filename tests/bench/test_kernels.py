"""The layers/kernels section's bookkeeping on the CPU with the fake backend, and its formulas by hand."""

from __future__ import annotations

import pytest
import torch

from hot.bench import kernels, report
from hot.config import HOTConfig
from hot.methods import create_method


def test_arithmetic_limit_by_hand() -> None:
    # L=1000, O=100, I=10, 500 HLA rows; FP8 at 1 TFLOP/s, copy at 100 GB/s, bf16 g_y:
    # t_fp8 = 2e6 / 1e12 s = 2 us, t_int8 = 1e6 / 1e12 s = 1 us,
    # bytes = 1000·100·2 + 1000·100 + 500·100 = 350 000 -> 3.5 us; floor 6.5 us; 13 us of bf16 -> 2.0
    r = kernels.arithmetic_limit(13.0, 1000, 100, 10, 500, 1e12, 1e11)
    assert r["t_fp8_us"] == pytest.approx(2.0)
    assert r["t_int8_halfK_us"] == pytest.approx(1.0)
    assert r["transform_bytes"] == 350_000
    assert r["t_transform_us"] == pytest.approx(3.5)
    assert r["floor_us"] == pytest.approx(6.5)
    assert r["limit"] == pytest.approx(2.0)


def test_grad_output_budget_by_hand() -> None:
    # bf16 100 us; g_x 40 + g_w 25 = 65 us, 35 us left to g_y's quantisers; 30 with W's 5 taken too.
    # L=1000, O=100, 500 HLA rows, bf16 g_y: read once 200 000 B + codes 100 000 + 50 000 = 350 000 B;
    # read twice 550 000 B. At 10 GB/s of copy, 350 000 B in 35 us is 10 GB/s: 1.0 of the copy.
    stages = {"quantize_grad_output": 1e3, "hq_quantize_weight": 5.0, "hq_matmul": 40.0, "hla_matmul": 25.0}
    b = kernels.grad_output_budget(100.0, stages, 1000, 100, 500, 1e10)
    assert b["gemms_us"] == pytest.approx(65.0) and b["weight_quantizer_us"] == 5.0
    assert b["budget_us"] == pytest.approx(35.0) and b["budget_with_weight_us"] == pytest.approx(30.0)
    assert (b["bytes_one_read"], b["bytes_two_reads"]) == (350_000, 550_000)
    assert kernels.one_pass_bytes(1000, 100, 500) == 350_000
    assert b["fraction_of_copy_one_read"] == pytest.approx(1.0)
    assert b["fraction_of_copy_two_reads"] == pytest.approx(550_000 / 35e-6 / 1e10)
    assert b["fraction_of_copy_one_read_with_weight"] == pytest.approx(350_000 / 30e-6 / 1e10)
    assert b["fraction_of_copy_two_reads_with_weight"] == pytest.approx(550_000 / 30e-6 / 1e10)
    assert report.budget_cells(b).endswith("1.00, 1.57, 1.83")
    # the GEMMs alone take bf16's time: no bandwidth is enough; with W's time the budget is negative
    none = kernels.grad_output_budget(65.0, stages, 1000, 100, 500, 1e10)
    assert none["budget_us"] == pytest.approx(0.0) and none["fraction_of_copy_two_reads"] is None
    assert none["budget_with_weight_us"] == pytest.approx(-5.0)
    assert none["fraction_of_copy_one_read_with_weight"] is None
    assert report.budget_cells(none).endswith("none, none, none")
    # W's time alone exhausts the budget with it, not the one beside the GEMMs
    tight = kernels.grad_output_budget(68.0, stages, 1000, 100, 500, 1e10)
    assert tight["fraction_of_copy_one_read"] is not None and tight["fraction_of_copy_one_read_with_weight"] is None
    # a run from before the counts with W: those cells are marked missing, not "none"
    old = {k: v for k, v in b.items() if not k.endswith("_with_weight")}
    assert report.budget_cells(old).endswith("1.00, 1.57, -") and report.budget_cells(None) == ""


def test_measure_layer_on_the_cpu_with_the_fake_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layers/kernels bookkeeping, with a stand-in clock (each timed function still runs once)."""
    timed = []

    def clock(fn: object, reps: int, warmup: int) -> tuple[float, str]:
        fn()  # type: ignore[operator]
        timed.append(fn)
        return 10.0 * len(timed), "stub"

    gemms = {"fp8_gemm_us": 1.0, "fp8_tflops": 1.0, "int8_gemm_us": 1.0, "int8_tops": 1.0, "int8_over_fp8_rate": 1.0}
    monkeypatch.setattr(kernels, "time_us", clock)
    monkeypatch.setattr(kernels, "gemm_rates", lambda *a: {**gemms, "_fp8_flops": 1e12, "_modes": {}})
    method = create_method(HOTConfig(backend="fake", abc=True))
    sections = ("layers", "kernels")
    layer, kernel = kernels.measure_layer("proj", 768, 768, 1, method, sections, 1000.0, 1, 0, 0, device="cpu")
    length, rows = 197, 16 * 8 + 1  # 14×14 patches padded to 4×4 windows of 16×16, and the class token
    assert (layer["L"], layer["O"], layer["I"], layer["hla_rows"]) == (length, 768, 768, rows)
    assert len(timed) == 7  # g_y quantiser, pack_input, bf16, hot backward, weight quantiser, two GEMMs
    assert layer["speedup_vs_bf16"] == pytest.approx(layer["bf16_us"] / layer["hot_backward_us"])
    assert set(layer["stages_us"]) == {"quantize_grad_output", "hq_quantize_weight", "hq_matmul", "hla_matmul"}
    assert layer["arithmetic_limit"]["transform_bytes"] == length * 768 * 3 + rows * 768
    stages = layer["stages_us"]
    assert layer["grad_output_budget"]["budget_us"] == pytest.approx(
        layer["bf16_us"] - stages["hq_matmul"] - stages["hla_matmul"]
    )
    assert layer["grad_output_budget"]["bytes_two_reads"] == length * 768 * 5 + rows * 768
    assert layer["grad_output_budget"]["budget_with_weight_us"] == pytest.approx(
        layer["grad_output_budget"]["budget_us"] - stages["hq_quantize_weight"]
    )
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
    payload["step"].update(report.step_summary(payload["step"]["variants"]))
    text = "\n".join(report.summary_lines(payload))
    assert "proj" in text and "bf16_compile" in text and "equivalence" in text
    assert "ratios to bf16_compile" in text  # no bf16 eager in this run: the first variant measured
    # a layer from a run before the budget (and the stretch) existed still prints
    del payload["layers"]["proj"]["grad_output_budget"]
    assert any(line.startswith("proj") for line in report.summary_lines(payload))


def test_moved_bytes_come_from_the_backend_when_it_counts_them() -> None:
    class Counting:
        def grad_output_bytes(self, g_y: torch.Tensor, hq: object, hla: object) -> int:
            return 2 * g_y.numel() * g_y.element_size() + 7

    g_y = torch.randn(4, 8, dtype=torch.bfloat16)
    assert kernels.moved_grad_output_bytes(Counting(), g_y, None, None, 100) == (135, "Counting.grad_output_bytes")
    moved, source = kernels.moved_grad_output_bytes(object(), g_y, None, None, 100)
    assert (moved, source) == (100 + 64, "assumed: g_y read twice")


def test_the_latency_figures_g_w_shapes_with_k_as_the_backward_has_it_and_padded() -> None:
    """The g_w GEMM shapes of the figure's 16 layers: (O, I, projected rows), K padded to 16 for the sm_90a GEMM's
    own rows and as the backward has it for the route rows (the figure's strips give 104 rows at T = 197)."""
    from hot.hla import hla_windows, projected_rows
    from hot.paper import paper_values

    rows = paper_values()["latency_figure"]["rows"]
    exact = kernels.latency_figure_gw_shapes(pad=1)
    want = {(int(r["O"]), int(r["I"]), projected_rows(int(r["L"]), hla_windows(int(r["L"]), "paper"), 8)) for r in rows}
    assert set(exact) == want and exact == sorted(exact)
    assert (2304, 768, 104) in exact  # ViT-B qkv: 13 strips of 16 tokens, rank 8
    padded = kernels.latency_figure_gw_shapes()
    assert padded == sorted({(m, n, -(-k // 16) * 16) for m, n, k in exact})
    assert all(k % 16 == 0 for _, _, k in padded)
