import fcntl
import gzip
import hashlib
import json
import multiprocessing
import re
import time
from pathlib import Path

import pytest
import torch

from hot.train import data, sources
from hot.train.sources import ChecksumError, DatasetError

TORCHVISION_ROUTE = sources._torchvision_route  # the fixture below replaces it
# Two tiny idx files (a 1x2x2 image and its label) standing in for Fashion-MNIST; FASHION_MNIST_SHA256 is patched.
IDX = {
    "train-images-idx3-ubyte": bytes([0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4]),
    "train-labels-idx1-ubyte": bytes([0, 0, 8, 1, 0, 0, 0, 1, 7]),
}


@pytest.fixture
def no_routes(tmp_path, monkeypatch):
    """Every route pointed at tmp_path: an empty system dir, no apt-get, a failing download."""
    system = tmp_path / "system"
    system.mkdir()
    monkeypatch.setattr(sources, "SYSTEM_DIR", system)
    monkeypatch.setattr(sources, "RESOURCES_DIR", tmp_path / "resources")
    monkeypatch.setattr(sources.shutil, "which", lambda tool: None)

    def offline(data_dir):
        raise DatasetError("no network")

    monkeypatch.setattr(sources, "_torchvision_route", offline)
    sources.load_fashion_mnist.cache_clear()
    yield system
    sources.load_fashion_mnist.cache_clear()


