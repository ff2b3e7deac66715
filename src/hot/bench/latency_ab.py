"""Interleaved A/B of the latency figure's HOT backward (``hot latency``'s rows at the paper's L) on one GPU.

Variants, each captured once in a CUDA graph: ``fp32`` (cuBLAS); HOT's captured backward as ``hot latency`` times
it (``Backend.layer_gradients`` of a layer that kept x: x's codes in one launch with g_y's HLA codes, W's code pass in
one with g_y's HQ codes) as ``hot``; ``streams``, the same kernels' work as before those launches (x's and W's codes
each on a stream of their own, their quantisers alone); ``pair_only`` and ``w_only``, one of the two launches each;
``full_grid`` (where the build has the sm_90a GEMM), ``hot`` with the g_w GEMM on CUTLASS's full persistent grid in
place of its balanced one (:func:`hot.backends.real.sm90_balanced_grid`); ``no_pdl`` (the same builds), ``hot`` with
the sm_90a GEMMs launched after the kernel before them ends, not as its programmatic dependents
(:func:`hot.backends.real.sm90_programmatic_launch`); ``fp8_gx``, ``hot`` with every 4-bit g_x GEMM on cuBLAS's
FP8 kernel, the small products' sm_90a INT8 one off (``RealBackend.small_gx_macs`` 0); ``wide_gx`` (the same
builds), ``hot`` with the INT8 g_x GEMM on small products of any width, not only where N is at most 4 K
(``RealBackend.small_gx_max_width`` unbounded); ``pingpong_half`` (the same
builds), ``hot`` with each small sm_90a product whose ping-pong grid would take more than half the SMs on the
cooperative kernel, data-parallel (:func:`hot.backends.real.sm90_pingpong_sm_share`); ``unrolled`` (any build),
``hot`` with the one-launch HLA quantisers' transform unrolled over a unit's channels
(:func:`hot.backends.real.hla_rolled_transform`).
The variants are then timed in turn, round after round (GPU time, the launch hidden behind a busy-wait), so clock
drift and other tenants land on all of them alike; each row reports the median over rounds of each round's median.

    python -m hot.bench.latency_ab OUT.json [ROUNDS [LAYER ...]]

For each LAYER named, every variant's kernels in its captured graph are also recorded, as
:func:`hot.bench.latency_timeline.kernel_timeline` gives them (the row's ``timelines``): the same captures as timed.
"""

from __future__ import annotations

import math
import statistics
import sys

import torch

from ..backends import HLASpec, HQSpec, InputCodes, layer_gradients_in_parts
from ..backends.real import (
    RealBackend,
    WeightCodes,
    hla_rolled_transform,
    sm90_balanced_grid,
    sm90_pingpong_sm_share,
    sm90_programmatic_launch,
)
from ..paper import paper_values
from ..results import write_json_atomic
from .latency import _cublas, _hot, hot_specs
from .timing import replayable, time_replays


def quantisers_as_data(
    backend: RealBackend, g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor, tokens: int
) -> tuple[HQSpec, HLASpec, WeightCodes, InputCodes]:
    """A figure layer's g_y specs (HQ, HLA) and its W and x as the captured backward reads them when they may share
    launches with g_y's quantisers: W's codes with the FP8 GEMM's column scales where it takes them, in the format
    the captured backward asks of the shared launch (int8 for the sm_90a INT8 g_x GEMM), x quantised."""
    specs = hot_specs(w.shape[0], tokens)
    hq, hla = specs.grad_output, specs.grad_output_hla
    columns = backend._gx_columns_from_quantiser(g_y, w, hq, torch.float32)
    int8 = backend._int8_gx_codes(g_y, w, hq, hla, torch.float32)
    w_codes, x_codes = WeightCodes(backend, w, hq, columns, int8), InputCodes(backend, x, specs.input_hla)
    return hq, hla, w_codes, x_codes


def _compositions(backend: RealBackend, g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor, tokens: int) -> dict:
    """The captured backward with x's codes and W's each made in the launch they share with g_y's codes or alone on
    their own stream (a plain callable in place of the data the backend reads: the same kernels, the same bits)."""
    hq, gy, w_codes, x_codes = quantisers_as_data(backend, g_y, w, x, tokens)

    def composed(pair: bool, fuse_w: bool) -> object:
        x_from = x_codes if pair else lambda: x_codes()
        w_from = w_codes if fuse_w else lambda: w_codes()
        return lambda: layer_gradients_in_parts(backend, g_y, w, x_from, hq, gy, torch.float32, False, w_from)

    return {"streams": composed(False, False), "pair_only": composed(True, False), "w_only": composed(False, True)}


