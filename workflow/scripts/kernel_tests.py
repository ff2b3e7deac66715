"""The `kernel_tests` rule's script: the kernels' GPU tests (pytest -m gpu tests/kernels) on GPUs of their own.

Records ``{"status": ...}``: ``passed``, ``failed: N failed: <first names>; log <path>`` (with ``failed_tests``, every
failed test's id, from pytest's JUnit XML, else from its log) or ``not run: <why>`` (not built, no GPU); real-quant
runs train only after ``passed``, and a run that cannot says which tests failed and where their log is.
"""

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIRST_NAMES = 3  # failed tests named in the status (all are in failed_tests)


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


def failed_from_junit(path: Path) -> list[str] | None:
    """The ids (``file::name``) of the failed or erroring tests in pytest's JUnit XML; None where it is not there."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    failed = []
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "").split(".")
            # classname is the dotted module path, then any test class: keep the file's name and the class
            files = [i for i, part in enumerate(module) if part.startswith("test_")]
            where = "::".join([module[files[0]], *module[files[0] + 1 :]]) if files else ".".join(module)
            failed.append(f"{where}::{case.get('name', '?')}" if where else case.get("name", "?"))
    return failed


def failed_from_log(text: str) -> list[str]:
    """The failed or erroring tests pytest's short summary names (``FAILED tests/kernels/x.py::test - ...``)."""
    return [Path(m[1]).name for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", text, re.M)]


def failure_status(failed: list[str], returncode: int, log: str) -> str:
    """The status of a failed test session: how many failed, the first names, and the log to read."""
    if not failed:
        return f"failed: pytest exited with {returncode}, no test reported failing; log {log}"
    names = ", ".join(name.rpartition("::")[2] for name in failed[:FIRST_NAMES])
    more = f", and {len(failed) - FIRST_NAMES} more" if len(failed) > FIRST_NAMES else ""
    return f"failed: {len(failed)} failed: {names}{more}; log {log}"


def main(smk: Any) -> None:
    build = json.loads(Path(smk.input.build).read_text())["status"]
    junit = Path(smk.params.junit)
    result: dict[str, Any] = {}
    with open(smk.log[0], "w") as log:
        status = not_run(build, gpu_visible)
        if status is None:
            junit.unlink(missing_ok=True)  # a previous session's results are not this one's
            tests = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/kernels", f"--junitxml={junit}"]
            slots = ["hot", "slots", "--gpus", str(smk.params.gpus), "--jobs-per-gpu", str(smk.params.jobs_per_gpu)]
            slots += ["--job", "kernel_tests", "--"]
            done = subprocess.run([*slots, *tests], stdout=log, stderr=subprocess.STDOUT, check=False)
            if done.returncode == 0:
                status = "passed"
            else:
                log.flush()
                failed = failed_from_junit(junit)
                if not failed:
                    failed = failed_from_log(Path(smk.log[0]).read_text(errors="replace"))
                status = failure_status(failed, done.returncode, smk.log[0])
                result = {"failed_tests": failed, "log": smk.log[0]}
        print(status, file=log)
    Path(smk.output[0]).write_text(json.dumps({"status": status, **result}) + "\n")


if __name__ == "__main__":
    main(snakemake)  # noqa: F821 (the object Snakemake's script directive defines)
