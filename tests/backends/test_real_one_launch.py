"""hot.backends.real's process-wide kernel settings (hla_one_launch, sm90_balanced_grid) with stand-in ops (no GPU
needed): the setting inside, on again after."""

from __future__ import annotations

import types

import pytest

from hot.backends import real

SETTINGS = [(real.hla_one_launch, "set_hla_one_launch"), (real.sm90_balanced_grid, "set_sm90_balanced_grid")]


def _backend(monkeypatch: pytest.MonkeyPatch, op: str, calls: list[bool]) -> real.RealBackend:
    ops = types.SimpleNamespace(**{op: calls.append})
    monkeypatch.setattr(real, "load_ops", lambda: ops)
    return real.RealBackend()


@pytest.mark.parametrize(("setting", "op"), SETTINGS)
def test_the_path_is_set_inside_and_on_again_after(monkeypatch: pytest.MonkeyPatch, setting, op) -> None:
    calls: list[bool] = []
    backend = _backend(monkeypatch, op, calls)
    with setting(backend, False):
        assert calls == [False]
    assert calls == [False, True]


@pytest.mark.parametrize(("setting", "op"), SETTINGS)
def test_an_error_inside_still_turns_it_on_again(monkeypatch: pytest.MonkeyPatch, setting, op) -> None:
    calls: list[bool] = []
    backend = _backend(monkeypatch, op, calls)
    with pytest.raises(RuntimeError, match="inside"), setting(backend, False):
        raise RuntimeError("inside")
    assert calls == [False, True]