@pytest.fixture
def fake_apt(no_routes, tmp_path, monkeypatch):
    """apt-get and dpkg-deb stand-ins serving IDX; the extract writes slowly; every command is logged to the file."""
    monkeypatch.setattr(sources, "FASHION_MNIST_SHA256", {s: hashlib.sha256(c).hexdigest() for s, c in IDX.items()})
    monkeypatch.setattr(sources.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    log = tmp_path / "commands.log"

    def fake_run(command, cwd):
        with log.open("a") as f:
            f.write(f"{command[0]}\n")
        if command[0] == "apt-get":
            (cwd / f"{sources.DEBIAN_PACKAGE}_1_all.deb").write_bytes(b"deb")
            return
        extracted = Path(command[-1]) / sources.PACKAGE_DIR  # dpkg-deb -x DEB DIR
        extracted.mkdir(parents=True)
        for stem, content in IDX.items():
            (extracted / f"{stem}.gz").write_bytes(gzip.compress(content))
            time.sleep(0.2)  # a reader of a half-written tree would fail

    monkeypatch.setattr(sources, "_run", fake_run)
    return log


def test_checksum_failure_is_reported_with_every_route(no_routes, tmp_path):
    for stem in sources.FASHION_MNIST_SHA256:
        (no_routes / f"{stem}.gz").write_bytes(gzip.compress(b"not fashion-mnist"))
    with pytest.raises(ChecksumError, match=r"train-images-idx3-ubyte.gz: SHA-256 of the decompressed data is"):
        sources.read_verified(no_routes / "train-images-idx3-ubyte.gz")
    with pytest.raises(DatasetError) as err:
        sources.load_fashion_mnist(str(tmp_path / "data"))
    message = str(err.value)
    assert "SHA-256 of the decompressed data" in message
    assert "apt-get install dataset-fashion-mnist" in message
    assert "apt-get download dataset-fashion-mnist + dpkg-deb -x" in message and "apt-get not found" in message
    assert "torchvision's download" in message and "no network" in message


def test_debian_route_extracts_into_resources(fake_apt, tmp_path):
    loaded = sources.load_fashion_mnist(str(tmp_path / "data"))
    assert loaded["train-images-idx3-ubyte"].tolist() == [[[1, 2], [3, 4]]]
    assert loaded["train-labels-idx1-ubyte"].tolist() == [7]
    resources = tmp_path / "resources"
    assert (resources / sources.DEBIAN_PACKAGE / sources.PACKAGE_DIR / "train-labels-idx1-ubyte.gz").is_file()
    assert sorted(p.name for p in resources.iterdir()) == [sources.DEBIAN_PACKAGE, f"{sources.DEBIAN_PACKAGE}.lock"]


def _debian_route_in_child(start, results) -> None:
    start.wait()
    try:
        results.put(("ok", sources._debian_route()))
    except BaseException as err:
        results.put(("error", repr(err)))


def _stderr_until(capfd, text: str, count: int) -> str:
    err, deadline = "", time.monotonic() + 60
    while err.count(text) < count and time.monotonic() < deadline:
        time.sleep(0.05)
        err += capfd.readouterr().err
    assert err.count(text) == count, err
    return err


def test_concurrent_jobs_fetch_once_and_both_read_the_complete_tree(fake_apt, tmp_path, capfd):
    resources = tmp_path / "resources"
    resources.mkdir()
    ctx = multiprocessing.get_context("fork")  # the children inherit this test's fakes
    start, results = ctx.Event(), ctx.Queue()
    children = [ctx.Process(target=_debian_route_in_child, args=(start, results)) for _ in range(2)]
    for child in children:
        child.start()
    # Children are started before the lock is taken: a forked child would hold the lock's file description too.
    with (resources / f"{sources.DEBIAN_PACKAGE}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        start.set()
        err = _stderr_until(capfd, "waiting for another process to finish fetching", count=2)  # both race
    outcomes = [results.get(timeout=60) for _ in children]
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    assert outcomes == [("ok", IDX), ("ok", IDX)]
    assert fake_apt.read_text().split() == ["apt-get", "dpkg-deb"]  # one fetch
    err += capfd.readouterr().err
    assert err.count("fetching Fashion-MNIST into") == 1 and "apt-get download dataset-fashion-mnist (network)" in err
    assert not (resources / f"{sources.DEBIAN_PACKAGE}.partial").exists()


def test_a_killed_fetch_leaves_a_partial_tree_that_the_next_fetch_removes(fake_apt, tmp_path, capsys):
    staging = tmp_path / "resources" / f"{sources.DEBIAN_PACKAGE}.partial"
    half = staging / "root" / sources.PACKAGE_DIR
    half.mkdir(parents=True)
    (half / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(IDX["train-images-idx3-ubyte"])[:12])
    loaded = sources.load_fashion_mnist(str(tmp_path / "data"))
    assert loaded["train-images-idx3-ubyte"].tolist() == [[[1, 2], [3, 4]]]
    assert not staging.exists()
    assert f"removing {staging}, left by an interrupted fetch" in capsys.readouterr().err


def _truncate_first_file(directory: Path) -> Path:
    truncated = directory / "train-images-idx3-ubyte.gz"
    truncated.write_bytes(gzip.compress(IDX["train-images-idx3-ubyte"])[:-6])
    (directory / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(IDX["train-labels-idx1-ubyte"]))
    return truncated


def test_a_truncated_gzip_names_the_file_and_the_next_route_is_used(fake_apt, no_routes, tmp_path):
    truncated = _truncate_first_file(no_routes)
    with pytest.raises(DatasetError, match=re.escape(f"{truncated}: truncated or corrupt gzip file (EOFError")):
        sources._system_route()
    (no_routes / "train-labels-idx1-ubyte.gz").write_bytes(b"not gzip")
    with pytest.raises(DatasetError, match=r"train-labels-idx1-ubyte.gz: truncated or corrupt gzip file \(BadGzip"):
        sources.read_verified(no_routes / "train-labels-idx1-ubyte.gz")
    loaded = sources.load_fashion_mnist(str(tmp_path / "data"))  # from the Debian route (fake_apt)
    assert loaded["train-labels-idx1-ubyte"].tolist() == [7]


def test_when_every_route_fails_the_error_has_one_line_per_route_and_how_to_get_the_data(
    no_routes, tmp_path, monkeypatch
):
    truncated = _truncate_first_file(no_routes)
    monkeypatch.setattr(sources.shutil, "which", lambda tool: f"/usr/bin/{tool}")

    def failing_run(command, cwd):
        raise DatasetError("apt-get download dataset-fashion-mnist failed: E: Unable to locate package\nW: more")

    monkeypatch.setattr(sources, "_run", failing_run)
    with pytest.raises(DatasetError) as err:
        sources.load_fashion_mnist(str(tmp_path / "data"))
    header, system, debian, torchvision, how = str(err.value).splitlines()
    assert header == "Fashion-MNIST could not be loaded by any route:"
    assert system.startswith(f"  - the Debian package's files in {sources.SYSTEM_DIR}")
    assert f"{truncated}: truncated or corrupt gzip file (EOFError" in system
    assert debian.startswith("  - the Debian package fetched without root into")
    assert debian.endswith("failed: E: Unable to locate package W: more")
    assert torchvision == f"  - torchvision's download into {tmp_path / 'data'}: no network"
    assert how.startswith("To get it: apt-get install dataset-fashion-mnist (as root), or put the four idx files (")
    assert "t10k-labels-idx1-ubyte.gz) in " + f"{tmp_path / 'data' / 'FashionMNIST' / 'raw'}/" in how
    assert sorted(p.name for p in (tmp_path / "resources").iterdir()) == [f"{sources.DEBIAN_PACKAGE}.lock"]


def test_torchvision_route_downloads_once_then_reads_the_files_offline(no_routes, tmp_path, monkeypatch):
    import torchvision.datasets

    monkeypatch.setattr(sources, "_torchvision_route", TORCHVISION_ROUTE)
    monkeypatch.setattr(sources, "FASHION_MNIST_SHA256", {s: hashlib.sha256(c).hexdigest() for s, c in IDX.items()})
    roots = []

    class FakeFashionMNIST:
        def __init__(self, root: str, download: bool) -> None:
            roots.append(Path(root))
            raw = Path(root) / "FashionMNIST" / "raw"
            raw.mkdir(parents=True)
            for stem, content in IDX.items():
                (raw / f"{stem}.gz").write_bytes(gzip.compress(content))

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", FakeFashionMNIST)
    data_dir = tmp_path / "data"
    first = sources.load_fashion_mnist(str(data_dir))
    sources.load_fashion_mnist.cache_clear()
    second = sources.load_fashion_mnist(str(data_dir))  # the files are in place: no second download
    assert roots == [data_dir / "FashionMNIST" / "raw.partial"]
    assert sorted(p.name for p in (data_dir / "FashionMNIST").iterdir()) == ["raw", "raw.lock"]
    assert second["train-labels-idx1-ubyte"].tolist() == first["train-labels-idx1-ubyte"].tolist() == [7]


def test_a_cifar_download_has_a_socket_timeout_and_fails_with_how_to_get_it(tmp_path, monkeypatch):
    """torchvision opens its URLs with no timeout, so a network that drops packets would hang the data rule."""
    import socket

    import torchvision.datasets

    seen = []

    class UnreachableCIFAR100:
        def __init__(self, root: str, train: bool, transform: object, download: bool) -> None:
            seen.append((download, socket.getdefaulttimeout()))
            if not download:
                raise RuntimeError("Dataset not found or corrupted.")
            raise TimeoutError("timed out")

    monkeypatch.setattr(torchvision.datasets, "CIFAR100", UnreachableCIFAR100)
    before = socket.getdefaulttimeout()
    with pytest.raises(DatasetError, match=r"cifar100 is not in .* downloaded \(TimeoutError: timed out\)"):
        data.fetch("cifar100", str(tmp_path))
    assert seen == [(False, before), (True, sources.DOWNLOAD_TIMEOUT_S)]
    assert socket.getdefaulttimeout() == before  # restored


@pytest.mark.skipif(not sources.SYSTEM_DIR.is_dir(), reason="dataset-fashion-mnist is not installed")
def test_fashion_mnist_from_the_debian_package_with_class_split():
    train, test = data.build_datasets("fashion_mnist", "data", 28, [5, 6, 7, 8, 9], 100, None, seed=0)
    assert len(train) == 100 and len(test) == 5000
    x, y = train[0]
    assert x.shape == (1, 28, 28) and 0 <= y < 5
    assert sorted({test[i][1] for i in range(0, 5000, 50)}) == [0, 1, 2, 3, 4]


def test_subsets_are_deterministic_and_resized():
    a, _ = data.build_datasets("synthetic", "data", 32, None, 10, 5, seed=1)
    b, _ = data.build_datasets("synthetic", "data", 32, None, 10, 5, seed=1)
    c, _ = data.build_datasets("synthetic", "data", 32, None, 10, 5, seed=2)
    assert a.indices == b.indices != c.indices
    assert torch.equal(a[3][0], b[3][0]) and a[3][0].shape == (1, 32, 32)


def test_unknown_class_ids_are_rejected():
    with pytest.raises(ValueError, match="classes: ids must be below 10"):
        data.build_datasets("synthetic", "data", 28, [3, 10], None, None, seed=0)


# --- fetch ahead of training (hot data fetch, the workflow's data rule) -------------------------------------------


def test_fetch_fashion_mnist_fetches_by_the_first_route_that_works_and_says_which(fake_apt, tmp_path):
    found = data.fetch("fashion_mnist", str(tmp_path / "data"))
    assert found.startswith("the Debian package fetched without root into")
    assert (tmp_path / "resources" / sources.DEBIAN_PACKAGE).is_dir()
    assert sources.load_fashion_mnist(str(tmp_path / "data"))["train-labels-idx1-ubyte"].tolist() == [7]  # offline now


def test_fetch_imagenet_finds_an_image_folder_tree_or_says_how_to_get_one(tmp_path):
    root = tmp_path / "imagenet100"
    with pytest.raises(DatasetError, match="ImageFolder layout"):
        data.fetch("imagenet100", str(root))
    for split in ("train", "val"):
        for c in range(100):
            (root / split / f"n{c:08d}").mkdir(parents=True)
    assert data.fetch("imagenet100", str(root)) == f"{root}/train and {root}/val (ImageFolder)"
    assert "ILSVRC-2012" in sources.how_to_get("imagenet1k", str(root))
    assert data.fetch("synthetic", str(root)) == "generated in memory"


def test_hot_data_fetch_records_a_missing_dataset_and_how_to_get_it(tmp_path, capsys):
    from hot.cli import main

    out = tmp_path / "status" / "imagenet1k.json"
    argv = ["data", "fetch", "--dataset", "imagenet1k", "--root", str(tmp_path / "inet"), "--out", str(out)]
    assert main(argv) == 1
    assert main([*argv, "--allow-missing"]) == 0
    record = json.loads(out.read_text())
    assert record["status"] == "missing" and record["dataset"] == "imagenet1k"
    assert record["reason"].startswith(f"imagenet1k not found at {tmp_path / 'inet'} (how to get it: ILSVRC-2012")
    assert record["reason"] in capsys.readouterr().err
    assert main(["data", "fetch", "--dataset", "synthetic", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == {
        "dataset": "synthetic",
        "data_dir": "data",
        "status": "ready",
        "found": "generated in memory",
    }


def test_any_dataset_can_be_synthetic_of_its_own_shape_and_learnable(tmp_path):
    """Nothing is read (no data_dir), the class count, channels, side and split sizes are the dataset's own."""
    train, test = data.build_datasets("imagenet1k", str(tmp_path / "absent"), 224, None, None, None, 0, synthetic=True)
    assert (len(train), len(test)) == (1_281_167, 50_000)
    x, y = train[5]
    assert x.shape == (3, 224, 224) and 0 <= y < 1000
    assert torch.equal(train[5][0], x)  # made from the index: the same sample every time
    assert data.dataset_info("imagenet1k", str(tmp_path / "absent"), synthetic=True) == (1000, 3)
    train, _ = data.build_datasets("cifar100", str(tmp_path / "absent"), 32, [3, 7], 64, 16, 0, synthetic=True)
    assert train.base.side == 32 and len(train) == 64
    # learnable: every sample is nearest to its own class's prototype
    prototypes = torch.nn.functional.interpolate(train.base.prototypes, size=(32, 32), mode="nearest")
    for i in range(len(train)):
        x, y = train[i]
        label = train.base.labels[train.indices[i]]
        assert [3, 7][y] == label and ((prototypes - x) ** 2).sum((1, 2, 3)).argmin() == label


def test_hot_data_fetch_records_synthetic_data_ready_without_reading(tmp_path):
    from hot.cli import main

    out = tmp_path / "imagenet100.json"
    args = ["data", "fetch", "--dataset", "imagenet100", "--root", str(tmp_path / "absent"), "--synthetic"]
    assert main([*args, "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["status"] == "ready"
    assert record["found"] == "generated in memory (imagenet100's shape: 3x224², 100 classes)"


def _images(n: int, channels: int | None, side: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(n)
    shape = (n, side, side) if channels is None else (n, channels, side, side)
    return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8), torch.randint(0, 10, (n,), generator=g)


@pytest.mark.parametrize(("channels", "size"), [(None, 9), (None, 12), (3, 9), (3, 7)])
def test_a_batch_of_in_memory_images_equals_the_samples_made_one_by_one(channels, size):
    images, labels = _images(40, channels)
    mean, std = ((0.3,), (0.4,)) if channels is None else ((0.1, 0.2, 0.3), (0.5, 0.6, 0.7))
    ds = data.ImageTensorDataset(images, labels, mean, std, size)
    indices = [7, 0, 39, 12, 12, 3]
    x, y = ds.get_batch(indices)
    for row, i in enumerate(indices):  # the per-sample transform, written out
        one = images[i].float().div(255.0)
        one = (one.unsqueeze(0) if one.dim() == 2 else one).sub(torch.tensor(mean).view(-1, 1, 1))
        one = one.div(torch.tensor(std).view(-1, 1, 1))
        if size != 9:
            one = torch.nn.functional.interpolate(one[None], size=(size, size), mode="bilinear", align_corners=False)[0]
        assert torch.equal(x[row], one), (row, i)
        assert y[row].item() == labels[i].item()
    assert y.dtype == torch.long


@pytest.mark.parametrize("classes", [None, [7, 2, 5]])
def test_batch_loader_yields_the_dataloaders_batches(classes):
    images, labels = _images(300, None)
    base = data.ImageTensorDataset(images, labels, (0.3,), (0.4,), 9)
    selected = data.select(base, labels, classes, 100, seed=3)
    for epoch_seed in (0, 1):
        # what the training loop built before: a shuffling DataLoader (its worker seed and order from one generator)
        loader_batches = torch.utils.data.DataLoader(
            selected, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(epoch_seed)
        )
        g = torch.Generator().manual_seed(epoch_seed)
        ours = data.BatchLoader(
            selected, torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(selected, generator=g), 16, False), g
        )
        assert len(ours) == len(loader_batches) == -(-len(selected) // 16) > 1
        pairs = list(zip(ours, loader_batches, strict=True))
        for (x, y), (x_ref, y_ref) in pairs:
            assert torch.equal(x, x_ref) and torch.equal(y, y_ref)
    assert set(torch.cat([y for _, y in ours]).tolist()) <= set(range(len(classes or range(10))))


def test_batch_loader_refuses_datasets_made_per_sample():
    train, _ = data.build_datasets("synthetic", "data", 32, None, 10, 5, seed=1)
    assert not train.batched
    with pytest.raises(ValueError, match="SyntheticImages makes no whole batches"):
        data.BatchLoader(train, torch.utils.data.BatchSampler(range(10), 4, False), None)
