"""Datasets: Fashion-MNIST (embedded, offline), CIFAR-10/100 (torchvision), ImageNet-100/1k (ImageFolder), synthetic.

Any of them can be made synthetic (``synthetic: true``; the ``synthetic`` dataset always is): learnable random images
of the dataset's own shape (:data:`SHAPES`), nothing read, for smoke runs and cost measurements at the real scale.

Fashion-MNIST is found by three routes, in order: the Debian package's files in /usr/share/datasets/fashion-mnist/,
the same package fetched without root into ``resources/`` (``apt-get download`` + ``dpkg-deb -x``), and torchvision's
download into ``data_dir``. Every route's files are checked against the SHA-256 of the decompressed idx data (the
Debian package recompresses the upstream .gz files, so only the decompressed bytes are the same everywhere). The two
routes that write (apt-get/dpkg-deb, torchvision) fetch under an exclusive file lock into a temporary directory that is
renamed into place when complete, so concurrent jobs fetch once and never read a half-written tree.

:func:`fetch` finds or fetches any dataset ahead of training (``hot data fetch``, the workflow's ``data`` rule);
training finds or fetches its data the same way when it runs alone.
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

FASHION_MNIST_MEAN, FASHION_MNIST_STD = (0.2860,), (0.3530,)
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

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


class Shape(NamedTuple):
    """What synthetic data imitates: image side and channels, class count, train and test samples."""

    side: int
    channels: int
    classes: int
    train: int
    test: int


SHAPES = {
    "fashion_mnist": Shape(28, 1, 10, 60_000, 10_000),
    "cifar10": Shape(32, 3, 10, 50_000, 10_000),
    "cifar100": Shape(32, 3, 100, 50_000, 10_000),
    "imagenet100": Shape(224, 3, 100, 126_689, 5_000),  # the usual ImageNet-100 split: 1300/50 images per class
    "imagenet1k": Shape(224, 3, 1000, 1_281_167, 50_000),
    "synthetic": Shape(28, 1, 10, 256, 128),
}
DOWNLOAD_TIMEOUT_S = 60  # each socket operation of a torchvision download: a lossy network fails it, not hangs it
PROTOTYPE_SIDE = 28  # class prototypes are drawn at most this large and upsampled: 1000 classes at 224² stay small


class DatasetError(RuntimeError):
    """A dataset could not be found, fetched or verified."""


class ChecksumError(DatasetError):
    """A file's content does not match its recorded SHA-256."""


def dataset_info(name: str, data_dir: str, synthetic: bool = False) -> tuple[int, int]:
    """(number of classes, input channels) of a dataset (or of its synthetic stand-in), without loading it."""
    if synthetic or name in ("fashion_mnist", "synthetic"):
        return SHAPES[name].classes, SHAPES[name].channels
    if name in ("cifar10", "cifar100"):
        return (10 if name == "cifar10" else 100), 3
    expected = 100 if name == "imagenet100" else 1000
    classes = _imagenet_classes(Path(data_dir) / "train", name)
    if len(classes) != expected:
        raise DatasetError(
            f"{name} expects {expected} class folders in {Path(data_dir) / 'train'}, found {len(classes)}"
        )
    return expected, 3


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


def _fashion_mnist_raw(data_dir: str) -> tuple[str, dict[str, bytes]]:
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
    _, raw = _fashion_mnist_raw(data_dir)
    return {stem: _parse_idx(data) for stem, data in raw.items()}


# --- Finding a dataset ahead of training -----------------------------------------------------------------------------


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


