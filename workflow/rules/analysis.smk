# Stage 4b: deterministic analyses of the paper's own models (no training): the memory accounting
# (Table 1's memory column, the memory figure) and the backward bit-operations (Table 2's cost column).

MEMORY_VIEWS = ("memory_table1", "memory_figure")
# FP and the HOT presets whose saved buffers differ (LQS changes no buffer), by hot's names
MEMORY_METHODS = ",".join(name for name in ("fp", *HOT_METHODS) if not PRESETS[name].lqs)


rule memory:
    output:
        f"{R}/analysis/{{view}}.json",
    params:
        methods=MEMORY_METHODS,
        model=lambda w: config["analysis"][w.view]["model"],
        batch_size=lambda w: config["analysis"][w.view]["batch_size"],
        num_classes=lambda w: config["analysis"][w.view]["num_classes"],
    log:
        f"{LOGS}/analysis/{{view}}.log",
    benchmark:
        f"{BENCH}/analysis/{{view}}.tsv"
    wildcard_constraints:
        view="|".join(MEMORY_VIEWS),
    threads: config["resources"]["analysis"]["threads"]
    resources:
        **res("analysis"),
    shell:
        "OMP_NUM_THREADS={threads} hot memory --model {params.model:q} --batch-size {params.batch_size:q}"
        " --num-classes {params.num_classes:q} --methods {params.methods} --out {output:q} > {log:q} 2>&1"


rule gbops:
    output:
        f"{R}/analysis/gbops.json",
    params:
        model=config["analysis"]["gbops"]["model"],
        ranks=",".join(str(r) for r in config["analysis"]["gbops"]["ranks"]),
    log:
        f"{LOGS}/analysis/gbops.log",
    benchmark:
        f"{BENCH}/analysis/gbops.tsv"
    threads: config["resources"]["analysis"]["threads"]
    resources:
        **res("analysis"),
    shell:
        "OMP_NUM_THREADS={threads} hot gbops --model {params.model:q} --ranks {params.ranks:q} --out {output:q}"
        " > {log:q} 2>&1"
