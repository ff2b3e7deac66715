# Stage 4b: HOT against bf16 / torchao on one (Hopper) GPU with `hot bench`, each comparison side by side in one
# process. Like latency: after the kernel tests; without a GPU each writes {"status": "not measured: no GPU"}.
# bench_latency: per ViT-B layer, HOT's backward against the bf16 cuBLAS GEMMs, and the quantisers' bandwidth.
# bench_end_to_end: ViT-B/16 training steps (bf16, bf16 + compile, torchao float8, HOT eager and compiled) with
# peak memory, and the fake-vs-real training equivalence check.


rule bench_latency:
    input:
        tests=f"{R}/kernels/tests.json",
    output:
        f"{R}/bench/latency.json",
    params:
        **slots("latency"),
    log:
        f"{LOGS}/bench_latency.log",
    benchmark:
        f"{BENCH}/bench_latency.tsv"
    threads: config["resources"]["latency"]["threads"]
    resources:
        **res("latency"),
    shell:
        "hot slots --gpus {params.gpus} --jobs-per-gpu {params.jobs_per_gpu} --job bench_latency --"
        " hot bench --sections layers,kernels --out {output:q} > {log:q} 2>&1"


rule bench_end_to_end:
    input:
        tests=f"{R}/kernels/tests.json",
    output:
        f"{R}/bench/end_to_end.json",
    params:
        **slots("end_to_end"),
    log:
        f"{LOGS}/bench_end_to_end.log",
    benchmark:
        f"{BENCH}/bench_end_to_end.tsv"
    threads: config["resources"]["end_to_end"]["threads"]
    resources:
        **res("end_to_end"),
    shell:
        "hot slots --gpus {params.gpus} --jobs-per-gpu {params.jobs_per_gpu} --job bench_end_to_end --"
        " hot bench --sections step,equivalence --out {output:q} > {log:q} 2>&1"
