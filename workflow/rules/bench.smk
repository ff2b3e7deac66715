# Stage 4b: HOT against bf16 / torchao on one (Hopper) GPU in one process (hot bench): per-layer backward, the
# quantisers' bandwidth, end-to-end ViT-B steps, fake/real equivalence. Like latency: after the kernel tests, on
# the latency rule's GPU resources; without a GPU it records {"status": "not measured: no GPU"}.


rule hopper_bench:
    input:
        tests=f"{R}/kernels/tests.json",
    output:
        f"{R}/bench/hopper.json",
    log:
        f"{LOGS}/hopper_bench.log",
    benchmark:
        f"{BENCH}/hopper_bench.tsv"
    threads: config["resources"]["latency"]["threads"]
    resources:
        **res("latency"),
    shell:
        "hot bench --out {output} > {log} 2>&1"
