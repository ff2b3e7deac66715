# Stage 3b: fine-tuning runs (supplement Table 1).
# Each run: results/finetune/<name>/{settings.json, metrics.json, model.pt}; the settings are the run's hot train config.


rule finetune:
    input:
        unpack(train_inputs("finetune")),
    output:
        metrics=f"{R}/finetune/{{name}}/metrics.json",
        model=f"{R}/finetune/{{name}}/model.pt",
    params:
        settings=train_settings("finetune"),
        tests=train_tests_arg,
    log:
        f"{LOGS}/finetune/{{name}}.log",
    benchmark:
        f"{BENCH}/finetune/{{name}}.tsv"
    wildcard_constraints:
        name=run_names("finetune"),
    threads: config["resources"]["train"]["threads"]
    resources:
        **res("train"),
    shell:
        "OMP_NUM_THREADS={threads} GPUS={resources.gpu} bash workflow/scripts/train.sh {output.metrics:q}"
        " {params.settings:q} {params.tests:q} > {log:q} 2>&1"
