# Stage 3a: pre-training runs (supplement Table 4, and the embedded preset's base model for fine-tuning).
# Each run: results/pretrain/<name>/{settings.json, metrics.json, model.pt}; the settings are the run's hot train config.


rule pretrain:
    input:
        unpack(train_inputs("pretrain")),
    output:
        metrics=f"{R}/pretrain/{{name}}/metrics.json",
        model=f"{R}/pretrain/{{name}}/model.pt",
    params:
        settings=train_settings("pretrain"),
        tests=train_tests_arg,
    log:
        f"{LOGS}/pretrain/{{name}}.log",
    benchmark:
        f"{BENCH}/pretrain/{{name}}.tsv"
    wildcard_constraints:
        name=run_names("pretrain"),
    threads: config["resources"]["train"]["threads"]
    resources:
        **res("train"),
    shell:
        "OMP_NUM_THREADS={threads} GPUS={resources.gpu} bash workflow/scripts/train.sh {output.metrics:q}"
        " {params.settings:q} {params.tests:q} > {log:q} 2>&1"
