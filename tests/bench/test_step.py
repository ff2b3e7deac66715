"""The step benchmark's timing loop on the CPU (a tiny HOT ViT with LQS)."""

from __future__ import annotations

import math

import pytest
import torch

from hot.bench import step
from hot.config import HOTConfig


def _tiny_hot_vit(config: HOTConfig) -> torch.nn.Module:
    from hot.convert import convert
    from hot.train.models import create_model

    torch.manual_seed(0)
    return convert(create_model("vit_tiny_fmnist", 10, 1), config)


def test_time_training_runs_a_tiny_hot_model_on_the_cpu() -> None:
    from hot.convert import hot_layers

    net = _tiny_hot_vit(HOTConfig(backend="fake", abc=True, lqs=True))
    images, labels = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    r = step.time_training(net, images, labels, steps=2, warmup=1, calibrate_lqs=True, amp=False)
    assert r["step_ms"] > 0 and len(r["step_ms_all"]) == 2 and all(t > 0 for t in r["step_ms_all"])
    assert r["images_per_s"] > 0 and r["peak_memory_gib"] is None and math.isfinite(r["final_loss"])
    # every layer decided, but the patch embedding: its input needs no gradient, so it computes no g_x to calibrate
    assert r["lqs"]["per_token"] + r["lqs"]["per_tensor"] == len(list(hot_layers(net))) - 1 and r["lqs"]["none"] == 1
    assert all(layer.hot_state.step == 4 for _, layer in hot_layers(net))  # calibration + warm-up + 2 timed


def test_the_step_profile_refuses_bad_calls_and_a_machine_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from hot.bench import step_profile

    assert step_profile.main([]) == 2 and "usage:" in capsys.readouterr().err
    assert step_profile.main(["out", "fp32", "1", "1", "0"]) == 2 and "usage:" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert step_profile.main(["out"]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err


def test_the_host_profile_refuses_bad_calls_and_a_machine_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from hot.bench import host_profile

    assert host_profile.main([]) == 2 and "usage:" in capsys.readouterr().err
    assert host_profile.main(["out", "fp32"]) == 2 and "usage:" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert host_profile.main(["out", "hot"]) == 2 and "needs a CUDA GPU" in capsys.readouterr().err
