# Functions and constants shared by the rule files (which hold no functions). The runs themselves are data,
# config experiments -> workflow/lib/experiments.py -> PLAN.runs / PLAN.tables.

import json
import re
from pathlib import Path

from hot.config import PRESETS
from hot.gpu_slots import visible_devices
from hot.tables import TABLES, WITHOUT_FIGURE  # the one list of tables (name -> title)
from hot.train.config import HOT_METHODS

REAL_RUNS = any(run.uses_kernels for run in PLAN.runs.values())  # runs on the hot-kernels extension (real or auto)


def gpus(kind):
    """The GPUs a job of a kind runs on. The kernels are built and tested on a GPU: where the kernel tests ask for
    one, so does the build (on a cluster both then land on a GPU node, and `kernels.build: auto` builds there), and
    with real-quant runs both ask for at least one whatever the config says: those runs train only once the kernels
    passed their tests."""
    gpu = config["resources"][kind]["gpu"]
    if kind in ("kernels", "kernel_tests") and config["kernels"]["build"] != "never":
        gpu = max(gpu, config["resources"]["kernel_tests"]["gpu"], int(REAL_RUNS))
    return gpu


def res(kind):
    """The resources of a job kind from the config; a retried job (profiles set retries) gets more time and memory.

    ``gpu``: whole GPUs, the job's own (the profile's limit: one GPU, one such job at a time; SLURM's --gpus);
    ``gpu_shared``: GPUs the job shares with up to ``jobs_per_gpu`` - 1 others (``hot slots`` keeps at most that many
    on a device; ``--resources gpu_shared=<GPUs x jobs_per_gpu>`` caps them in Snakemake too); ``gpu_mem_mb``: the GPU
    memory one job needs (``--resources gpu_mem_mb=<MB of the GPUs>`` caps the jobs sharing them).
    """
    r = config["resources"][kind]
    gpu = gpus(kind)
    shared = gpu > 0 and r["jobs_per_gpu"] > 1
    return {
        "gpu": 0 if shared else gpu,
        "gpu_shared": gpu if shared else 0,
        "gpu_mem_mb": r["gpu_mem_mb"],
        "mem_mb": lambda wildcards, attempt: r["mem_mb"] * attempt,
        "runtime": lambda wildcards, attempt: r["runtime"] * attempt,
    }


def slots(kind):
    """``hot slots``' arguments for a job of a kind: its GPUs and how many jobs may share each (its params)."""
    r = config["resources"][kind]
    return {"gpus": gpus(kind), "jobs_per_gpu": r["jobs_per_gpu"], "steps_alone": r["steps_alone"]}


def missing_gpu(jobs):
    """The one line to stop on, before any job, where this run needs a GPU the machine lacks: a preset marked
    ``needs_gpu``, executed here (not submitted to a cluster, whose nodes have the GPUs), with a job to run that
    declares one, and no GPU visible (``hot slots``' view: CUDA_VISIBLE_DEVICES, else nvidia-smi); else None."""
    if not config["needs_gpu"] or not workflow.local_exec or visible_devices(os.environ):
        return None
    on_gpu = [job for job in jobs if job.resources.get("gpu", 0) or job.resources.get("gpu_shared", 0)]
    if not on_gpu:
        return None
    return (
        f"preset={config['preset']} needs a CUDA GPU ({len(on_gpu)} of the jobs to run use one) and none is visible "
        "here (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES is empty): run it on a GPU machine; on the CPU, "
        "preset=embedded or preset=smoke_cpu (--config needs_gpu=False runs it anyway)"
    )


def run_keys():
    """A wildcard constraint that matches exactly the planned training runs (``stage/name``)."""
    return "|".join(re.escape(key) for key in PLAN.runs) or "(?!)"


def train_inputs(wildcards):
    """What a run needs: its dataset's status, the run it starts from, and (backend real or auto) the kernel tests;
    with ``gpu_checks_first``, every run also waits for the kernel tests and the latency measurement (an exclusive
    GPU job that started after shared runs would stop new ones from starting until those ended)."""
    run = PLAN.runs[wildcards.run]
    found = {"data": f"{R}/data/{run.dataset}.json"}
    if run.init_run:
        found["init"] = f"{R}/{run.init_run}/model.pt"
        found["init_metrics"] = f"{R}/{run.init_run}/metrics.json"
    if run.uses_kernels or config["gpu_checks_first"]:
        found["kernel_tests"] = f"{R}/kernels/tests.json"
    if config["gpu_checks_first"]:
        found["latency"] = f"{R}/latency/latency.json"
    return found


def train_settings(wildcards, input):
    """The run's ``hot train`` config as JSON (the base run's model.pt filled in where it starts from one)."""
    run = PLAN.runs[wildcards.run]
    values = dict(run.settings)
    if run.init_run:
        values["init"] = input.init
    return json.dumps(values, sort_keys=True)


def plan_json():
    """The planned runs and tables as `hot plan` reads them (``--plan``)."""
    runs = {
        key: {"settings": dict(run.settings), "backend": run.backend, "init_run": run.init_run}
        for key, run in PLAN.runs.items()
    }
    return json.dumps({"preset": config["preset"], "runs": runs, "tables": PLAN.tables}, indent=1, sort_keys=True) + "\n"


# `hot tables` (src/hot/commands/tables.py) and the code every table shares
TABLE_CODE = ["src/hot/commands/tables.py", *(f"src/hot/tables/{m}.py" for m in ("__init__", "common", "render", "plots"))]
PAPER_VALUES = "src/hot/data/paper_values.yaml"
# A GPU measurement committed with the sources: the latency figure draws it, labelled so, where a run measures none.
# The latest kernels' (an H200's; the H100's older one is kernels/results/latency_h100.json).
COMMITTED_LATENCY = "kernels/results/latency_h200.json"
ANALYSIS_INPUTS = {  # table -> role -> results file of the analysis stages
    "table1": {"memory": f"{R}/analysis/memory_table1.json", "latency": f"{R}/latency/latency.json"},
    "table2": {"gbops": f"{R}/analysis/gbops.json"},
    "latency_figure": {"latency": f"{R}/latency/latency.json", "committed_latency": COMMITTED_LATENCY},
    "memory_figure": {"memory": f"{R}/analysis/memory_figure.json"},
}


def table_results(table):
    """role -> results file: the table's training runs (metrics.json) and analysis outputs."""
    roles = {role: f"{R}/{key}/metrics.json" for role, key in PLAN.tables.get(table, {}).items()}
    roles.update(ANALYSIS_INPUTS.get(table, {}))
    return roles


def table_options(table):
    options = dict(config["checks"])
    if table == "table4":
        options["paper_rows"] = config["experiments"]["table4"]["paper_rows"]
    if table == "table3":
        options["lora_rank"] = config["experiments"]["table3"]["lora"]["rank"]
    return json.dumps(options, sort_keys=True)


def table_files(tables):
    files = []
    for t in tables:
        files += [f"{T}/{t}.{ext}" for ext in ("md", "csv", "tex")]
        if t not in WITHOUT_FIGURE:
            files.append(f"{T}/figures/{t}.png")
    return files


def result_args(wildcards, input):
    """``--input ROLE=PATH`` for every named input of a table rule but its code and the paper values, as a list of
    arguments for the shell command to quote one by one (``{params.inputs:q}``)."""
    return [
        arg for role, path in input.items() if role not in ("code", "paper") for arg in ("--input", f"{role}={path}")
    ]
