"""Where the datasets' files come from: found, fetched and verified, never read half-written.

Fashion-MNIST is found by three routes, in order: the Debian package's files in /usr/share/datasets/fashion-mnist/,
the same package fetched without root into ``resources/`` (``apt-get download`` + ``dpkg-deb -x``), and torchvision's
download into ``data_dir``. Every route's files are checked against the SHA-256 of the decompressed idx data (the
Debian package recompresses the upstream .gz files, so only the decompressed bytes are the same everywhere). The two
routes that write (apt-get/dpkg-deb, torchvision) fetch under an exclusive file lock into a temporary directory that is
renamed into place when complete, so concurrent jobs fetch once and never read a half-written tree. CIFAR-10/100 are
torchvision's (downloaded where the network allows, with a socket timeout); ImageNet-100/1k are ImageFolder trees
found under ``data_dir`` or not. :mod:`hot.train.data` makes datasets of them.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InputError

PACKAGE_DIR = "usr/share/datasets/fashion-mnist"  # where the Debian package puts the files, from its root
SYSTEM_DIR = Path("/") / PACKAGE_DIR
RESOURCES_DIR = Path("resources")  # relative to the working directory (the repository root in the workflow)
DEBIAN_PACKAGE = "dataset-fashion-mnist"
# SHA-256 of the decompressed idx files; checked against the Debian package (0.0~git20200523.55506a9-1), whose
# decompressed bytes also match the MD5s torchvision once listed for the upstream raw files.
FASHION_MNIST_SHA256 = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}


DOWNLOAD_TIMEOUT_S = 60  # each socket operation of a torchvision download: a lossy network fails it, not hangs it


class DatasetError(InputError, RuntimeError):
    """A dataset could not be found, fetched or verified."""


class ChecksumError(DatasetError):
    """A file's content does not match its recorded SHA-256."""


# --- Fashion-MNIST -------------------------------------------------------------------------------------------------


def read_verified(path: Path) -> bytes:
    """The decompressed bytes of one Fashion-MNIST idx file (.gz or raw), checked against its recorded SHA-256."""
    stem = path.name.removesuffix(".gz")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DatasetError(f"{path}: cannot be read ({type(err).__name__}: {err})") from err
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (EOFError, zlib.error, OSError) as err:  # OSError includes gzip.BadGzipFile
            raise DatasetError(f"{path}: truncated or corrupt gzip file ({type(err).__name__}: {err})") from err
    actual = hashlib.sha256(data).hexdigest()
    if actual != FASHION_MNIST_SHA256[stem]:
        raise ChecksumError(
            f"{path}: SHA-256 of the decompressed data is {actual}, expected {FASHION_MNIST_SHA256[stem]} "
            "(corrupt or not Fashion-MNIST)"
        )
    return data


def _read_dir(directory: Path) -> dict[str, bytes]:
    files = {}
    for stem in FASHION_MNIST_SHA256:
        candidates = [directory / f"{stem}.gz", directory / stem]
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            raise DatasetError(f"{directory}: {stem}.gz not found")
        files[stem] = read_verified(found)
    return files


def _system_route() -> dict[str, bytes]:
    return _read_dir(SYSTEM_DIR)


def _debian_route() -> dict[str, bytes]:
    target = RESOURCES_DIR / DEBIAN_PACKAGE
    if not target.is_dir():
        for tool in ("apt-get", "dpkg-deb"):
            if shutil.which(tool) is None:
                raise DatasetError(f"{tool} not found (not a Debian-based system)")
        _fetch_once(target, f"apt-get download {DEBIAN_PACKAGE} (network) + dpkg-deb -x", _apt_fetch)
    return _read_fetched(target / PACKAGE_DIR, target)


def _apt_fetch(work: Path) -> Path:
    _run(["apt-get", "download", DEBIAN_PACKAGE], work)
    debs = sorted(work.glob(f"{DEBIAN_PACKAGE}_*.deb"))
    if not debs:
        raise DatasetError(f"apt-get download left no {DEBIAN_PACKAGE}_*.deb in {work}")
    root = work / "root"
    _run(["dpkg-deb", "-x", str(debs[-1].resolve()), str(root.resolve())], work)
    return root


def _run(command: list[str], cwd: Path) -> None:
    try:
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise DatasetError(f"{' '.join(command)} failed: {err}") from err
    if result.returncode != 0:
        raise DatasetError(f"{' '.join(command)} failed: {result.stderr.strip()[-500:]}")


def _torchvision_route(data_dir: str) -> dict[str, bytes]:
    target = Path(data_dir) / "FashionMNIST" / "raw"
    if not target.is_dir():
        _fetch_once(target, "torchvision's download (network)", _torchvision_fetch)
    return _read_fetched(target, target)


