"""hot.backends.real._side_streams with stand-in streams (no GPU needed): distinct side streams, never the stream the
backward is queued on, even where torch's pool hands a side stream out again."""

from __future__ import annotations

import pytest

from hot.backends import real


def _pool(monkeypatch: pytest.MonkeyPatch, handed_out: list[str]) -> list[int]:
    """_side_stream's index i gives handed_out[i]; the indices asked for are recorded."""
    asked: list[int] = []

    def side_stream(device: str, index: int = 0) -> str:
        asked.append(index)
        return handed_out[index]

    monkeypatch.setattr(real, "_side_stream", side_stream)
    return asked


def test_the_first_side_streams_where_none_is_the_current_one(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _pool(monkeypatch, ["s0", "s1", "s2"])
    assert real._side_streams("cuda:0", "capture", 3) == ["s0", "s1", "s2"]
    assert asked == [0, 1, 2]


def test_the_current_stream_and_a_stream_handed_out_again_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    # the capture runs on the g_w chain's stream (the pool wrapped round to it), and the pool gives s0 again later
    asked = _pool(monkeypatch, ["s0", "s1", "s0", "s2"])
    assert real._side_streams("cuda:0", "s1", 2) == ["s0", "s2"]
    assert asked == [0, 1, 2, 3]
    asked.clear()
    assert real._side_streams("cuda:0", "s0", 1) == ["s1"]
    assert asked == [0, 1]
