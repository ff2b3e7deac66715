"""Whether a HOT option moves accuracy: the gpu preset's tiny-ViT run (full Fashion-MNIST, HOT on the real backend,
the head and ``fc`` layers exact) under named variants of ``hot train`` settings, several seeds each, all at once on
one GPU (twelve such runs share an H100 well: ``config/gpu.yaml``).

    python -m hot.bench.variant_accuracy OUT.json [--seeds 3] [--first-seed 0] [--epochs 6] [--against NAME=REF ...]
                                         NAME=[KEY=VALUE,...] ...
    python -m hot.bench.variant_accuracy OUT.json spec= fmix32=hot.rounding_hash=fmix32

Each variant is compared with the first one, or with the variant ``--against`` names for it (a ResNet variant with
the ResNet reference, say). The result holds every run's final top-1, each variant's mean and sample
standard deviation over its seeds, and each other variant's difference of means from the reference with the
standard error of that difference: an option counts as keeping accuracy where the difference lies within about
two standard errors, and the seed spread says how large a difference these runs could see at all. Each run's own
directory is kept beside OUT (``OUT_runs/NAME-sSEED``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..results import environment, write_json_atomic

# The gpu preset's table-2 HOT run (results/gpu/plan.json's ablations/fmnist-vit_tiny_fmnist-hot-r8-s*).
RUN = ["model=vit_tiny_fmnist", "dataset=fashion_mnist", "data_dir=resources", "recipe=embedded_pretrain",
       "method=hot", "hot.backend=real", "exclude=[head, fc]", "device=cuda", "amp=false"]  # fmt: skip


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``NAME=KEY=VALUE,KEY=VALUE`` (or ``NAME=`` for the settings as they are) -> (name, [KEY=VALUE, ...]); a comma
    inside brackets belongs to its value (``exclude=[head, fc]``)."""
    name, sep, sets = text.partition("=")
    if not sep or not name:
        raise ValueError(f"a variant is NAME=[KEY=VALUE,...], got {text!r}")
    parts, depth, start = [], 0, 0
    for i, char in enumerate(sets + ","):
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(sets[start:i].strip())
            start = i + 1
    return name, [p for p in parts if p]


def summarise(runs: dict[str, list[float]], against: dict[str, str] | None = None) -> dict[str, Any]:
    """Each variant's mean and sample standard deviation of top-1 over its seeds, and each other variant's difference
    of means from its reference (``against[name]``, else the first variant) with the standard error of that
    difference; a reference is compared with nothing."""
    names = list(runs)
    against = {name: (against or {}).get(name, names[0]) for name in names}
    references = set(against.values())
    summary: dict[str, Any] = {}
    for name in names:
        top1 = runs[name]
        summary[name] = {"mean": statistics.fmean(top1), "std": statistics.stdev(top1) if len(top1) > 1 else None}
    for name in names:
        ref = against[name]
        if name in references:
            continue
        diff = summary[name]["mean"] - summary[ref]["mean"]
        stds = (summary[name]["std"], summary[ref]["std"])
        se = None
        if None not in stds:
            se = (stds[0] ** 2 / len(runs[name]) + stds[1] ** 2 / len(runs[ref])) ** 0.5
        summary[name]["minus_" + ref] = {"diff_pp": diff, "standard_error_pp": se}
    return summary


USAGE = (
    "usage: python -m hot.bench.variant_accuracy OUT.json [--seeds N] [--first-seed N] [--epochs N] "
    "[--against NAME=REF ...] NAME=[KEY=VALUE,...] NAME=[KEY=VALUE,...] ..."
)


def parse_arguments(argv: list[str]) -> SimpleNamespace:
    """OUT, the variants and the options of :data:`USAGE` (a plain loop: argument parsing proper is hot.commands')."""
    numbers = {"--seeds": 3, "--first-seed": 0, "--epochs": 6}
    against: dict[str, str] = {}
    positional: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in numbers or arg == "--against":
            value = next(args, None)
            if value is None:
                raise SystemExit(f"{arg} needs a value\n{USAGE}")
            if arg == "--against":
                name, _, ref = value.partition("=")
                against[name] = ref
            elif value.isdigit():
                numbers[arg] = int(value)
            else:
                raise SystemExit(f"{arg} takes a non-negative integer, got {value!r}\n{USAGE}")
        else:
            positional.append(arg)
    if len(positional) < 3 or numbers["--seeds"] < 1:
        raise SystemExit(f"give OUT.json, at least two variants and one seed\n{USAGE}")
    variants = dict(parse_variant(v) for v in positional[1:])
    unknown = sorted({n for pair in against.items() for n in pair} - set(variants))
    if unknown:
        raise SystemExit(f"--against names no variant {unknown}; the variants: {sorted(variants)}")
    return SimpleNamespace(
        out=Path(positional[0]),
        variants=variants,
        against=against,
        seeds=numbers["--seeds"],
        first_seed=numbers["--first-seed"],
        epochs=numbers["--epochs"],
    )


def main(argv: list[str]) -> None:
    args = parse_arguments(argv)
    variants, against = args.variants, args.against
    work = args.out.with_name(args.out.stem + "_runs")  # each run's directory (metrics.json, model.pt)
    procs = []
    started = time.perf_counter()
    for name, sets in variants.items():
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            out = work / f"{name}-s{seed}"
            command = [sys.executable, "-m", "hot.cli", "train", "--out", str(out), "--no-resume"]
            for s in [*RUN, f"epochs={args.epochs}", f"seed={seed}", *sets]:
                command += ["--set", s]
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            procs.append((name, seed, out, subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)))
    print(f"{len(procs)} runs started", flush=True)
    runs: dict[str, list[float]] = {name: [] for name in variants}
    records = []
    for name, seed, out, proc in procs:
        _, err = proc.communicate()
        record: dict[str, Any] = {"variant": name, "seed": seed, "returncode": proc.returncode, "out": str(out)}
        metrics = out / "metrics.json"
        if proc.returncode == 0 and metrics.exists():
            m = json.loads(metrics.read_text())
            record.update(final_top1=m["final_top1"], wall_s=m["wall_time_s"], hot=m["config"]["hot"])
            record["backends"] = m["hot_backends"]
            runs[name].append(m["final_top1"])
        else:
            record["error"] = err[-2000:]
        records.append(record)
        print(f"{name} seed {seed}: {record.get('final_top1', record.get('error', '')[-300:])}", flush=True)
    finished = {name: top1 for name, top1 in runs.items() if top1}
    result = {
        "environment": environment(),
        "what": "final top-1 (%) of the gpu preset's tiny-ViT HOT run on full Fashion-MNIST under each variant",
        "settings": [*RUN, f"epochs={args.epochs}"],
        "variants": {name: sets for name, sets in variants.items()},
        "against": against,
        "seeds": args.seeds,
        "concurrent_runs": len(procs),
        "wall_s": time.perf_counter() - started,
        "runs": records,
        "summary": summarise(finished, against) if len(finished) == len(variants) else None,
    }
    write_json_atomic(args.out, result)
    print(json.dumps(result["summary"], indent=1), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
