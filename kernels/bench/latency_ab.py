"""Interleaved A/B of the latency figure's HOT backward (``hot latency``'s rows at the paper's L) on one GPU.

Variants, each captured once in a CUDA graph: ``fp32`` (cuBLAS), and HOT's captured backward with W's quantiser on
its own stream (``w_stream``, as ``Backend.gradients`` queues it) or inside the g_x chain after g_y's HQ quantiser
(``w_inline``), each with HLA's one-launch path on (``one``) or off (``two``: memset, amax pass, code pass). The
variants are then timed in turn, round after round (GPU time, the launch hidden behind a busy-wait), so clock drift
and other tenants land on all of them alike; each row reports the median over rounds of each round's median.

    python kernels/bench/latency_ab.py OUT.json [ROUNDS]
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from hot.backends.real import RealBackend
from hot.bench.latency import _cublas
from hot.bench.timing import replayable, time_replays
from hot.config import HOTConfig
from hot.hla import hla_windows
from hot.methods import Keys, layer_specs
from hot.paper import paper_values


def hot_backward(backend: RealBackend, g_y, w, x, tokens: int, w_stream: bool):
    windows = hla_windows(tokens, "paper")
    specs = layer_specs(HOTConfig(hla_blocking="paper"), w.shape[0], windows, Keys(0, 0, 0))
    hq, gy, inp = specs.grad_output, specs.grad_output_hla, specs.input_hla

    def quant_w():
        return backend.hq_quantize_weight(w, hq)

    def g_x_from(codes, scale, w_codes, w_scale):
        if not w_stream:
            w_codes, w_scale = quant_w()
        return backend.hq_matmul(codes, scale, w_codes, w_scale, hq)

    def full():
        return backend.gradients(
            g_y,
            hq,
            gy,
            False,
            g_x_from,
            quant_w if w_stream else lambda: (None, None),
            lambda codes, scale, xc, xs: backend.hla_matmul(codes, scale, xc, xs, gy),
            lambda: backend.hla_quantize(x, inp),
        )

    return full


def main(out: str, rounds: int = 7) -> None:
    backend = RealBackend()
    ops = backend.ops
    rows = []
    for row in paper_values()["latency_figure"]["rows"]:
        tokens, out_f, in_f = int(row["L"]), int(row["O"]), int(row["I"])
        gen = torch.Generator(device="cuda").manual_seed(tokens + out_f + in_f)
        g_y = torch.randn(tokens, out_f, device="cuda", generator=gen)
        x = torch.randn(tokens, in_f, device="cuda", generator=gen)
        w = torch.randn(out_f, in_f, device="cuda", generator=gen) * 0.02
        runs = {}
        torch.backends.cuda.matmul.allow_tf32 = False
        runs["fp32"], _ = replayable(_cublas(g_y, w, x))
        for one in (True, False):
            ops.set_hla_one_launch(one)
            try:
                for w_stream in (True, False):
                    name = f"{'w_stream' if w_stream else 'w_inline'}_{'one' if one else 'two'}"
                    runs[name], mode = replayable(hot_backward(backend, g_y, w, x, tokens, w_stream))
                    assert mode == "graph", (name, mode)
            finally:
                ops.set_hla_one_launch(True)
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
    with open(out, "w") as f:
        json.dump({"environment": env, "rounds": rounds, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 7)
