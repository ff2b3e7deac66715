"""hot.bench.method_steps: one row per (model, method), built as the preset builds them, ratios to fp."""

import json

from hot.bench import method_steps


def test_rows_for_every_model_and_method(tmp_path):
    out = tmp_path / "steps.json"
    argv = [str(out), "--device", "cpu", "--steps", "1", "--batch-size", "2", "--models", "vit_tiny_fmnist"]
    assert method_steps.main([*argv, "--methods", "lbp_wht,fp,hla_filter"]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["model"], r["method"]) for r in rows] == [
        ("vit_tiny_fmnist", "lbp_wht"),
        ("vit_tiny_fmnist", "fp"),
        ("vit_tiny_fmnist", "hla_filter"),
    ]
    assert rows[1]["vs_fp"] == 1.0 and all(r["step_ms"] > 0 for r in rows)
    assert rows[0]["vs_fp"] == rows[0]["step_ms"] / rows[1]["step_ms"]  # fp measured after it: still its ratio
    assert rows[0]["backend"] == "fake" and rows[1]["backend"] == "none"
    assert all(r["syncs_per_step"] is None for r in rows)  # counted on CUDA only


def test_bad_arguments_print_the_usage(tmp_path, capsys):
    assert method_steps.main([]) == 2
    assert method_steps.main([str(tmp_path / "a.json"), "--stepz", "1"]) == 2
    assert method_steps.main([str(tmp_path / "a.json"), "--steps"]) == 2
    assert "usage: python -m hot.bench.method_steps OUT.json" in capsys.readouterr().err


def test_the_baselines_are_converted_and_the_head_left_exact():
    model, backend = method_steps.build("vit_tiny_fmnist", "hla_filter", "cpu")
    hot_layers = [name for name, m in model.named_modules() if hasattr(m, "hot_method")]
    assert hot_layers and "head" not in hot_layers and backend == "fake"
    assert {m.hot_config.keep_ratio for m in model.modules() if hasattr(m, "hot_config")} == {0.5}
