"""The `kernel_tests` rule's script: the kernels' GPU tests (pytest -m gpu tests/kernels) on GPUs of their own.

Records ``{"status": ...}``: ``passed``, ``failed: see the kernel_tests log`` or ``not run: <why>`` (not built, no
GPU); real-quant runs train only after ``passed``.
"""

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available()


def not_run(build: str, gpu: Callable[[], bool]) -> str | None:
    """Why the tests cannot run (the status to record, from the build's status), or None where they run."""
    if build != "built":
        return f"not run: {build.removeprefix('not built: ')}"
    if not gpu():
        return "not run: no GPU"
    return None


def main(smk: Any) -> None:
    build = json.loads(Path(smk.input.build).read_text())["status"]
    with open(smk.log[0], "w") as log:
        status = not_run(build, gpu_visible)
        if status is None:
            tests = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/kernels", f"--junitxml={smk.params.junit}"]
            slots = ["hot", "slots", "--gpus", str(smk.resources.gpu), "--job", "kernel_tests", "--"]
            result = subprocess.run([*slots, *tests], stdout=log, stderr=subprocess.STDOUT, check=False)
            status = "passed" if result.returncode == 0 else "failed: see the kernel_tests log"
        print(status, file=log)
    Path(smk.output[0]).write_text(json.dumps({"status": status}) + "\n")


if __name__ == "__main__":
    main(snakemake)  # noqa: F821 (the object Snakemake's script directive defines)