def fetch(name: str, data_dir: str, synthetic: bool = False) -> str:
    """Find ``name`` under ``data_dir``, fetching it where a route allows; returns where it was found.

    Raises :class:`DatasetError` (why, and how to get it) where it is not there and cannot be fetched. Synthetic data
    (``synthetic``, or the ``synthetic`` dataset) is never fetched: it is made per sample.
    """
    if name == "synthetic":
        return "generated in memory"
    if synthetic:
        shape = SHAPES[name]
        return f"generated in memory ({name}'s shape: {shape.channels}x{shape.side}², {shape.classes} classes)"
    if name == "fashion_mnist":
        return _fashion_mnist_raw(data_dir)[0]
    if name in ("cifar10", "cifar100"):
        for train in (True, False):
            _cifar_split(name, data_dir, train, None)
        return f"{data_dir} (torchvision's {name} files)"
    for split in ("train", "val"):
        _imagenet_classes(Path(data_dir) / split, name)
    dataset_info(name, data_dir)  # the class count
    return f"{data_dir}/train and {data_dir}/val (ImageFolder)"


def _parse_idx(data: bytes) -> torch.Tensor:
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)
    tensor = torch.from_numpy(array.copy())
    return tensor.long() if ndim == 1 else tensor


# --- Datasets --------------------------------------------------------------------------------------------------------


