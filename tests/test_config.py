import pytest

from hot import HOTConfig, preset
from hot.config import PRESETS


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hla_rank": 0}, "hla_rank"),
        ({"hla_rank": 17}, "hla_rank"),
        ({"gx_bits": 3}, "gx_bits"),
        ({"gw_bits": 16}, "gw_bits"),
        ({"method": "hotter"}, "method"),
        ({"hla_blocking": "diagonal"}, "hla_blocking"),
        ({"hq_block": 12}, "hq_block"),
        ({"backend": "tpu"}, "backend"),
        ({"gx_granularity": "per_channel"}, "gx_granularity"),
        ({"keep_ratio": 0.0}, "keep_ratio"),
        ({"method": "luq", "abc": True}, "abc"),
        ({"gx_bits": True}, "gx_bits"),
        ({"gx_bits": 4.0}, "gx_bits"),
        ({"abc": "no"}, "abc"),
        ({"lqs": 1}, "lqs"),
        ({"hla_rank": True}, "hla_rank"),
        ({"lqs_ratio": "0.5"}, "lqs_ratio"),
        ({"lqs_ratio": float("nan")}, "lqs_ratio"),
        ({"keep_ratio": None}, "keep_ratio"),
        ({"seed": 1.0}, "seed"),
        ({"method": None}, "method"),
        ({"fused_grad_output": 1}, "fused_grad_output"),
        ({"rounding_hash": "philox"}, "rounding_hash"),
        ({"rounding_hash": 1}, "rounding_hash"),
        ({"method": "luq", "rounding_hash": "fmix32"}, "rounding_hash"),
    ],
)
def test_bad_config_names_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        HOTConfig(**changes)


def test_config_is_frozen_and_round_trips():
    c = HOTConfig(abc=True, hla_rank=4)
    with pytest.raises(AttributeError):
        c.hla_rank = 8
    assert HOTConfig.from_dict(c.to_dict()) == c


def test_unknown_key_is_named():
    with pytest.raises(ValueError, match="hla_rnak"):
        HOTConfig.from_dict({"hla_rnak": 8})


def test_presets():
    assert preset("hot_abc_lqs") == HOTConfig(abc=True, lqs=True)
    assert preset("hot", hla_rank=4).hla_rank == 4
    assert set(PRESETS) >= {"fp", "hot", "hot_abc", "hot_abc_lqs", "int4", "luq", "lbp_wht"}
    with pytest.raises(ValueError, match="unknown method preset"):
        preset("nope")


@pytest.mark.parametrize("fields", [("a", 4, 4), (0, 4.0, 4), (0, 4, True), (None, 1, 1)])
def test_token_grid_rejects_non_integers_as_value_error(fields):
    from hot import TokenGrid

    with pytest.raises(ValueError, match="TokenGrid"):
        TokenGrid(*fields)


def test_float_fields_take_integers():
    assert HOTConfig(method="grad_dropout", keep_ratio=1).keep_ratio == 1
