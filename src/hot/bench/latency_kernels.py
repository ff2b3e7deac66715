"""The kernels of one HOT backward at the latency figure's own shapes, and how long each runs: what
``kernels/results/latency_kernels_h100_2026-11-27.txt`` lists. On a GPU machine with the kernels built:

    python -m hot.bench.latency_kernels > census.txt

For three rows of the figure (ResNet-50 layer1.conv1, ViT-B fc1, EfficientFormer-L7 stages.3.proj at the paper's
L), the full backward (`hot`), each stage of `hot.bench.latency` and the captured backward's two shared launches
(W's passes with g_y's HQ rows, x's and g_y's HLA quantisers), called eagerly on one stream 10 times under
torch.profiler: kernels a call, and each kernel's mean device time.
"""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from ..backends.real import RealBackend
from ..paper import paper_values
from .latency import _hot
from .latency_ab import quantisers_as_data

LAYERS = ("layer1.conv1", "fc1", "stages.3.proj")
STAGES = (
    "hot",
    "hot.hq_quant_gy",
    "hot.hq_quant_w",
    "hot.hq_gemm_dequant",
    "hot.hla_quant_gy",
    "hot.hla_quant_x",
    "hot.hla_gemm_dequant",
)
CALLS = 10
SHARED = ("hot.hq_quant_w_and_gy", "hot.hla_quant_x_and_gy")  # the captured backward's two shared launches


def _shared_launches(backend: RealBackend, g_y: torch.Tensor, w: torch.Tensor, x: torch.Tensor, tokens: int) -> dict:
    """The launches a captured backward shares between quantisers: W's passes with g_y's HQ rows, x's and g_y's HLA
    quantisers."""
    hq, gy, w_codes, x_codes = quantisers_as_data(backend, g_y, w, x, tokens)
    return {
        SHARED[0]: lambda: backend._weight_and_grad_output_codes(w_codes, g_y, hq),
        SHARED[1]: lambda: backend._hla_quantize_pair(x_codes, g_y, gy, False),
    }


def main() -> None:
    rows = paper_values()["latency_figure"]["rows"]
    backend = RealBackend()
    for name in LAYERS:
        row = next(r for r in rows if r["layer"] == name)
        tokens, out_f, in_f = int(row["L"]), int(row["O"]), int(row["I"])
        g_y, x = torch.randn(tokens, out_f, device="cuda"), torch.randn(tokens, in_f, device="cuda")
        w = torch.randn(out_f, in_f, device="cuda") * 0.02
        fns = _hot(backend, g_y, w, x, tokens) | _shared_launches(backend, g_y, w, x, tokens)
        for stage in STAGES + tuple(SHARED):
            for _ in range(3):
                fns[stage]()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(CALLS):
                    fns[stage]()
                torch.cuda.synchronize()
            kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            print(
                f"== {row['model']} {name} T={tokens} O={out_f} I={in_f} {stage}: "
                f"{len(kernels) / CALLS:.1f} kernels/call"
            )
            totals: dict[str, list[float]] = {}
            for e in kernels:
                entry = totals.setdefault(e.name[:90], [0, 0.0])
                entry[0] += 1
                entry[1] += e.device_time
            for kernel, (count, total) in totals.items():
                print(f"   {count // CALLS:3d} x {total / count:7.2f} us  {kernel}")


if __name__ == "__main__":
    main()
