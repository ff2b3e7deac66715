# Stage 1: build the hot-kernels CUDA extension (pip install --no-build-isolation ./kernels) where the job runs.
# kernels.build: auto builds there if a CUDA GPU is visible to the job (the rule asks for one where the kernel tests
# or real-quant runs need the kernels, see res() in common.smk); without one nothing is built and
# results/kernels/build.json says why.

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
    script:
        "../scripts/kernels.py"
