"""Data for skmpt's examples and tests: synthetic generators, embedded data, real sources.

Everything works offline by default; a download happens only when asked for by name.

- Synthetic: :func:`make_ppca`.
- Images: :func:`fetch_mnist` (MNIST and Fashion-MNIST from their IDX
  files, found on disk or downloaded on request), :func:`load_idx`, :func:`load_mnist_5k`,
  :func:`from_torchvision` and :func:`load_binarized_digits` (scikit-learn's embedded digits).
- Text: :func:`load_wordnet_sentences` (embedded), :func:`load_glue` and
  :func:`make_wordpiece_tokenizer`.

Examples
--------
>>> from skmpt.datasets import make_ppca
>>> make_ppca(50, 4, 1, random_state=0).data.shape
(50, 4)
"""

from .images import (
    MNIST_CHECKSUMS,
    MNIST_URLS,
    SYSTEM_DIRS,
    fetch_mnist,
    from_torchvision,
    load_binarized_digits,
    load_idx,
    load_mnist_5k,
)
from .synthetic import make_ppca
from .text import load_glue, load_wordnet_sentences, make_wordpiece_tokenizer

__all__ = [
    "MNIST_CHECKSUMS",
    "MNIST_URLS",
    "SYSTEM_DIRS",
    "fetch_mnist",
    "from_torchvision",
    "load_binarized_digits",
    "load_glue",
    "load_idx",
    "load_mnist_5k",
    "load_wordnet_sentences",
    "make_ppca",
    "make_wordpiece_tokenizer",
]
