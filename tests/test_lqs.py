import json

import pytest
import torch
from torch import nn

import hot
from hot import HOTConfig, lqs
from hot.modules import EXTRA_STATE_DECISIONS


def model_and_grads():
    model = hot.convert(nn.Sequential(nn.Linear(32, 64), nn.Linear(64, 64)), HOTConfig(lqs=True))
    x = torch.randn(4, 32, 32, requires_grad=True)
    g = torch.randn(4, 32, 64) * 0.01
    return model, x, g


def test_token_outliers_choose_per_token_and_flat_gradients_per_tensor():
    model, x, g = model_and_grads()
    # token magnitudes spread over three decades: per-token scales cut the Frobenius error by more than 2x
    g = g * 10 ** (3 * torch.rand(4, 32, 1))
    with lqs.calibrate(model):
        model(x).backward(g)
    choice = lqs.decisions(model)
    assert choice["1"] == "per_token"
    assert choice["0"] == "per_token"  # layer 0 sees g_y = g W1: the same token magnitudes

    flat, x, g = model_and_grads()
    with lqs.calibrate(flat):
        flat(x).backward(g)
    assert lqs.decisions(flat)["1"] == "per_tensor"


def test_decisions_round_trip_through_json(tmp_path):
    model, x, g = model_and_grads()
    g = g * 10 ** (3 * torch.rand(4, 32, 1))
    with lqs.calibrate(model):
        model(x).backward(g)
    path = tmp_path / "run" / "lqs.json"
    lqs.save_decisions(model, path)
    assert json.loads(path.read_text()) == lqs.decisions(model)
    fresh, _, _ = model_and_grads()
    lqs.load_decisions(fresh, path)
    assert lqs.decisions(fresh) == lqs.decisions(model)
    assert fresh[1].state_dict()["_extra_state"][1].item() == EXTRA_STATE_DECISIONS.index("per_token")


def test_mismatched_decisions_are_rejected(tmp_path):
    model, _, _ = model_and_grads()
    path = tmp_path / "lqs.json"
    path.write_text(json.dumps({"0": "per_token", "7": "per_tensor"}))
    with pytest.raises(ValueError, match="missing \\['1'\\], unknown \\['7'\\]"):
        lqs.load_decisions(model, path)
    path.write_text(json.dumps({"0": "per_row", "1": "per_tensor"}))
    with pytest.raises(ValueError, match="per_row"):
        lqs.load_decisions(model, path)


def test_calibrate_needs_lqs_layers():
    with pytest.raises(ValueError, match="lqs"):
        with lqs.calibrate(hot.convert(nn.Linear(4, 4), HOTConfig())):
            pass
