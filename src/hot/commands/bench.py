"""``hot bench``: HOT against bf16 cuBLAS and torchao float8 on one Hopper GPU, in one JSON.

The JSON goes to ``kernels/results/bench_<gpu slug>_<short commit>.json`` of the checkout (``--out`` elsewhere),
with the environment (GPU, versions, the code's git commit, the date) inside, rewritten atomically after every
section so a run cut short keeps what it measured. The run ends with a summary and a comparison, metric by metric,
with the last committed run on the same GPU (:mod:`hot.bench.report`), regressions of more than 10 % flagged.

Sections (``--sections``, default the first four), each a key of the JSON:

- ``copy_bandwidth`` (with ``layers`` or ``kernels``): a kernel's copy of a large random bf16 buffer (``x * 1``
  into another), GB/s of bytes read + written, the ceiling of any memory-bound quantiser; ``memcpy_gbps`` the same
  copy as a memcpy, which a CUDA graph runs slower (:func:`hot.bench.timing.copy_bandwidth`).
- ``layers`` (:mod:`hot.bench.kernels`): ViT-B/16's qkv, proj, fc1, fc2 at L = batch · 197, bf16 g_y, x, W.
  ``bf16``: the two cuBLAS backward GEMMs; ``hot_backward``: ``HOTMethod.backward_gemms`` of the real backend
  from the ABC codes made once beforehand (backward never reads x); ``hot_forward_abc``: ``pack_input`` alone
  (the forward's extra cost); the stages (fused g_y quantiser, weight quantiser, FP8 g_x GEMM, INT8 g_w GEMM).
  Also the measured FP8 (``torch._scaled_mm``) and INT8 (``torch._int_mm``) GEMM rates and an arithmetic limit:
  what bf16 / HOT could reach if HOT's GEMMs ran at the measured FP8 rate and its g_y transform at copy bandwidth
  (g_y read once); and g_y's budget: the time left to its quantisers for HOT to tie bf16 beside its two GEMMs
  as measured (and beside the weight quantiser too), as the fraction of copy bandwidth it asks of g_y read once and
  read twice (the spec's HLA scale spans L, so each code needs a statistic of all of g_y).
- ``kernels``: the fused g_y quantiser's and ``pack_input``'s achieved bandwidth, as a fraction of the copy.
- ``step`` (:mod:`hot.bench.step`): end-to-end ViT-B/16 training steps (AdamW, bf16 autocast): bf16 eager and
  compiled, torchao float8 (tensorwise, compiled), HOT (real, ABC, LQS) eager and compiled, and eager with the
  classifier exact; median step time and peak memory. Each variant runs in a fresh Python process
  (:mod:`hot.bench.step_worker`), as a training run would, so no variant inherits another's compiled graphs,
  imports or allocator state; ``--step-in-process`` runs them one after another in this process instead.
- ``equivalence`` (:mod:`hot.bench.equivalence`): a tiny ViT trained in fp32 with the fake and the real backend
  from the same weights on the same batches; their losses must agree to 1e-3 relative, and every code of the three
  quantisers must equal the CPU reference's.
- ``stages`` (asked for by name): each piece of the real backward alone per ViT-B layer, the fused g_y quantiser
  against the separate ones, and the raw cuBLAS GEMMs.
- ``sm90_gemm`` (asked for by name): every variant of the sm_90a INT8 GEMM against ``_int_mm`` and ``_scaled_mm``.

Kernel timings are medians of CUDA-event-timed CUDA-graph replays (:func:`hot.bench.timing.time_us`). Without a
GPU the command writes ``{"status": "not measured: no GPU", "environment": …}`` and exits 0.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ..backends import create_backend
from ..bench.equivalence import code_mismatches, equivalence
from ..bench.kernels import (
    TOKENS,
    VIT_B_LAYERS,
    gw_route_times,
    measure_layer,
    sm90_gemm_variants,
    stage_breakdown,
    vit_b_rows,
)
from ..bench.report import (
    BANDWIDTH_TARGET,
    compare,
    comparison_lines,
    gpu_slug,
    previous_run,
    result_name,
    step_summary,
    summary_lines,
)
from ..bench.step import STEP_CLASSES, STEP_MODEL, STEP_VARIANTS, free_memory, step_variant
from ..bench.step_worker import measure_in_fresh_process, worker_request
from ..bench.timing import copy_bandwidth
from ..config import GEMMS, HOTConfig
from ..hla import TokenGrid
from ..methods import HOTMethod, create_method
from ..results import environment, error_text, git_toplevel, git_tracked, write_json_atomic, write_status
from ..rounding import HASHES, SPEC_HASH
from ._arguments import positive_int, split_list

SECTIONS = ("layers", "kernels", "step", "equivalence", "stages", "sm90_gemm")
DEFAULT_SECTIONS = SECTIONS[:4]  # stages and sm90_gemm: the kernels' own breakdown, asked for by name


def _choices(text: str, known: Sequence[str], what: str) -> list[str]:
    names = split_list(text)
    if not names:
        raise argparse.ArgumentTypeError(f"no {what} given; known {what}s: {', '.join(known)}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {what}{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"known {what}s: {', '.join(known)}"
        )
    return [n for n in known if n in names]  # the canonical order, duplicates dropped


def parse_sections(text: str) -> list[str]:
    """``layers,step`` -> ["layers", "step"]; an unknown name is an error that names it."""
    return _choices(text, SECTIONS, "section")


def parse_variants(text: str) -> list[str]:
    return _choices(text, STEP_VARIANTS, "step variant")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sections",
        type=parse_sections,
        default=list(DEFAULT_SECTIONS),
        help=f"comma-separated, of {','.join(SECTIONS)} (default: {','.join(DEFAULT_SECTIONS)})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the JSON written (default: kernels/results/bench_<gpu>_<commit>.json of the checkout)",
    )
    parser.add_argument(
        "--commit",
        default=None,
        help="the code's commit, recorded and in the default file name (default: git's, where the tree is a checkout)",
    )
    parser.add_argument("--batch", type=int, default=128, help="images per batch (layers: L = batch · 197)")
    parser.add_argument("--reps", type=int, default=50, help="timed CUDA-graph replays per kernel (median)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed replays first")
    parser.add_argument("--copy-gib", type=float, default=1.0, help="buffer of the copy-bandwidth measurement")
    parser.add_argument(
        "--step-variants",
        type=parse_variants,
        default=list(STEP_VARIANTS),
        help=f"comma-separated, of {','.join(STEP_VARIANTS)}",
    )
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per variant (median)")
    parser.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first (compilation happens here)")
    parser.add_argument(
        "--step-in-process",
        action="store_true",
        help="run the step variants one after another in this process (default: each in a fresh process)",
    )
    parser.add_argument(
        "--step-timeout",
        type=positive_int,
        default=1800,
        help="seconds a step variant's process may run before it is killed and recorded as an error",
    )
    parser.add_argument("--equiv-steps", type=int, default=20, help="AdamW steps of the equivalence check")
    parser.add_argument("--equiv-batch", type=int, default=64, help="images per batch of the equivalence check")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random tensors, models and data")
    parser.add_argument(
        "--fused-grad-output",
        action="store_true",
        help="HOTConfig.fused_grad_output: the real backend's fused two-pass g_y quantiser",
    )
    parser.add_argument(
        "--single-stream",
        action="store_true",
        help="HOTConfig.side_stream=False: a backward's g_w chain on the same stream as its g_x chain",
    )
    parser.add_argument(
        "--rounding-hash",
        default=SPEC_HASH,
        choices=HASHES,
        help="HOTConfig.rounding_hash: the spec's two finalisers a stochastic code, or one (the *_fmix32_* step "
        "variants set it themselves)",
    )
    parser.add_argument(
        "--gemm",
        default="auto",
        choices=GEMMS,
        help="HOTConfig.gemm, the real backend's GEMM family (cutlass-sm90 needs a build with the sm_90a GEMM)",
    )


def hot_config(args: argparse.Namespace) -> HOTConfig:
    """HOT as the benchmark runs it: real backend, ABC, the backend options given."""
    return HOTConfig(
        backend="real",
        abc=True,
        seed=args.seed,
        gemm=args.gemm,
        fused_grad_output=args.fused_grad_output,
        side_stream=not args.single_stream,
        rounding_hash=args.rounding_hash,
    )


# --------------------------------------------------------------------------------------------- the run


def _layers_and_kernels(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    payload["copy_bandwidth"] = copy_bandwidth(args.copy_gib, args.reps, args.warmup)
    copy_gbps = payload["copy_bandwidth"]["gbps"]
    print(f"copy bandwidth {copy_gbps:.0f} GB/s", flush=True)
    method = create_method(hot_config(args))
    if not isinstance(method, HOTMethod):
        raise TypeError(f"expected the HOT method, got {type(method).__name__}")
    gemm_for = getattr(method.backend_for(torch.device("cuda")), "gemm_for", None)
    payload["environment"]["hot_kernels_gemm"] = gemm_for(torch.device("cuda")) if gemm_for else None
    rows = {r["layer"]: r for r in vit_b_rows()}
    for name in VIT_B_LAYERS:
        try:
            layer, kernel = measure_layer(
                name,
                int(rows[name]["O"]),
                int(rows[name]["I"]),
                args.batch,
                method,
                args.sections,
                copy_gbps,
                args.reps,
                args.warmup,
                args.seed,
            )
        except Exception as err:  # one layer failing (a kernel's shape limit, OOM) must not lose the others
            layer = kernel = {"error": error_text(err)}
        if "layers" in args.sections:
            payload.setdefault("layers", {})[name] = layer
            if "error" in layer:
                print(f"layer {name}: {layer['error'][:300]}", flush=True)
            else:
                print(
                    f"layer {name}: bf16 {layer['bf16_us']:.1f} us, hot {layer['hot_backward_us']:.1f} us "
                    f"(x{layer['speedup_vs_bf16']:.2f}, limit x{layer['arithmetic_limit']['limit']:.2f}; "
                    f"g_y's quantisers {layer['stages_us']['quantize_grad_output']:.1f} us of a "
                    f"{layer['grad_output_budget']['budget_us']:.1f} us budget)",
                    flush=True,
                )
        if "kernels" in args.sections:
            payload.setdefault("kernels", {"target_fraction_of_copy": BANDWIDTH_TARGET})[name] = kernel
        free_memory()
        save()


def _steps(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    step: dict[str, Any] = {
        "model": STEP_MODEL,
        "num_classes": STEP_CLASSES,
        "batch": args.batch,
        "image_size": 224,
        "optimizer": "AdamW(lr=1e-4)",
        "autocast": "bfloat16",
        "warmup_steps": args.warmup_steps,
        "steps": args.steps,
        "isolation": "one process for all variants" if args.step_in_process else "a fresh process per variant",
        "variants": {},
    }
    payload["step"] = step
    hot = hot_config(args).replace(lqs=True)
    for variant in args.step_variants:
        if args.step_in_process:
            try:
                step["variants"][variant] = step_variant(
                    variant, args.batch, args.steps, args.warmup_steps, args.seed, hot
                )
            except Exception as err:  # one variant failing (compile, OOM) must not lose the others
                step["variants"][variant] = {"error": error_text(err)}
            free_memory()
        else:  # a failing worker is its variant's error entry
            request = worker_request(variant, args.batch, args.steps, args.warmup_steps, args.seed, hot)
            step["variants"][variant] = measure_in_fresh_process(request, timeout_s=args.step_timeout)
        v = step["variants"][variant]
        print(f"step {variant}: " + (f"{v['step_ms']:.1f} ms" if "step_ms" in v else str(v)[:300]), flush=True)
        step.update(step_summary(step["variants"]))
        save()


def _equivalence(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    try:
        options = {
            "gemm": args.gemm,
            "fused_grad_output": args.fused_grad_output,
            "side_stream": not args.single_stream,
        }
        hash_ = args.rounding_hash
        result = equivalence(
            "cuda", args.equiv_steps, args.equiv_batch, seed=args.seed, real_options=options, rounding_hash=hash_
        )
        # Tells a code difference from an accumulation-order one: the real backend's codes against the CPU
        # reference's, which must all agree. Shapes: vit_tiny_fmnist's fc1.
        grid = TokenGrid(prefix=1, height=7, width=7)
        result["code_mismatches"] = code_mismatches(
            "cuda", args.equiv_batch * 50, 128, 64, 50, args.seed, grid=grid, real_options=options, rounding_hash=hash_
        )
        result["passed"] = result["passed"] and not any(
            v for k, v in result["code_mismatches"].items() if k != "elements"
        )
    except Exception as err:
        result = {"error": error_text(err), "passed": False}
    payload["equivalence"] = result
    print(f"equivalence: {'passed' if result['passed'] else 'FAILED'}", flush=True)
    free_memory()
    save()


def _kernel_breakdown(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    backend = create_backend(hot_config(args))
    rows = {r["layer"]: r for r in vit_b_rows()}
    if "stages" in args.sections:
        payload["stages"] = {"L": args.batch * TOKENS}
        for name in VIT_B_LAYERS:
            try:
                payload["stages"][name] = stage_breakdown(
                    backend,
                    int(rows[name]["O"]),
                    int(rows[name]["I"]),
                    args.batch * TOKENS,
                    args.reps,
                    args.warmup,
                    args.rounding_hash,
                )
            except Exception as err:  # one layer failing must not lose the others
                payload["stages"][name] = {"error": error_text(err)}
            free_memory()
            save()
    if "sm90_gemm" in args.sections:
        try:
            payload["sm90_gemm"] = sm90_gemm_variants(backend.ops, args.reps, args.warmup) + gw_route_times(
                backend.ops, args.reps, args.warmup
            )
        except Exception as err:
            payload["sm90_gemm"] = {"error": error_text(err)}
        free_memory()
        save()


def _run_sections(args: argparse.Namespace, payload: dict[str, Any], save: Callable[[], None]) -> None:
    if {"layers", "kernels"} & set(args.sections):
        try:
            _layers_and_kernels(args, payload, save)
        except Exception as err:  # the copy, or the real backend not loading: record it, go on to the rest
            for section in {"layers", "kernels"} & set(args.sections):
                payload.setdefault(section, {})["error"] = error_text(err)
            print(f"layers/kernels: {error_text(err)[:300]}", flush=True)
            free_memory()
            save()
    if "step" in args.sections:
        _steps(args, payload, save)
    if "equivalence" in args.sections:
        _equivalence(args, payload, save)
    if {"stages", "sm90_gemm"} & set(args.sections):
        try:
            _kernel_breakdown(args, payload, save)
        except Exception as err:  # the real backend not loading
            for section in {"stages", "sm90_gemm"} & set(args.sections):
                payload[section] = {"error": error_text(err)}
            save()


def results_directory() -> Path:
    """``kernels/results`` of the checkout holding this package, else of the working directory."""
    root = git_toplevel()
    return (root if root is not None and (root / "kernels").is_dir() else Path.cwd()) / "kernels" / "results"


def run(args: argparse.Namespace) -> int:
    env = environment()
    if args.commit:  # a copy of the tree whose .git is not the code's (a GPU machine's upload) names it
        env.update(git_commit=args.commit, git_dirty=False)
    directory = results_directory()
    if args.out is None:
        args.out = directory / result_name(env["gpu"], env["git_commit"], env["git_dirty"])
    if not torch.cuda.is_available():
        write_status(args.out, "not measured: no GPU", env)
        return 0
    # Read before this run writes: its file may replace a committed one of the same commit.
    previous = previous_run(directory, env["gpu"], args.out, git_tracked(directory))
    torch.manual_seed(args.seed)
    payload: dict[str, Any] = {
        "status": "partial",
        "environment": env,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"},
        "method": (
            "kernels: median of CUDA-event-timed CUDA-graph replays after warm-up, microseconds; "
            "steps: median of CUDA-event-timed training steps, milliseconds"
        ),
    }

    def save() -> None:
        write_json_atomic(args.out, payload)

    save()
    _run_sections(args, payload, save)
    payload["status"] = "measured"
    save()
    print("\n".join(summary_lines(payload)))
    if previous is None:
        print(f"no earlier run on {gpu_slug(env['gpu'])} under {directory} to compare with")
    else:
        path, old = previous
        print("\n".join(comparison_lines(compare(old, payload), str(path), old, payload)))
    print(f"wrote {args.out}")
    return 0
