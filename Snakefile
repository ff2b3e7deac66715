# HOT: Hadamard-based Optimized Training — the reproduction workflow (Snakemake >= 9).
#
#   snakemake --cores 4                            full scale (config.yaml): kernels -> tests -> training -> tables
#   snakemake --cores 2 --config preset=embedded   offline CPU preset (config/embedded.yaml over config.yaml)
#   snakemake --cores 4 table2                     one table and only what it needs
#   snakemake --report report.html                 HTML report with the tables and figures
#
# Every job calls the `hot` CLI; the experiments are data in the config (workflow/lib/experiments.py expands them).
# docs/workflow.md describes the DAG, the presets and the outputs.

import os
import shutil
import sys
from pathlib import Path

import jsonschema
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

min_version("9.0")

configfile: "config.yaml"

# A preset names a file: check the name before it becomes a path (preset=../../x must not be read).
PRESETS = ("full", *sorted(p.stem for p in Path("config").glob("*.yaml")))
if config.get("preset", "full") not in PRESETS:
    raise WorkflowError(f"unknown preset {config['preset']!r}; known presets: {', '.join(PRESETS)}")
if config.get("preset", "full") != "full":
    configfile: f"config/{config['preset']}.yaml"

try:
    validate(config, "workflow/schemas/config.schema.yaml")
except WorkflowError as err:
    # snakemake's message appends the whole schema (hundreds of lines); the key's path and the problem are enough.
    if not isinstance(err.__context__, jsonschema.ValidationError):
        raise
    problem = jsonschema.exceptions.best_match([err.__context__])
    raise WorkflowError(f"Error validating config: {problem.json_path}: {problem.message}") from None

if shutil.which("hot") is None:
    raise WorkflowError(
        "the `hot` command is not on PATH: activate the project's environment (source .venv/bin/activate) "
        "or run through `bash tasks.sh main`"
    )
sys.path.insert(0, os.path.join(workflow.basedir, "workflow", "lib"))

from experiments import plan as _plan  # noqa: E402

PLAN = _plan(config)
R = config["results_dir"]
T = config["tables_dir"]
LOGS = f"{R}/logs"
BENCH = f"{R}/benchmarks"


report: "workflow/report/workflow.rst"


container: config["container"]  # used with --sdm apptainer (the cluster profile); ignored otherwise


include: "workflow/rules/common.smk"
include: "workflow/rules/kernels.smk"
include: "workflow/rules/kernel_tests.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/finetune.smk"
include: "workflow/rules/ablations.smk"
include: "workflow/rules/latency.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/tables.smk"


rule all:
    default_target: True
    input:
        f"{T}/summary.md",
        table_files(TABLES),
        f"{R}/bench/latency.json",  # no table reads these two; listed so the default run measures them
        f"{R}/bench/end_to_end.json",
