"""kernels/setup.py records what a build is made from and for (hot_kernels/build_info.json), without compiling: the
workflow's kernels rule reads it to use an installed build as it is or rebuild a stale one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import torch


def test_setup_records_the_sources_architectures_and_torch_of_a_build(build_config: ModuleType, tmp_path: Path) -> None:
    cutlass = tmp_path / "cutlass" / "include" / "cutlass"  # build_py compiles nothing: the headers are not read
    cutlass.mkdir(parents=True)
    (cutlass / "cutlass.h").write_text("")
    env = {**os.environ, "CUTLASS_DIR": str(tmp_path / "cutlass"), "TORCH_CUDA_ARCH_LIST": "8.0;8.6+PTX",
           "HOT_KERNELS_SM90A": "0"}  # fmt: skip
    lib = tmp_path / "lib"
    argv = [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)]
    done = subprocess.run(
        argv, cwd=build_config.HERE, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads((lib / "hot_kernels" / build_config.BUILD_INFO).read_text())
    assert info == {
        "arch_list": ["8.0", "8.6+PTX"],
        "sm90a": False,
        "sources_sha256": build_config.source_hash(),
        "torch": torch.__version__,
    }
