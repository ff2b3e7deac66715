# Stage 3: the training runs, one rule over the stages: pretrain (Table 4, the fine-tuning base), finetune (Table 1),
# ablations (Tables 2 and 3, the keep-ratio sweep, the blocking ablation). Each run (wildcard `run`: stage/name, the
# planned runs exactly): results/<stage>/<name>/{settings.json, metrics.json, model.pt}, its settings being the run's
# hot train config. A run whose dataset, kernels or base run is missing is not attempted: its metrics say why.


rule train:
    input:
        unpack(train_inputs),
    output:
        metrics=f"{R}/{{run}}/metrics.json",
        model=f"{R}/{{run}}/model.pt",
    params:
        settings=train_settings,
        backend=lambda wildcards: PLAN.runs[wildcards.run].backend,
        **slots("train"),
    log:
        f"{LOGS}/{{run}}.log",
    benchmark:
        f"{BENCH}/{{run}}.tsv"
    wildcard_constraints:
        run=run_keys(),
    threads: config["resources"]["train"]["threads"]
    priority: lambda wildcards: PLAN.priority(wildcards.run)
    resources:
        **res("train"),
    script:
        "../scripts/train.py"
