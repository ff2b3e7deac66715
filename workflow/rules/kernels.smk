# Stage 1: build the hot-kernels CUDA extension (pip install --no-build-isolation ./kernels).
# Without a GPU (kernels.build: auto) nothing is built and results/kernels/build.json says why.

KERNEL_SOURCES = sorted(
    str(p)
    for p in Path("kernels").rglob("*")
    if p.is_file() and p.suffix in {".cu", ".cuh", ".cpp", ".h", ".hpp", ".py", ".toml", ".cfg"} and "build" not in p.parts
)


rule kernels:
    input:
        KERNEL_SOURCES,
    output:
        f"{R}/kernels/build.json",
    params:
        mode=config["kernels"]["build"],
    log:
        f"{LOGS}/kernels.log",
    benchmark:
        f"{BENCH}/kernels.tsv"
    threads: config["resources"]["kernels"]["threads"]
    resources:
        **res("kernels"),
    shell:
        "MAX_JOBS={threads} bash workflow/scripts/kernels.sh build {params.mode:q} {output:q} > {log:q} 2>&1"
