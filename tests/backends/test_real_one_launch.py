"""hot.backends.real.hla_one_launch with stand-in ops (no GPU needed): the setting inside, on again after."""

from __future__ import annotations

import types

import pytest

from hot.backends import real


def _backend(monkeypatch: pytest.MonkeyPatch, calls: list[bool]) -> real.RealBackend:
    ops = types.SimpleNamespace(set_hla_one_launch=calls.append)
    monkeypatch.setattr(real, "load_ops", lambda: ops)
    return real.RealBackend()


def test_the_path_is_set_inside_and_on_again_after(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    backend = _backend(monkeypatch, calls)
    with real.hla_one_launch(backend, False):
        assert calls == [False]
    assert calls == [False, True]


def test_an_error_inside_still_turns_it_on_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    backend = _backend(monkeypatch, calls)
    with pytest.raises(RuntimeError, match="inside"), real.hla_one_launch(backend, False):
        raise RuntimeError("inside")
    assert calls == [False, True]
