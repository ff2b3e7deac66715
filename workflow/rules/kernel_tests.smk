# Stage 2: the kernels' GPU tests (pytest -m gpu tests/kernels, on GPUs of their own through `hot slots`). Status in
# results/kernels/tests.json: "passed", "failed: ..." or "not run: <reason>" (no GPU, not built); real-quant runs
# and latency wait on it.

KERNEL_TEST_FILES = sorted(str(p) for p in Path("tests/kernels").glob("*.py"))


rule kernel_tests:
    input:
        KERNEL_TEST_FILES,
        build=f"{R}/kernels/build.json",
    output:
        f"{R}/kernels/tests.json",
    params:
        junit=lambda w, output: os.path.join(os.path.dirname(output[0]), "junit.xml"),
        **slots("kernel_tests"),
    log:
        f"{LOGS}/kernel_tests.log",
    benchmark:
        f"{BENCH}/kernel_tests.tsv"
    threads: config["resources"]["kernel_tests"]["threads"]
    resources:
        **res("kernel_tests"),
    script:
        "../scripts/kernel_tests.py"
