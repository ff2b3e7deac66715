# Stage 0: each dataset the runs read, found or fetched once (`hot data fetch`): results/data/<dataset>.json says
# "ready" (and where it was found) or "missing" with how to get it; the runs on a missing dataset are not attempted
# and their cells say why, everything else completes. Fashion-MNIST: the Debian package or torchvision; CIFAR-10/100:
# torchvision where the network allows, else data_dir; ImageNet: found under data_dir or not. A dataset only
# synthetic runs use (the smoke presets' `synthetic: true`) is recorded ready and never read.
# A local rule: on a cluster the submit host is the one with the network. After adding a dataset by hand, rerun
# with `-R data` (docs/workflow.md).

localrules:
    data,


rule data:
    output:
        f"{R}/data/{{dataset}}.json",
    params:
        data_dir=lambda wildcards: PLAN.datasets[wildcards.dataset],
        synthetic=lambda wildcards: "--synthetic" if wildcards.dataset in PLAN.synthetic_datasets else "",
    log:
        f"{LOGS}/data/{{dataset}}.log",
    benchmark:
        f"{BENCH}/data/{{dataset}}.tsv"
    wildcard_constraints:
        dataset="|".join(re.escape(d) for d in PLAN.datasets) or "(?!)",
    threads: 1
    resources:
        **res("data"),
    shell:
        "hot data fetch --dataset {wildcards.dataset:q} --root {params.data_dir:q} --out {output:q} --allow-missing"
        " {params.synthetic}"
        " > {log:q} 2>&1"
