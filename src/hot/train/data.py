"""Datasets: Fashion-MNIST (embedded, offline), CIFAR-10/100 (torchvision), ImageNet-100/1k (ImageFolder), synthetic.

Any of them can be made synthetic (``synthetic: true``; the ``synthetic`` dataset always is): learnable random images
of the dataset's own shape (:data:`SHAPES`), nothing read, for smoke runs and cost measurements at the real scale.

Where the files come from, and how they are verified, is :mod:`hot.train.sources`.

:func:`fetch` finds or fetches any dataset ahead of training (``hot data fetch``, the workflow's ``data`` rule);
training finds or fetches its data the same way when it runs alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch.utils.data import BatchSampler, Dataset

from .sources import (
    DatasetError,
    cifar_split,
    fashion_mnist_raw,
    imagenet_classes,
    load_fashion_mnist,
)

FASHION_MNIST_MEAN, FASHION_MNIST_STD = (0.2860,), (0.3530,)
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


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
PROTOTYPE_SIDE = 28  # class prototypes are drawn at most this large and upsampled: 1000 classes at 224² stay small


def dataset_info(name: str, data_dir: str, synthetic: bool = False) -> tuple[int, int]:
    """(number of classes, input channels) of a dataset (or of its synthetic stand-in), without loading it."""
    if synthetic or name in ("fashion_mnist", "synthetic"):
        return SHAPES[name].classes, SHAPES[name].channels
    if name in ("cifar10", "cifar100"):
        return (10 if name == "cifar10" else 100), 3
    expected = 100 if name == "imagenet100" else 1000
    classes = imagenet_classes(Path(data_dir) / "train", name)
    if len(classes) != expected:
        raise DatasetError(
            f"{name} expects {expected} class folders in {Path(data_dir) / 'train'}, found {len(classes)}"
        )
    return expected, 3


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
        return fashion_mnist_raw(data_dir)[0]
    if name in ("cifar10", "cifar100"):
        for train in (True, False):
            cifar_split(name, data_dir, train, None)
        return f"{data_dir} (torchvision's {name} files)"
    for split in ("train", "val"):
        imagenet_classes(Path(data_dir) / split, name)
    dataset_info(name, data_dir)  # the class count
    return f"{data_dir}/train and {data_dir}/val (ImageFolder)"


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
        x, y = self.get_batch([i])
        return x[0], int(y[0])

    def get_batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Samples ``indices`` as one batch: the same values as stacking them one by one, in one op each."""
        idx = torch.as_tensor(indices, dtype=torch.long)
        x = self.images[idx].float().div(255.0)
        x = (x.unsqueeze(1) if x.dim() == 3 else x).sub(self.mean).div(self.std)
        if x.shape[-1] != self.size:
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return x, self.labels[idx].long()


class Selected(Dataset):
    """Some samples of a dataset, with labels renumbered 0..k-1 in the order of the kept classes."""

    def __init__(self, base: Any, indices: Sequence[int], label_map: dict[int, int] | None) -> None:
        self.base, self.indices, self.label_map = base, list(indices), label_map

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x, y = self.base[self.indices[i]]
        return x, (self.label_map[int(y)] if self.label_map is not None else int(y))

    @property
    def batched(self) -> bool:
        """Whether :meth:`get_batch` works: the base dataset makes whole batches."""
        return hasattr(self.base, "get_batch")

    def get_batch(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.base.get_batch([self.indices[i] for i in indices])
        return x, (y if self._label_lookup is None else self._label_lookup[y])

    @functools.cached_property
    def _label_lookup(self) -> torch.Tensor | None:
        """``label_map`` as a tensor indexed by the base dataset's label, made once."""
        if self.label_map is None:
            return None
        lookup = torch.full((max(self.label_map) + 1,), -1, dtype=torch.long)
        lookup[list(self.label_map)] = torch.tensor(list(self.label_map.values()))
        return lookup


class BatchLoader:
    """What ``DataLoader(dataset, batch_sampler=batches)`` yields in-process, each batch made by the dataset's
    ``get_batch`` in one indexing op instead of a Python call and a collate per sample.

    Each new iteration draws one number from ``generator`` first, as DataLoader's iterator does (its workers' base
    seed), so that a sampler sharing that generator visits the samples in DataLoader's order.
    """

    def __init__(self, dataset: Selected, batches: BatchSampler, generator: torch.Generator | None) -> None:
        if not dataset.batched:
            raise ValueError(f"{type(dataset.base).__name__} makes no whole batches (no get_batch)")
        self.dataset, self.batches, self.generator = dataset, batches, generator

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        for indices in self.batches:
            yield self.dataset.get_batch(indices)


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
        ds = cifar_split(name, data_dir, train, tf)
        out.append((ds, ds.targets))
    return tuple(out)


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
        imagenet_classes(Path(data_dir) / split, name)
        ds = datasets.ImageFolder(str(Path(data_dir) / split), transform=tf)
        out.append((ds, ds.targets))
    return tuple(out)
