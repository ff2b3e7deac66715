"""hot.backends.real's process-wide kernel settings (hla_one_launch, weight_one_launch) with stand-in ops (no GPU
needed): the setting inside, its default again after."""

from __future__ import annotations

import types

import pytest

from hot.backends import real

SETTINGS = [
    (real.hla_one_launch, "set_hla_one_launch", True),
    (real.weight_one_launch, "set_weight_one_launch", False),
]


def _backend(monkeypatch: pytest.MonkeyPatch, op: str, calls: list[bool]) -> real.RealBackend:
    ops = types.SimpleNamespace(**{op: calls.append})
    monkeypatch.setattr(real, "load_ops", lambda: ops)
    return real.RealBackend()


@pytest.mark.parametrize(("setting", "op", "default"), SETTINGS)
def test_the_path_is_set_inside_and_back_to_its_default_after(monkeypatch, setting, op, default) -> None:
    calls: list[bool] = []
    backend = _backend(monkeypatch, op, calls)
    with setting(backend, not default):
        assert calls == [not default]
    assert calls == [not default, default]


@pytest.mark.parametrize(("setting", "op", "default"), SETTINGS)
def test_an_error_inside_still_sets_the_default_again(monkeypatch, setting, op, default) -> None:
    calls: list[bool] = []
    backend = _backend(monkeypatch, op, calls)
    with pytest.raises(RuntimeError, match="inside"), setting(backend, not default):
        raise RuntimeError("inside")
    assert calls == [not default, default]