def main(out: str, rounds: int = 7, timelines: tuple[str, ...] = ()) -> None:
    """Times the variants of every row of the figure for ``rounds`` rounds and writes them to ``out`` (JSON), with
    each variant's kernel timeline for the layers named in ``timelines``."""
    from .latency_timeline import REPLAYS, kernel_timeline

    if not torch.cuda.is_available():
        raise SystemExit("python -m hot.bench.latency_ab times CUDA graphs: it needs a CUDA GPU, and none is visible")
    backend = RealBackend()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as the figure's
    rows = []
    for row in paper_values()["latency_figure"]["rows"]:
        tokens, out_f, in_f = int(row["L"]), int(row["O"]), int(row["I"])
        gen = torch.Generator(device="cuda").manual_seed(tokens + out_f + in_f)
        g_y = torch.randn(tokens, out_f, device="cuda", generator=gen)
        x = torch.randn(tokens, in_f, device="cuda", generator=gen)
        w = torch.randn(out_f, in_f, device="cuda", generator=gen) * 0.02
        runs = {}
        runs["fp32"], _ = replayable(_cublas(g_y, w, x))
        variants = {"hot": _hot(backend, g_y, w, x, tokens)["hot"], **_compositions(backend, g_y, w, x, tokens)}
        for name, fn in variants.items():
            runs[name], mode = replayable(fn)
            assert mode == "graph", (name, mode)
        if backend.gemm_for(g_y.device) == "cutlass-sm90":  # the g_w GEMM is the sm_90a one
            with sm90_balanced_grid(backend, False):  # the grid is fixed when the graph is captured
                runs["full_grid"], mode = replayable(_hot(backend, g_y, w, x, tokens)["hot"])
            assert mode == "graph", ("full_grid", mode)
            with sm90_programmatic_launch(backend, False):  # as is the launch's dependency
                runs["no_pdl"], mode = replayable(_hot(backend, g_y, w, x, tokens)["hot"])
            assert mode == "graph", ("no_pdl", mode)
            small, backend.small_gx_macs = backend.small_gx_macs, 0  # and the g_x GEMM's route
            try:
                runs["fp8_gx"], mode = replayable(_hot(backend, g_y, w, x, tokens)["hot"])
            finally:
                backend.small_gx_macs = small
            assert mode == "graph", ("fp8_gx", mode)
            width, backend.small_gx_max_width = backend.small_gx_max_width, math.inf  # INT8 at every width
            try:
                runs["wide_gx"], mode = replayable(_hot(backend, g_y, w, x, tokens)["hot"])
            finally:
                backend.small_gx_max_width = width
            assert mode == "graph", ("wide_gx", mode)
            with sm90_pingpong_sm_share(backend, 0.5):
                runs["pingpong_half"], mode = replayable(_hot(backend, g_y, w, x, tokens)["hot"])
            assert mode == "graph", ("pingpong_half", mode)
        with hla_rolled_transform(backend, False):  # the kernel is chosen when the graph is captured
            runs["unrolled"], mode = replayable(_hot(backend, g_y, w, x, tokens)["hot"])
        assert mode == "graph", ("unrolled", mode)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                times[name].append(time_replays(run, 50, 5, hide_launch=True))
        result = {"model": row["model"], "layer": row["layer"], "L": tokens, "O": out_f, "I": in_f}
        result |= {f"{name}_device_us": statistics.median(ts) for name, ts in times.items()}
        result["rounds"] = times
        if row["layer"] in timelines:
            result["timelines"] = {name: kernel_timeline(run, REPLAYS) for name, run in runs.items()}
        rows.append(result)
        print(
            f"{row['model']:>22} {row['layer']:<15}",
            "  ".join(f"{name} {result[f'{name}_device_us']:6.1f}" for name in runs),
            flush=True,
        )
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    write_json_atomic(out, {"environment": env, "rounds": rounds, "rows": rows})


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 7, tuple(sys.argv[3:]))
