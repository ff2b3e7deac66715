"""The `train` rule's script: one training run, or the reason it is not attempted.

A run is not attempted when something it needs is missing: its dataset (the `data` rule's status), the run it starts
from, or (``backend: real``) kernels that passed their tests. It then writes ``{"status": "not run: <why>"}`` (failed
kernel tests: ``"not run: kernel tests failed (N failed: <names>; log <path>)"``; kernels that could not be built or
tested here: ``"not measured: <why>"``) as its metrics and an empty model.pt, and the tables show that text in its
cells. ``backend: auto`` is resolved here, at job time: real where the kernels passed their tests, else fake; the
settings (and so metrics.json's ``config``) record the backend and ``backend_reason``. Otherwise the run's settings
become ``settings.json`` beside the metrics (a checkpoint left by a killed run is resumed only when they are
unchanged; changed settings start the run afresh) and the script replaces itself with ``hot train`` on GPUs of its
own, or shared with other runs (``resources.train.jobs_per_gpu``) through ``hot slots``; with more than one GPU, one
torchrun job over them.
"""

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any


def _status(path: str | None) -> str:
    return str(json.loads(Path(path).read_text()).get("status", "unknown")) if path else ""


def skip_reason(data: str, init_metrics: str | None = None, kernel_tests: str | None = None) -> str | None:
    """The metrics' status of a run that cannot train (from its inputs' status files), or None where it can."""
    dataset = json.loads(Path(data).read_text())
    if dataset.get("status") != "ready":
        return f"not run: {dataset.get('reason', dataset.get('status'))}"
    base = _status(init_metrics)
    if base.startswith("not "):
        return f"not run: the run it starts from did not train ({base})"
    tests = _status(kernel_tests)
    if kernel_tests and tests.startswith("failed"):
        return f"not run: kernel tests failed ({tests.removeprefix('failed').removeprefix(': ')})"
    if kernel_tests and tests != "passed":
        return f"not measured: {tests.removeprefix('not run: ')}"
    return None


def resolve_backend(settings: str, backend: str, kernel_tests: str | None) -> str:
    """The run's settings (JSON) with ``backend: auto`` resolved from the kernel tests' status; others unchanged."""
    if backend != "auto":
        return settings
    values = json.loads(settings)
    tests = _status(kernel_tests) or "not run: no kernel tests"
    if tests == "passed":
        values["hot"] = {**values.get("hot", {}), "backend": "real"}
        values["backend_reason"] = "auto: the hot-kernels extension passed its tests"
    else:
        values["hot"] = {**values.get("hot", {}), "backend": "fake"}
        values["backend_reason"] = f"auto: fake, the hot-kernels extension is unusable ({tests})"
    return json.dumps(values, sort_keys=True)


def write_settings(out: Path, settings: str) -> None:
    """``settings.json`` for ``hot train --config``; a checkpoint of different settings is discarded."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "settings.json"
    text = settings + "\n"
    if not path.is_file() or path.read_text() != text:
        (out / "checkpoint.pt").unlink(missing_ok=True)
    tmp = out / "settings.json.new"
    tmp.write_text(text)
    tmp.replace(path)


def command(out: Path, gpus: int, jobs_per_gpu: int = 1, steps_alone: bool = False) -> list[str]:
    """``hot train`` on ``gpus`` GPUs (``hot slots``), its own or each shared by up to ``jobs_per_gpu`` jobs (its steps
    and evaluation alone on the GPU with ``steps_alone``): one torchrun job over them where there are several."""
    alone = ["--steps-alone"] if steps_alone and jobs_per_gpu > 1 else []
    slots = ["hot", "slots", "--gpus", str(gpus), "--jobs-per-gpu", str(jobs_per_gpu), *alone, "--job", str(out), "--"]
    train = ["--out", str(out), "--config", str(out / "settings.json")]
    if gpus > 1:
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}"]
        return [*slots, *launch, "-m", "hot.cli", "train", *train]
    return [*slots, "hot", "train", *train]


def main(smk: Any) -> None:
    out = Path(smk.output.metrics).parent
    log = os.open(smk.log[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    backend, kernel_tests = smk.params.backend, smk.input.get("kernel_tests")
    reason = skip_reason(smk.input.data, smk.input.get("init_metrics"), kernel_tests if backend == "real" else None)
    if reason is not None:
        print(f"run skipped: {reason}")
        out.mkdir(parents=True, exist_ok=True)
        Path(smk.output.metrics).write_text(json.dumps({"status": reason}) + "\n")
        Path(smk.output.model).write_bytes(b"")
        return
    write_settings(out, resolve_backend(smk.params.settings, backend, kernel_tests))
    os.environ["OMP_NUM_THREADS"] = str(smk.threads)
    argv = command(out, int(smk.params.gpus), int(smk.params.jobs_per_gpu), bool(smk.params.steps_alone))
    print(shlex.join(argv), flush=True)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(snakemake)  # noqa: F821 (the object Snakemake's script directive defines)
