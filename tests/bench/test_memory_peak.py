"""The memory-peak replay of an allocator trace, on synthetic traces (the GPU driver is hot.bench.step_profile's)."""

from __future__ import annotations

from hot.bench.memory_peak import allocation_site, peak_allocations

HOT = {"filename": "/x/src/hot/functional.py", "line": 210, "name": "_forward_outputs"}
TORCH = {"filename": "/v/site-packages/torch/nn/functional.py", "line": 5, "name": "linear"}


def _alloc(addr: int, size: int, *frames: dict) -> dict:
    return {"action": "alloc", "addr": addr, "size": size, "frames": list(frames)}


def _free(addr: int, size: int) -> dict:
    return {"action": "free_requested", "addr": addr, "size": size}


def test_the_blocks_live_at_the_peak_are_grouped_by_the_innermost_own_frame() -> None:
    trace = [
        _alloc(1, 100, TORCH, HOT),  # named by HOT's frame, not torch's
        _alloc(2, 50, TORCH),
        _free(2, 50),
        _alloc(3, 300, TORCH, HOT),
        _alloc(4, 20),
        _free(1, 100),  # after the peak: still counted there
        _free(99, 7),  # allocated before recording began: lowers the count, not the peak before it
        _alloc(5, 10, TORCH),
    ]
    result = peak_allocations(trace, base_bytes=1000)
    assert result["traced_bytes_at_peak"] == 420 and result["peak_bytes"] == 1420 and result["base_freed_bytes"] == 0
    sites = {s["site"]: (s["bytes"], s["blocks"]) for s in result["sites"]}
    assert sites == {"hot/functional.py:210 _forward_outputs": (400, 2), "(no Python frame)": (20, 1)}
    assert result["others"] == {"bytes": 0, "blocks": 0, "sites": 0}


def test_freeing_a_block_from_before_the_trace_lowers_the_count() -> None:
    # base 1000 holds block 99 (600 bytes), freed before 500 new bytes: memory_allocated peaks at 1000 + 100, not
    # 1000 + 500
    trace = [_alloc(1, 100, HOT), _free(99, 600), _alloc(2, 500, TORCH)]
    result = peak_allocations(trace, base_bytes=1000)
    assert result["peak_bytes"] == 1100 and result["traced_bytes_at_peak"] == 100
    assert [s["site"] for s in result["sites"]] == ["hot/functional.py:210 _forward_outputs"]
    # a higher peak after the free: the live blocks are the net count plus what was freed of the base
    result = peak_allocations([*trace, _alloc(3, 300, TORCH)], base_bytes=1000)
    assert result["peak_bytes"] == 1300 and result["base_freed_bytes"] == 600
    assert sum(s["bytes"] for s in result["sites"]) == result["traced_bytes_at_peak"] + result["base_freed_bytes"]


def test_groups_past_top_are_summed() -> None:
    trace = [_alloc(i, 10 * (i + 1), {"filename": f"/a/f{i}.py", "line": i, "name": "g"}) for i in range(5)]
    result = peak_allocations(trace, top=2)
    assert [s["bytes"] for s in result["sites"]] == [50, 40]
    assert result["others"] == {"bytes": 60, "blocks": 3, "sites": 3}


def test_an_empty_trace_has_no_peak() -> None:
    assert peak_allocations([], base_bytes=5) == {
        "base_bytes": 5,
        "peak_bytes": 5,
        "traced_bytes_at_peak": 0,
        "base_freed_bytes": 0,
        "sites": [],
        "others": {"bytes": 0, "blocks": 0, "sites": 0},
    }
    assert allocation_site([TORCH]) == "torch/nn/functional.py:5 linear"