@contextlib.contextmanager
def _download_timeout() -> Iterator[None]:
    """torchvision opens its URLs without a timeout: give its sockets one while it downloads."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _torchvision_fetch(work: Path) -> Path:
    from torchvision.datasets import FashionMNIST

    try:
        with _download_timeout():
            FashionMNIST(str(work), download=True)
    except Exception as err:  # network errors come in many types (URLError, socket, HTTP)
        raise DatasetError(f"torchvision download failed: {type(err).__name__}: {err}") from err
    return work / "FashionMNIST" / "raw"


def _read_fetched(directory: Path, target: Path) -> dict[str, bytes]:
    try:
        return _read_dir(directory)
    except DatasetError as err:  # e.g. a tree half-extracted by a version without the lock, or pre-seeded wrongly
        raise type(err)(f"{err} (remove {target} to fetch it again)") from err


def _fetch_once(target: Path, how: str, fetch: Callable[[Path], Path]) -> None:
    """Create the directory ``target`` once across processes, never visible half-written.

    Under an exclusive lock on ``<target>.lock``, ``fetch(work)`` builds the tree somewhere inside the empty
    directory ``<target>.partial`` and returns it; it is renamed to ``target`` only when complete. A process that
    finds the lock taken waits, then finds the finished ``target``; a ``.partial`` left by a killed fetch is removed.
    ``how`` (the tools used, and whether they use the network) is printed to stderr when this process fetches.
    """
    staging = target.with_name(f"{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive_lock(target.with_name(f"{target.name}.lock"), target):
            if target.is_dir():  # another process fetched it while this one waited
                return
            if staging.exists():  # nobody else can be writing it while the lock is held
                print(f"hot: removing {staging}, left by an interrupted fetch", file=sys.stderr)
                shutil.rmtree(staging)
            staging.mkdir()
            print(f"hot: fetching Fashion-MNIST into {target}: {how}", file=sys.stderr)
            try:
                os.replace(fetch(staging), target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except OSError as err:
        raise DatasetError(f"fetching into {target} failed: {type(err).__name__}: {err}") from err


@contextlib.contextmanager
def _exclusive_lock(path: Path, target: Path) -> Iterator[None]:
    # Closing the file releases the lock, also when the process is killed, so a lock file never goes stale.
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"hot: waiting for another process to finish fetching {target} (lock {path})", file=sys.stderr)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def fashion_mnist_routes(data_dir: str) -> list[tuple[str, Callable[[], dict[str, bytes]]]]:
    return [
        (f"the Debian package's files in {SYSTEM_DIR} (apt-get install {DEBIAN_PACKAGE})", _system_route),
        (
            f"the Debian package fetched without root into {RESOURCES_DIR}/ (apt-get download {DEBIAN_PACKAGE} + "
            "dpkg-deb -x)",
            _debian_route,
        ),
        (f"torchvision's download into {data_dir}", functools.partial(_torchvision_route, data_dir)),
    ]


def fashion_mnist_raw(data_dir: str) -> tuple[str, dict[str, bytes]]:
    """(the route that worked, the verified idx bytes by file stem), from the first route that works."""
    failures = []
    for description, route in fashion_mnist_routes(data_dir):
        try:
            return description, route()
        except DatasetError as err:
            failures.append(f"  - {description}: {' '.join(str(err).split())}")  # one line per route
    raise DatasetError(
        "Fashion-MNIST could not be loaded by any route:\n"
        + "\n".join(failures)
        + f"\nTo get it: {how_to_get('fashion_mnist', data_dir)}"
    )


@functools.lru_cache(maxsize=2)
def load_fashion_mnist(data_dir: str) -> dict[str, torch.Tensor]:
    """Images (uint8, N x 28 x 28) and labels (int64) of both splits, from the first route that works."""
    _, raw = fashion_mnist_raw(data_dir)
    return {stem: _parse_idx(data) for stem, data in raw.items()}


def dataset_path(name: str, data_dir: str) -> Path:
    """Where training looks for a dataset's files under ``data_dir``."""
    if name == "fashion_mnist":
        return Path(data_dir) / "FashionMNIST" / "raw"
    return Path(data_dir)


def how_to_get(name: str, data_dir: str) -> str:
    """How to put a dataset where training finds it, in one line."""
    if name == "fashion_mnist":
        files = ", ".join(f"{stem}.gz" for stem in FASHION_MNIST_SHA256)
        return (
            f"apt-get install {DEBIAN_PACKAGE} (as root), or put the four idx files ({files}) in "
            f"{dataset_path(name, data_dir)}/"
        )
    if name in ("cifar10", "cifar100"):
        return f"hot data fetch --dataset {name} --root {data_dir} where the network is reachable (torchvision)"
    if name in ("imagenet100", "imagenet1k"):
        subset = "the 100 classes of ImageNet-100 from " if name == "imagenet100" else ""
        return (
            f"{subset}ILSVRC-2012 (image-net.org, registration needed) as ImageFolder trees "
            f"{Path(data_dir) / 'train'}/<class>/<image> and {Path(data_dir) / 'val'}/<class>/<image>"
        )
    return "nothing: it is generated in memory"


def _parse_idx(data: bytes) -> torch.Tensor:
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)
    tensor = torch.from_numpy(array.copy())
    return tensor.long() if ndim == 1 else tensor


def cifar_split(name: str, data_dir: str, train: bool, transform: Any) -> Any:
    """One split of CIFAR-10/100 from ``data_dir``, downloaded by torchvision first where it is not there."""
    from torchvision import datasets

    cls = datasets.CIFAR10 if name == "cifar10" else datasets.CIFAR100
    try:
        return cls(data_dir, train=train, transform=transform, download=False)
    except RuntimeError:
        try:
            with _download_timeout():
                return cls(data_dir, train=train, transform=transform, download=True)
        except Exception as err:  # network errors come in many types
            raise DatasetError(
                f"{name} is not in {data_dir} and could not be downloaded ({type(err).__name__}: {err}); "
                f"to get it: {how_to_get(name, data_dir)}"
            ) from err


def imagenet_classes(root: Path, name: str) -> list[str]:
    if not root.is_dir():
        raise DatasetError(
            f"{name} expects an ImageFolder layout: {root}/<class>/<image> and {root.parent / 'val'}/<class>/<image> "
            "(set data_dir)"
        )
    return sorted(p.name for p in root.iterdir() if p.is_dir())
