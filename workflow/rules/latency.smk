# Stage 4a: per-layer backward latency on the GPU (hot latency). Without a GPU it records
# {"status": "not measured: no GPU"} and the latency figure and Table 1's acceleration column show that.


rule latency:
    input:
        tests=f"{R}/kernels/tests.json",
    output:
        f"{R}/latency/latency.json",
    params:
        **slots("latency"),
    log:
        f"{LOGS}/latency.log",
    benchmark:
        f"{BENCH}/latency.tsv"
    threads: config["resources"]["latency"]["threads"]
    resources:
        **res("latency"),
    shell:
        "hot slots --gpus {params.gpus} --jobs-per-gpu {params.jobs_per_gpu} --job latency --"
        " hot latency --out {output:q} > {log:q} 2>&1"