class ImageTensorDataset(Dataset):
    """uint8 images (N, H, W) or (N, C, H, W) in memory, normalised and resized per sample."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, mean: tuple, std: tuple, size: int) -> None:
        self.images, self.labels, self.size = images, labels, size
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.images[i].float().div(255.0)
        x = (x.unsqueeze(0) if x.dim() == 2 else x).sub(self.mean).div(self.std)
        if x.shape[-1] != self.size:
            x = F.interpolate(x[None], size=(self.size, self.size), mode="bilinear", align_corners=False)[0]
        return x, int(self.labels[i])


class Selected(Dataset):
    """Some samples of a dataset, with labels renumbered 0..k-1 in the order of the kept classes."""

    def __init__(self, base: Any, indices: Sequence[int], label_map: dict[int, int] | None) -> None:
        self.base, self.indices, self.label_map = base, list(indices), label_map

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x, y = self.base[self.indices[i]]
        return x, (self.label_map[int(y)] if self.label_map is not None else int(y))


def select(base: Any, labels: Sequence[int], classes: Sequence[int] | None, subset: int | None, seed: int) -> Selected:
    """Keep ``classes`` (labels remapped), then at most ``subset`` samples chosen by ``seed`` (in dataset order)."""
    labels = torch.as_tensor(labels)
    if classes is None:
        indices, label_map = torch.arange(len(labels)), None
    else:
        indices = torch.nonzero(torch.isin(labels, torch.tensor(list(classes)))).flatten()
        label_map = {c: i for i, c in enumerate(classes)}
    if subset is not None and subset < len(indices):
        chosen = torch.randperm(len(indices), generator=torch.Generator().manual_seed(seed))[:subset]
        indices = indices[chosen.sort().values]
    return Selected(base, indices.tolist(), label_map)


def build_datasets(
    name: str,
    data_dir: str,
    image_size: int,
    classes: Sequence[int] | None,
    train_subset: int | None,
    test_subset: int | None,
    seed: int,
    synthetic: bool = False,
) -> tuple[Selected, Selected]:
    """Train and test sets, class-filtered and subsampled (``synthetic``: made, of the dataset's shape)."""
    num_classes, _ = dataset_info(name, data_dir, synthetic)
    if classes is not None and max(classes) >= num_classes:
        raise ValueError(f"classes: ids must be below {num_classes} for {name}, got {list(classes)}")
    synthetic = synthetic or name == "synthetic"
    splits = _synthetic(SHAPES[name], image_size) if synthetic else _load_splits(name, data_dir, image_size)
    (train, train_labels), (test, test_labels) = splits
    return (
        select(train, train_labels, classes, train_subset, seed),
        select(test, test_labels, classes, test_subset, seed),
    )


def _load_splits(name: str, data_dir: str, size: int) -> tuple[tuple[Any, Sequence[int]], ...]:
    if name == "fashion_mnist":
        raw = load_fashion_mnist(data_dir)
        return tuple(
            (
                ImageTensorDataset(
                    raw[f"{p}-images-idx3-ubyte"],
                    raw[f"{p}-labels-idx1-ubyte"],
                    FASHION_MNIST_MEAN,
                    FASHION_MNIST_STD,
                    size,
                ),
                raw[f"{p}-labels-idx1-ubyte"],
            )
            for p in ("train", "t10k")
        )
    if name in ("cifar10", "cifar100"):
        return _cifar(name, data_dir, size)
    return _imagenet(name, data_dir, size)


class SyntheticImages(Dataset):
    """Learnable random images: a class's prototype upsampled to ``side`` plus noise drawn from the sample's index,
    resized to ``size``; made per sample, so a dataset of ImageNet's size costs its labels only."""

    def __init__(self, prototypes: torch.Tensor, labels: torch.Tensor, side: int, size: int, stream: int) -> None:
        self.prototypes, self.labels, self.side, self.size, self.stream = prototypes, labels, side, size, stream

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        label = int(self.labels[i])
        g = torch.Generator().manual_seed(self.stream * 2**40 + i)
        x = F.interpolate(self.prototypes[label][None], size=(self.side, self.side), mode="nearest")[0]
        x = x + 0.5 * torch.randn(x.shape, generator=g)
        if self.side != self.size:
            x = F.interpolate(x[None], size=(self.size, self.size), mode="bilinear", align_corners=False)[0]
        return x, label


def _synthetic(shape: Shape, size: int) -> tuple[tuple[Any, Sequence[int]], ...]:
    # Fixed (seed 0), whatever the run's seed: the run's seed picks subsets and order, as with real data.
    g = torch.Generator().manual_seed(0)
    side = min(shape.side, PROTOTYPE_SIDE)
    prototypes = torch.randn(shape.classes, shape.channels, side, side, generator=g)
    out = []
    for stream, n in enumerate((shape.train, shape.test)):
        labels = torch.randint(0, shape.classes, (n,), generator=g)
        out.append((SyntheticImages(prototypes, labels, shape.side, size, stream), labels))
    return tuple(out)


def _cifar(name: str, data_dir: str, size: int) -> tuple[tuple[Any, Sequence[int]], ...]:
    from torchvision import transforms

    mean, std = (CIFAR10_MEAN, CIFAR10_STD) if name == "cifar10" else (CIFAR100_MEAN, CIFAR100_STD)
    resize = [transforms.Resize(size, antialias=True)] if size != 32 else []
    train_tf = transforms.Compose(
        [
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean, std),
            *resize,
        ]
    )
    test_tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std), *resize])
    out = []
    for train, tf in ((True, train_tf), (False, test_tf)):
        ds = _cifar_split(name, data_dir, train, tf)
        out.append((ds, ds.targets))
    return tuple(out)


def _cifar_split(name: str, data_dir: str, train: bool, transform: Any) -> Any:
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


def _imagenet_classes(root: Path, name: str) -> list[str]:
    if not root.is_dir():
        raise DatasetError(
            f"{name} expects an ImageFolder layout: {root}/<class>/<image> and {root.parent / 'val'}/<class>/<image> "
            "(set data_dir)"
        )
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def _imagenet(name: str, data_dir: str, size: int) -> tuple[tuple[Any, Sequence[int]], ...]:
    from torchvision import datasets, transforms

    normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    train_tf = transforms.Compose(
        [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]
    )
    test_tf = transforms.Compose(
        [transforms.Resize(int(size / 0.875)), transforms.CenterCrop(size), transforms.ToTensor(), normalize]
    )
    out = []
    for split, tf in (("train", train_tf), ("val", test_tf)):
        _imagenet_classes(Path(data_dir) / split, name)
        ds = datasets.ImageFolder(str(Path(data_dir) / split), transform=tf)
        out.append((ds, ds.targets))
    return tuple(out)
