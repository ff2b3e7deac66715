"""Where CUTLASS comes from and how the sources are compiled: shared by setup.py and the CPU build test."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"
CUDA_SOURCES = ("quant_kernels.cu", "cutlass_gemm.cu", "cutlass_sm90_gemm.cu")
CXX_SOURCES = ("bindings.cpp",)
DEFAULT_ARCH_LIST = "8.0;8.6;8.9;9.0"
# No fast-math: the quantisers must round exactly like the float32 CPU reference.
NVCC_FLAGS = ["-O3", "-std=c++17", "--fmad=false", "--expt-relaxed-constexpr", "-DNDEBUG"]
# The CUTLASS 3.x sm_90a INT8 GEMM (wgmma/TMA), the g_w GEMM on compute capability 9.0 (1.3-2.1x cuBLASLt's on an
# H100): "1" builds it, "0" not, "auto" (the default) where 9.0 is in the architecture list and nvcc is CUDA 12+.
SM90A_ENV = "HOT_KERNELS_SM90A"
SM90A_DEFINE = "-DHOT_SM90A_GEMM"
CXX_FLAGS = ["-O3", "-std=c++17"]
# Written beside the compiled extension (hot_kernels/build_info.json): what it was built from and for, so that the
# workflow's kernels rule can tell an installed build it can use from a stale one without rebuilding it.
BUILD_INFO = "build_info.json"
# What a build is made from: the CUDA/C++ sources, the Python package, and the recipe (these flags, setup.py).
BUILD_INPUTS = ("csrc", "hot_kernels", "build_config.py", "setup.py", "pyproject.toml")


def _has_headers(include: Path) -> bool:
    return (include / "cutlass" / "cutlass.h").is_file()


def cutlass_include() -> Path:
    """CUTLASS v4.2.0 headers: $CUTLASS_DIR, else the third_party/cutlass submodule, else the nvidia-cutlass wheel."""
    override = os.environ.get("CUTLASS_DIR")
    if override:
        for include in (Path(override) / "include", Path(override)):
            if _has_headers(include):
                return include
        raise RuntimeError(f"CUTLASS_DIR={override} holds no include/cutlass/cutlass.h")
    submodule = HERE.parent / "third_party" / "cutlass" / "include"
    if _has_headers(submodule):
        return submodule
    spec = importlib.util.find_spec("cutlass_library")
    if spec is not None and spec.origin is not None:
        wheel = Path(spec.origin).parent / "source" / "include"
        if _has_headers(wheel):
            return wheel
    raise RuntimeError(
        "CUTLASS headers not found: run `git submodule update --init third_party/cutlass`, "
        "`pip install nvidia-cutlass==4.2.0.0`, or set CUTLASS_DIR"
    )


def _sm90a_setting() -> str:
    value = os.environ.get(SM90A_ENV, "auto").strip() or "auto"
    if value not in ("0", "1", "auto"):
        raise RuntimeError(f"{SM90A_ENV} must be 0, 1 or auto, got {value!r}")
    return value


def sm90a_requested() -> bool:
    """Whether $HOT_KERNELS_SM90A asks for the sm_90a INT8 GEMM ("1"; "0" no; "auto", unset, is resolved by
    :func:`resolve_sm90a` before a build and reads as no until then)."""
    return _sm90a_setting() == "1"


def resolve_sm90a(nvcc: str) -> bool:
    """Settles $HOT_KERNELS_SM90A for a build and returns it: "auto" (or unset) becomes "1" where 9.0 is among the
    architectures and ``nvcc`` is CUDA 12 or newer (sm_90a needs it), else "0"; "0" and "1" stay."""
    value = _sm90a_setting()
    if value == "auto":
        version = nvcc_version(nvcc)
        on = "9.0" in arch_list(sm90a=False) and version is not None and version >= (12, 0)
        value = "1" if on else "0"
        os.environ[SM90A_ENV] = value
    return value == "1"


def arch_list(sm90a: bool | None = None) -> list[str]:
    """Compute capabilities from TORCH_CUDA_ARCH_LIST ("8.0;9.0", "8.6+PTX"), default 8.0;8.6;8.9;9.0.

    With ``sm90a`` (default: :func:`sm90a_requested`), 9.0 becomes 9.0a for every source: the sm90 INT8 GEMM's
    wgmma needs Hopper's arch-specific target, and an sm_90a cubin runs on every compute capability 9.0 GPU
    (H100, H200). torch's cpp_extension turns "9.0a" into -gencode=arch=compute_90a,code=sm_90a (CUDA 12+).
    """
    raw = os.environ.get("TORCH_CUDA_ARCH_LIST") or DEFAULT_ARCH_LIST
    arches = [a for a in raw.replace(" ", ";").split(";") if a]
    if sm90a is None:
        sm90a = sm90a_requested()
    if not sm90a:
        return arches
    for arch in arches:
        if not re.fullmatch(r"\d+\.\d+a?(\+PTX)?", arch):
            raise RuntimeError(
                f"{SM90A_ENV}=1 needs numeric capabilities in TORCH_CUDA_ARCH_LIST (such as 8.0;9.0), got {arch!r}"
            )
        if arch == "9.0+PTX":
            raise RuntimeError(
                f"{SM90A_ENV}=1 with 9.0+PTX would ship compute_90a PTX, which only compute capability 9.0 runs: "
                "list 9.0, and e.g. 10.0+PTX for newer GPUs"
            )
    return ["9.0a" if a == "9.0" else a for a in arches]


def nvcc_version(nvcc: str) -> tuple[int, int] | None:
    """(major, minor) of ``nvcc --version``; None when it cannot be run or read."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except OSError:
        return None
    match = re.search(r"release (\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else None


def check_sm90a_toolkit(nvcc: str) -> None:
    """sm_90a (wgmma, TMA) needs CUDA 12 or newer: a clear error before nvcc fails on compute_90a."""
    version = nvcc_version(nvcc)
    if version is None or version < (12, 0):
        found = "unreadable" if version is None else f"{version[0]}.{version[1]}"
        raise RuntimeError(f"{SM90A_ENV}=1 needs nvcc from CUDA 12 or newer; {nvcc} is {found}")


def nvcc_flags(sm90a: bool | None = None) -> list[str]:
    """NVCC_FLAGS, plus the define that compiles the sm_90a INT8 GEMM when it is requested."""
    if sm90a is None:
        sm90a = sm90a_requested()
    return [*NVCC_FLAGS, SM90A_DEFINE] if sm90a else list(NVCC_FLAGS)


def gencode_flags(arches: list[str]) -> list[str]:
    """nvcc -gencode flags for capabilities such as "9.0", "9.0a" or "8.6+PTX"."""
    flags = []
    for arch in arches:
        ptx = arch.endswith("+PTX")
        num = arch.removesuffix("+PTX").replace(".", "")
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags


def source_hash(root: Path = HERE) -> str:
    """sha256 over the names and contents of the files a build is made from (:data:`BUILD_INPUTS` under ``root``;
    caches and the build record itself left out): an installed build whose recorded hash differs is stale."""
    digest = hashlib.sha256()
    files: list[Path] = []
    for name in BUILD_INPUTS:
        path = root / name
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            files.append(path)
    for path in files:
        if "__pycache__" in path.parts or path.name == BUILD_INFO or path.suffix in (".so", ".pyd", ".pyc"):
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def build_info(arches: list[str], sm90a: bool, torch_version: str, root: Path = HERE) -> dict[str, object]:
    """The record a build leaves beside its extension (:data:`BUILD_INFO`)."""
    return {"arch_list": list(arches), "sm90a": sm90a, "sources_sha256": source_hash(root), "torch": torch_version}


def write_build_info(package_dir: Path, info: dict[str, object]) -> Path:
    path = Path(package_dir) / BUILD_INFO
    path.write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return path


def covers(arches: list[str], capability: tuple[int, int]) -> bool:
    """Whether a build for ``arches`` ("8.0", "9.0a", "8.6+PTX") runs on a GPU of compute capability ``capability``.

    An sm_XY cubin runs on X.Y and later minors of major X; X.Ya (arch-specific, Hopper's wgmma) only on X.Y itself;
    compute_XY PTX (``+PTX``) is compiled by the driver for X.Y and every later capability.
    """
    for arch in arches:
        match = re.fullmatch(r"(\d+)\.(\d+)(a?)(\+PTX)?", arch.strip())
        if match is None:
            continue
        built = (int(match[1]), int(match[2]))
        if match[3]:
            if capability == built:
                return True
        elif (capability[0] == built[0] and capability[1] >= built[1]) or (match[4] and capability >= built):
            return True
    return False
