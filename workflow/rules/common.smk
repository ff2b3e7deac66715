# Functions and constants shared by the rule files (which hold no functions). The runs themselves are data,
# config experiments -> workflow/lib/experiments.py -> PLAN.runs / PLAN.tables.

import json
import re

from hot.tables import TABLES  # the one list of tables


def res(kind):
    """The resources of a job kind from the config; a retried job (profiles set retries) gets more time and memory."""
    r = config["resources"][kind]
    return {
        "gpu": r["gpu"],
        "mem_mb": lambda wildcards, attempt: r["mem_mb"] * attempt,
        "runtime": lambda wildcards, attempt: r["runtime"] * attempt,
    }


def run_names(stage):
    """A wildcard constraint that matches exactly the stage's planned runs."""
    names = PLAN.stage_runs(stage)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def train_inputs(stage):
    def inputs(wildcards):
        run = PLAN.runs[f"{stage}/{wildcards.name}"]
        found = {}
        if run.init_run:
            found["init"] = f"{R}/{run.init_run}/model.pt"
        if run.real:
            found["kernel_tests"] = f"{R}/kernels/tests.json"
        return found

    return inputs


def train_settings(stage):
    def settings(wildcards, input):
        run = PLAN.runs[f"{stage}/{wildcards.name}"]
        values = dict(run.settings)
        if run.init_run:
            values["init"] = input.init
        return json.dumps(values, sort_keys=True)

    return settings


def train_tests_arg(wildcards, input):
    return input.get("kernel_tests", "")


NO_FIGURE = {"table5"}
TABLE_CODE = [f"src/hot/tables/{m}.py" for m in ("__init__", "cli", "common", "render", "plots")]
PAPER_VALUES = "src/hot/data/paper_values.yaml"
TABLE_TITLES = {
    "table1": "Supplement Table 1: incremental ablation of ABC and LQS",
    "table2": "Supplement Table 2: HLA rank r",
    "table3": "Supplement Table 3: HOT with LoRA",
    "table4": "Supplement Table 4: pre-training accuracy",
    "table5": "Supplement Table 5: additional FLOPs of HOT's backward",
    "latency_figure": "Appendix F Figure 1: per-layer backward latency",
    "memory_figure": "Memory figure: training memory of ViT-B",
    "keep_ratio_sweep": "Follow-up: HLA filter vs gradient dropout by keep ratio",
    "hla_blocking": "Ablation: HLA blocking (4×4 windows vs 16 consecutive positions)",
}
ANALYSIS_INPUTS = {  # table -> role -> results file of the analysis stages
    "table1": {"memory": f"{R}/analysis/memory_table1.json", "latency": f"{R}/latency/latency.json"},
    "table2": {"gbops": f"{R}/analysis/gbops.json"},
    "latency_figure": {"latency": f"{R}/latency/latency.json"},
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
        if t not in NO_FIGURE:
            files.append(f"{T}/figures/{t}.png")
    return files


def result_args(wildcards, input):
    """``--input ROLE=PATH`` for every named input of a table rule but its code and the paper values, as a list of
    arguments for the shell command to quote one by one (``{params.inputs:q}``)."""
    return [
        arg for role, path in input.items() if role not in ("code", "paper") for arg in ("--input", f"{role}={path}")
    ]
