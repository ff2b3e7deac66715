"""The `kernels` rule's script: make sure the hot-kernels extension this job imports is built for this GPU from
these sources; record ``{"status": ...}``.

``kernels.build``: ``never`` (nothing is built), ``always`` (usable, or the job fails), ``auto`` (usable if a CUDA GPU
is visible to this job: on a cluster, on the GPU node the rule's resources got it). An installed ``hot_kernels``
(the image's, or one built before) is used as it is, with no ``pip install`` (so a read-only venv or image works),
where it imports, its recorded build (``hot_kernels/build_info.json``, kernels/build_config.py) is of this
checkout's kernels/ sources and this torch, and its architectures cover every visible GPU. Otherwise it is rebuilt
(``pip install --no-build-isolation ./kernels``), or, where the environment or kernels/ is read-only, named: the
status says what is wrong with it and why it was not rebuilt. Without a GPU the status says so
(``"not built: no GPU"``); the kernel tests then do not run and real-quant runs do not train.
"""

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

# Run in a fresh interpreter: what this job's python imports as hot_kernels, and the build it records (a broken
# build may fail to import, or crash the interpreter that loads it).
PROBE = """
import json, pathlib, sys
try:
    import hot_kernels
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
    sys.exit(0)
import torch
where = pathlib.Path(hot_kernels.__file__).parent
info = where / sys.argv[1]
build = json.loads(info.read_text()) if info.is_file() else None
print(json.dumps({"location": str(where), "build": build, "torch": torch.__version__}))
"""


def gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available()


def capabilities() -> list[tuple[int, int]]:
    """The compute capability of every GPU visible to this job."""
    import torch

    return sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})


def load_build_config(source: Path) -> ModuleType:
    """kernels/build_config.py: the one definition of the build's record, its source hash and arch coverage."""
    spec = importlib.util.spec_from_file_location("hot_kernels_build_config", source / "build_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def not_built(mode: str, source: Path, gpu: Callable[[], bool]) -> str | None:
    """Why nothing is to be built (the status to record), or None where the build is checked (and made if needed)."""
    if mode == "never":
        return "not built: disabled in config (kernels.build: never)"
    if not source.is_dir():
        return f"not built: no {source}/ directory"
    if mode == "auto" and not gpu():
        return "not built: no GPU"
    return None


def probe(build_info_name: str) -> dict[str, Any]:
    """What ``import hot_kernels`` gives this job's python: ``{"location", "build", "torch"}`` or ``{"error"}``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, build_info_name], capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0 or not done.stdout.strip():
        return {"error": f"the import exited with {done.returncode}: {done.stderr.strip()[-500:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _capability(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def unusable(found: dict[str, Any], sources_sha256: str, gpus: list[tuple[int, int]], config: ModuleType) -> str | None:
    """Why the installed hot_kernels (a :func:`probe`) cannot be used as it is, or None where it can."""
    if "error" in found:
        return f"hot_kernels does not import ({found['error']})"
    build, where = found.get("build"), found.get("location")
    if not build:
        return f"the hot_kernels at {where} records no build ({config.BUILD_INFO}): what it was built from is unknown"
    if build.get("sources_sha256") != sources_sha256:
        return f"the hot_kernels at {where} was built from other sources than kernels/ (stale)"
    if build.get("torch") != found.get("torch"):
        built, running = build.get("torch"), found.get("torch")
        return f"the hot_kernels at {where} was built against torch {built}, this is torch {running}"
    missing = [cc for cc in gpus if not config.covers(build.get("arch_list") or [], cc)]
    if missing:
        archs = ";".join(build.get("arch_list") or [])
        return (
            f"the hot_kernels at {where} is compiled for {archs}, not for this GPU's compute capability "
            f"{', '.join(map(_capability, missing))}"
        )
    return None


def read_only(paths: list[Path]) -> list[Path]:
    """Those of ``paths`` a build would have to write to and cannot (a read-only image, venv or checkout)."""
    return [p for p in paths if not os.access(p, os.W_OK)]


def install_targets(source: Path) -> list[Path]:
    """Where ``pip install ./kernels`` writes: this environment's site-packages and (in-tree build) kernels/."""
    return [Path(sysconfig.get_paths()["platlib"]), source]


def main(smk: Any) -> None:
    source = Path("kernels")
    with open(smk.log[0], "w") as log:
        record: dict[str, Any] = {"status": not_built(smk.params.mode, source, gpu_visible)}
        if record["status"] is None:
            record = ensure_built(source, smk.params.mode, int(smk.threads), log)
        print(record["status"], file=log)
    Path(smk.output[0]).write_text(json.dumps(record, sort_keys=True) + "\n")


def ensure_built(source: Path, mode: str, threads: int, log: Any) -> dict[str, Any]:
    """The installed build where it is usable here, else a fresh one: the record of which (and why), or the status
    that says why there is none (``kernels.build: always``: the job fails with it)."""
    config = load_build_config(source)
    sha, gpus = config.source_hash(source), capabilities()
    found = probe(config.BUILD_INFO)
    problem = unusable(found, sha, gpus, config)
    if problem is None:
        print(f"hot_kernels at {found['location']} is usable here as installed: not rebuilt", file=log)
        return {"status": "built", "installed": "as found", "location": found["location"], "build": found["build"]}
    print(f"rebuilding: {problem}", file=log, flush=True)
    planned = config.arch_list()
    uncovered = [_capability(cc) for cc in gpus if not config.covers(planned, cc)]
    blocked = read_only(install_targets(source))
    if uncovered:
        why = f"a build for TORCH_CUDA_ARCH_LIST={';'.join(planned)} would not run on compute capability "
        return _none(f"{problem}; {why}{', '.join(uncovered)} (add it to TORCH_CUDA_ARCH_LIST)", mode, log)
    if blocked:
        return _none(f"{problem}; it cannot be rebuilt here: {', '.join(map(str, blocked))} read-only", mode, log)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", f"./{source}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "MAX_JOBS": str(threads)},
        check=True,
    )
    found = probe(config.BUILD_INFO)
    still = unusable(found, sha, gpus, config)
    if still is not None:
        return _none(f"rebuilt, but {still}", mode, log)
    return {"status": "built", "installed": "rebuilt", "reason": problem, "location": found["location"],
            "build": found["build"]}  # fmt: skip


def _none(why: str, mode: str, log: Any) -> dict[str, Any]:
    """The record of a build that cannot be had here; with ``kernels.build: always`` the job fails with it."""
    status = f"not built: {why}"
    if mode == "always":
        print(status, file=log)
        raise SystemExit(f"kernels: {status}")
    return {"status": status}


if __name__ == "__main__":
    main(snakemake)  # noqa: F821 (the object Snakemake's script directive defines)
