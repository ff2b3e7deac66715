import gzip

import pytest
import torch

from hot.train import data
from hot.train.data import ChecksumError, DatasetError


@pytest.fixture
def no_routes(tmp_path, monkeypatch):
    """Every route pointed at tmp_path: an empty system dir, no apt-get, a failing download."""
    system = tmp_path / "system"
    system.mkdir()
    monkeypatch.setattr(data, "SYSTEM_DIR", system)
    monkeypatch.setattr(data, "RESOURCES_DIR", tmp_path / "resources")
    monkeypatch.setattr(data.shutil, "which", lambda tool: None)

    def offline(data_dir):
        raise DatasetError("no network")

    monkeypatch.setattr(data, "_torchvision_route", offline)
    data.load_fashion_mnist.cache_clear()
    yield system
    data.load_fashion_mnist.cache_clear()


def test_checksum_failure_is_reported_with_every_route(no_routes, tmp_path):
    for stem in data.FASHION_MNIST_SHA256:
        (no_routes / f"{stem}.gz").write_bytes(gzip.compress(b"not fashion-mnist"))
    with pytest.raises(ChecksumError, match=r"train-images-idx3-ubyte.gz: SHA-256 of the decompressed data is"):
        data.read_verified(no_routes / "train-images-idx3-ubyte.gz")
    with pytest.raises(DatasetError) as err:
        data.load_fashion_mnist(str(tmp_path / "data"))
    message = str(err.value)
    assert "SHA-256 of the decompressed data" in message
    assert "apt-get install dataset-fashion-mnist" in message
    assert "apt-get download dataset-fashion-mnist + dpkg-deb -x" in message and "apt-get not found" in message
    assert "torchvision's download" in message and "no network" in message


def test_debian_route_extracts_into_resources(no_routes, tmp_path, monkeypatch):
    # A stand-in for apt-get/dpkg-deb: the route must look for the files where dpkg-deb -x puts them.
    extracted = tmp_path / "resources" / data.DEBIAN_PACKAGE / "usr/share/datasets/fashion-mnist"
    idx = {
        "train-images-idx3-ubyte": bytes([0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4]),
        "train-labels-idx1-ubyte": bytes([0, 0, 8, 1, 0, 0, 0, 1, 7]),
    }
    hashes = {stem: data.hashlib.sha256(content).hexdigest() for stem, content in idx.items()}
    monkeypatch.setattr(data, "FASHION_MNIST_SHA256", hashes)
    monkeypatch.setattr(data.shutil, "which", lambda tool: f"/usr/bin/{tool}")

    def fake_run(command, cwd):
        if command[0] == "apt-get":
            (cwd / f"{data.DEBIAN_PACKAGE}_1_all.deb").write_bytes(b"deb")
        else:
            extracted.mkdir(parents=True)
            for stem, content in idx.items():
                (extracted / f"{stem}.gz").write_bytes(gzip.compress(content))

    monkeypatch.setattr(data, "_run", fake_run)
    loaded = data.load_fashion_mnist(str(tmp_path / "data"))
    assert loaded["train-images-idx3-ubyte"].tolist() == [[[1, 2], [3, 4]]]
    assert loaded["train-labels-idx1-ubyte"].tolist() == [7]


@pytest.mark.skipif(not data.SYSTEM_DIR.is_dir(), reason="dataset-fashion-mnist is not installed")
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
