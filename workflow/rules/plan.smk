# The planned training runs as data: results/plan.json, every run's key (stage/name), its `hot train` settings and
# configured backend, and each table's role -> run key. `hot plan` reads it with a smoke run's measurements and
# prints the GPU-hours each table costs (README, "What the full scale costs"): written for any preset, by a local job
# that runs nothing (`snakemake --cores 1 results/plan.json` writes the full preset's without training anything).

localrules:
    plan,


rule plan:
    output:
        f"{R}/plan.json",
    params:
        plan=lambda wildcards: plan_json(),
        summary=f"{len(PLAN.runs)} runs planned for {len(PLAN.tables)} tables",
    log:
        f"{LOGS}/plan.log",
    script:
        "../scripts/plan.py"
