"""Interleaved A/B of the latency figure's HOT backward (``hot latency``'s rows at the paper's L) on one GPU.

Variants, each captured once in a CUDA graph: ``fp32`` (cuBLAS); HOT's captured backward as ``hot latency`` times
it (``Backend.layer_gradients``: the g_w chain, x's codes and W's codes on side streams, W's quantiser writing the
FP8 GEMM's column scales) as ``hot``; ``w_beside``, the same with the column scales made by their own launch in the
g_x chain (``hq_matmul``); ``w_in_chain``, W quantised in the g_x chain after g_y's codes, as before W had a stream
(its own stream is still forked and joined, empty);
and ``two``, ``hot`` with HLA's one-launch path off (memset, amax pass, code pass). The variants are then timed in
turn, round after round (GPU time, the launch hidden behind a busy-wait), so clock drift and other tenants land on
all of them alike; each row reports the median over rounds of each round's median.

    python -m hot.bench.latency_ab OUT.json [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys

import torch

from ..backends.real import RealBackend, hla_one_launch
from ..paper import paper_values
from ..results import write_json_atomic
from .latency import _cublas, _hot, hot_specs
from .timing import replayable, time_replays


def _compositions(backend: RealBackend, g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor, tokens: int) -> dict:
    """The captured backward composed as it was before each of its changes (the same kernels, so the same bits)."""
    specs = hot_specs(w.shape[0], tokens)
    hq, gy, inp = specs.grad_output, specs.grad_output_hla, specs.input_hla

    def x_codes() -> tuple:
        return backend.hla_quantize(x, inp)

    def g_w(codes: torch.Tensor, scale: torch.Tensor, x_c: torch.Tensor, x_s: torch.Tensor) -> torch.Tensor:
        return backend.hla_matmul(codes, scale, x_c, x_s, gy)

    def w_beside() -> tuple:
        def g_x(codes: torch.Tensor, scale: torch.Tensor, w_c: torch.Tensor, w_s: torch.Tensor) -> torch.Tensor:
            return backend.hq_matmul(codes, scale, w_c, w_s, hq)

        return backend.gradients(g_y, hq, gy, False, g_x, g_w, lambda: backend.hq_quantize_weight(w, hq), x_codes)

    def w_in_chain() -> tuple:
        def g_x(codes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            return backend.hq_matmul(codes, scale, *backend.hq_quantize_weight(w, hq), hq)

        return backend.gradients(g_y, hq, gy, False, g_x, g_w, tuple, x_codes)

    return {"w_beside": w_beside, "w_in_chain": w_in_chain}


def main(out: str, rounds: int = 7) -> None:
    """Times the variants of every row of the figure for ``rounds`` rounds and writes them to ``out`` (JSON)."""
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
        with hla_one_launch(backend, False):
            runs["two"], mode = replayable(variants["hot"])
        assert mode == "graph", ("two", mode)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                times[name].append(time_replays(run, 50, 5, hide_launch=True))
        result = {"model": row["model"], "layer": row["layer"], "L": tokens, "O": out_f, "I": in_f}
        result |= {f"{name}_device_us": statistics.median(ts) for name, ts in times.items()}
        result["rounds"] = times
        rows.append(result)
        print(
            f"{row['model']:>22} {row['layer']:<15}",
            "  ".join(f"{name} {result[f'{name}_device_us']:6.1f}" for name in runs),
            flush=True,
        )
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    write_json_atomic(out, {"environment": env, "rounds": rounds, "rows": rows})


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 7)
