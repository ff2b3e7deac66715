# Stage 3c: ablation runs (Table 2's rank sweep, Table 3's HOT x LoRA, the follow-up's keep-ratio sweep).
# Each run: results/ablations/<name>/{settings.json, metrics.json, model.pt}; the settings are the run's hot train config.


rule ablations:
    input:
        unpack(train_inputs("ablations")),
    output:
        metrics=f"{R}/ablations/{{name}}/metrics.json",
        model=f"{R}/ablations/{{name}}/model.pt",
    params:
        settings=train_settings("ablations"),
        tests=train_tests_arg,
    log:
        f"{LOGS}/ablations/{{name}}.log",
    benchmark:
        f"{BENCH}/ablations/{{name}}.tsv"
    wildcard_constraints:
        name=run_names("ablations"),
    threads: config["resources"]["train"]["threads"]
    resources:
        **res("train"),
    shell:
        "OMP_NUM_THREADS={threads} GPUS={resources.gpu} bash workflow/scripts/train.sh {output.metrics:q}"
        " {params.settings:q} {params.tests:q} > {log:q} 2>&1"
