"""Result files: written atomically, with a record of the environment that produced them.

A reader sees the old file or the new one, never part of one: each file is written to ``.<name>.tmp<pid>`` beside
it, flushed to disk and renamed over it. A process killed mid-write leaves its temporary file, which
:func:`remove_stale_temporaries` deletes once that process no longer runs.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

TEMPORARY = re.compile(r"\.(?P<name>.+)\.tmp(?P<pid>[0-9]+)")
DISTRIBUTIONS = ("timm", "torchao", "hot-kernels")


def write_atomic(path: Path | str, write: Callable[[IO[bytes]], None]) -> None:
    """Create or replace ``path`` with what ``write`` writes to the binary file it is given, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the rename makes it the file
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:  # KeyboardInterrupt too: a second Ctrl-C may land here
        tmp.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash once the directory entry is on disk
    finally:
        os.close(directory)


def load_json(path: Path | str) -> Any:
    """A JSON file's content; a missing, unreadable, empty or truncated file is a ``ValueError`` naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"{path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        what = "empty" if not text.strip() else f"not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})"
        raise ValueError(f"{path}: {what}") from None


def write_text_atomic(path: Path | str, text: str) -> None:
    write_atomic(path, lambda f: f.write(text.encode()))


def write_json_atomic(path: Path | str, data: object, *, sort_keys: bool = False) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n")


def write_csv_atomic(path: Path | str, rows: Iterable[Mapping[str, Any]]) -> None:
    """Rows as CSV, the header every key in order of first appearance (a row without one leaves it empty); nothing
    is written for no rows."""
    rows = list(rows)
    if not rows:
        return
    buffer = io.StringIO()
    fields = list(dict.fromkeys(key for row in rows for key in row))
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, buffer.getvalue())


def write_status(path: Path | str, status: str, env: Mapping[str, Any]) -> None:
    """A results file that holds only why nothing was measured (``not measured: no GPU``), and says so."""
    write_json_atomic(path, {"status": status, "environment": dict(env)})
    print(f"{status}; wrote {path}")


def error_text(err: BaseException) -> str:
    """An exception as a results file records it in place of a measurement: its type and message, bounded."""
    return f"{type(err).__name__}: {err}"[:2000]


def remove_stale_temporaries(directory: Path) -> None:
    """Delete temporary files of :func:`write_atomic` whose writer no longer runs (killed while writing)."""
    for path in directory.iterdir():
        found = TEMPORARY.fullmatch(path.name)
        if found and path.is_file() and not _running(int(found["pid"])):
            path.unlink(missing_ok=True)
            print(f"removed {path}: a partial write by process {found['pid']}, which no longer runs", file=sys.stderr)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, as another user's
        return True
    return True


def _versions() -> dict[str, str | None]:
    import importlib.metadata

    found: dict[str, str | None] = {}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = None
    return found


def _driver() -> str | None:
    try:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"]
        return subprocess.run(query, capture_output=True, text=True, check=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def git_revision(directory: Path | str | None = None) -> dict[str, Any]:
    """The commit checked out where ``directory`` (default: this package's source) lies, and whether tracked files
    differ from it: ``{"commit": None, "dirty": None}`` outside a git checkout or without git."""
    where = Path(directory) if directory is not None else Path(__file__).resolve().parent
    try:
        commit = _git(where, "rev-parse", "HEAD")
        dirty = bool(_git(where, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def git_toplevel(directory: Path | str | None = None) -> Path | None:
    """The root of the git checkout holding ``directory`` (default: this package's source), None outside one."""
    where = Path(directory) if directory is not None else Path(__file__).resolve().parent
    try:
        return Path(_git(where, "rev-parse", "--show-toplevel"))
    except (OSError, subprocess.SubprocessError):
        return None


def git_tracked(directory: Path | str) -> set[Path] | None:
    """The files under ``directory`` that git tracks (resolved paths), None outside a git checkout or without git."""
    directory = Path(directory).resolve()
    try:
        listed = _git(directory, "ls-files", "-z", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return None
    return {(directory / name).resolve() for name in listed.split("\0") if name}


def _git(directory: Path, *arguments: str) -> str:
    run = subprocess.run(
        ["git", "-C", str(directory), *arguments], capture_output=True, text=True, check=True, timeout=30
    )
    return run.stdout.strip()


def kernels_status() -> str:
    """``available``, or ``unavailable: <why>`` (the real backend's ops not built or not loadable)."""
    from .backends.real import load_ops

    try:
        load_ops()
    except RuntimeError as err:
        return f"unavailable: {err}"
    return "available"


def environment() -> dict[str, Any]:
    """Versions, the code's commit, the machine and its GPU, and when: recorded in every results file."""
    import torch

    from . import __version__

    env: dict[str, Any] = {
        "hot": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        **_versions(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "hot_kernels": kernels_status(),
        **{f"git_{k}": v for k, v in git_revision().items()},
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        env["gpu_capability"] = f"{major}.{minor}"
        env["cuda_driver"] = _driver()
        env["allow_tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    return env
