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

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")

sys.path.insert(0, os.path.join(workflow.basedir, "workflow", "lib"))

import config_schema  # noqa: E402
from experiments import plan as _plan  # noqa: E402


configfile: "config.yaml"


# A preset names a file: check the name before it becomes a path (preset=../../x must not be read).
PRESETS = config_schema.presets()
if config.get("preset", config_schema.FULL) not in PRESETS:
    raise WorkflowError(f"unknown preset {config['preset']!r}; known presets: {', '.join(PRESETS)}")
if config.get("preset", config_schema.FULL) != config_schema.FULL:

    configfile: f"config/{config['preset']}.yaml"


# The schema's names (methods, datasets, …) come from `hot` (workflow/lib/config_schema.py); the message is the
# key's path and the problem, not a dump of the whole schema.
try:
    config_schema.validate(config)
except config_schema.ConfigError as err:
    raise WorkflowError(f"Error validating config: {err}") from None

if shutil.which("hot") is None:
    raise WorkflowError(
        "the `hot` command is not on PATH: activate the project's environment (source .venv/bin/activate) "
        "or run through `bash tasks.sh main`"
    )

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
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/latency.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/plan.smk"


onstart:
    # A preset that needs a GPU, on a machine without one: one line, before any job runs (not on dry runs, which
    # only plan, nor where a cluster executor submits the jobs to GPU nodes).
    if (missing := missing_gpu(workflow.dag.needrun_jobs())) is not None:
        sys.exit(missing)


BENCH_OUTPUTS = [f"{R}/bench/latency.json", f"{R}/bench/end_to_end.json"]


rule all:
    default_target: True
    input:
        f"{T}/summary.md",
        table_files(TABLES),
        BENCH_OUTPUTS if config["bench"] else [],  # no table reads them; listed so the default run measures them
        f"{R}/plan.json",  # the planned runs, for `hot plan`
