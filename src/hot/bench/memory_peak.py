"""What is allocated at a training step's memory peak, and where it was allocated, from the CUDA caching allocator's
trace (``torch.cuda.memory._record_memory_history`` then ``torch.cuda.memory._snapshot()``).

:func:`peak_allocations` replays one device's trace: every ``alloc`` adds a block, every ``free_requested`` removes it
(what ``torch.cuda.memory_allocated`` counts), and the blocks live at the highest point are grouped by the Python
frame that allocated them, the innermost one in HOT, timm or torchao code where there is one. Blocks allocated
before recording began are not in the trace: ``base_bytes`` (``memory_allocated()`` when it began) stands for them,
and freeing one lowers the count (a step's old gradients, freed by ``zero_grad``): ``base_freed_bytes`` at the peak,
so the live blocks listed under ``sites`` add up to ``traced_bytes_at_peak + base_freed_bytes``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

# Frames from these packages name an allocation better than torch's own (the layer, not ``empty_like``).
OWN_PACKAGES = ("/hot/", "/timm/", "/torchao/")


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/src/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def allocation_site(frames: Sequence[dict[str, Any]] | None) -> str:
    """``file:line function`` of the innermost frame in :data:`OWN_PACKAGES` (frames run innermost first), else of
    the innermost frame; ``(no Python frame)`` where the trace has none (C++-only allocations)."""
    if not frames:
        return "(no Python frame)"
    chosen = next((f for f in frames if any(p in f.get("filename", "") for p in OWN_PACKAGES)), frames[0])
    return f"{_short(chosen.get('filename', '?'))}:{chosen.get('line', '?')} {chosen.get('name', '?')}"


def _replay(trace: Iterable[dict[str, Any]]) -> Iterable[tuple[int, int, dict[str, Any]]]:
    """(allocated bytes against the start, bytes of blocks from before the trace freed so far, live blocks by
    address) after each event of the trace."""
    live: dict[int, dict[str, Any]] = {}
    current = freed_base = 0
    for event in trace:
        action, addr = event.get("action"), event.get("addr")
        if action == "alloc":
            live[addr] = event
            current += int(event["size"])
        elif action == "free_requested":
            block = live.pop(addr, None)
            size = int(block["size"] if block is not None else event.get("size", 0))
            current -= size
            if block is None:  # allocated before the trace
                freed_base += size
        yield current, freed_base, live


def peak_allocations(trace: Sequence[dict[str, Any]], base_bytes: int = 0, top: int = 30) -> dict[str, Any]:
    """The trace's peak (``base_bytes`` plus what it allocated) and the blocks live there, grouped by
    :func:`allocation_site`, largest first (at most ``top`` groups; the rest summed as ``others``)."""
    peak, peak_index, freed_at_peak = 0, -1, 0
    for index, (current, freed_base, _) in enumerate(_replay(trace)):
        if current > peak:
            peak, peak_index, freed_at_peak = current, index, freed_base
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    if peak_index >= 0:
        for index, (_, _, live) in enumerate(_replay(trace)):
            if index == peak_index:
                for block in live.values():
                    group = groups[allocation_site(block.get("frames"))]
                    group[0] += int(block["size"])
                    group[1] += 1
                break
    ranked = sorted(groups.items(), key=lambda item: -item[1][0])
    shown = [{"site": site, "bytes": size, "blocks": count} for site, (size, count) in ranked[:top]]
    rest = ranked[top:]
    return {
        "base_bytes": base_bytes,
        "peak_bytes": base_bytes + peak,
        "traced_bytes_at_peak": peak,
        "base_freed_bytes": freed_at_peak,
        "sites": shown,
        "others": {"bytes": sum(s for _, (s, _) in rest), "blocks": sum(c for _, (_, c) in rest), "sites": len(rest)},
    }
