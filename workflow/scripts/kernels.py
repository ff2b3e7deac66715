"""The `kernels` rule's script: build the hot-kernels extension where the job runs; record ``{"status": ...}``.

``kernels.build``: ``never`` (nothing is built), ``always`` (built, or the job fails), ``auto`` (built if a CUDA GPU
is visible to this job: on a cluster, on the GPU node the rule's resources got it). Without one the status says why
(``"not built: no GPU"``), the kernel tests do not run and real-quant runs do not train.
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available()


def not_built(mode: str, source: Path, gpu: Callable[[], bool]) -> str | None:
    """Why nothing is to be built (the status to record), or None where the build runs."""
    if mode == "never":
        return "not built: disabled in config (kernels.build: never)"
    if not source.is_dir():
        return f"not built: no {source}/ directory"
    if mode == "auto" and not gpu():
        return "not built: no GPU"
    return None


def main(smk: Any) -> None:
    with open(smk.log[0], "w") as log:
        status = not_built(smk.params.mode, Path("kernels"), gpu_visible)
        if status is None:
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--no-build-isolation", "./kernels"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "MAX_JOBS": str(smk.threads)},
                check=True,
            )
            status = "built"
        print(status, file=log)
    Path(smk.output[0]).write_text(json.dumps({"status": status}) + "\n")


if __name__ == "__main__":
    main(snakemake)  # noqa: F821 (the object Snakemake's script directive defines)
