"""Small files in the layouts of the real data sets, written by the tests."""

import gzip
import struct

import numpy as np


def write_mnist(directory, n=6, subset="train", compress=True, seed=0):
    rng = np.random.RandomState(seed)
    images = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
    labels = rng.randint(0, 10, size=n).astype(np.uint8)
    prefix = "train" if subset == "train" else "t10k"
    directory.mkdir(parents=True, exist_ok=True)
    write_idx(directory / f"{prefix}-images-idx3-ubyte", images, compress)
    write_idx(directory / f"{prefix}-labels-idx1-ubyte", labels, compress)
    return images, labels


def write_glue(root):
    """A few lines of each task in the official GLUE layout (headers as the real files have them)."""
    files = {
        "CoLA/train.tsv": "gj04\t1\t\tOur friends won't buy this analysis.\nclc95\t0\t*\tThe more we study verbs.\n",
        "CoLA/dev.tsv": 'gj04\t1\t\tThe sailors rode the breeze clear of the "rocks".\n',
        "CoLA/test.tsv": "index\tsentence\n0\tBill whistled past the house.\n",
        "MRPC/dev.tsv": "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        '1\t1355540\t1355592\tHe said "yes".\tHe agreed.\n',
        "QNLI/dev.tsv": "index\tquestion\tsentence\tlabel\n0\tWhat came?\tThe rain came.\tentailment\n"
        "1\tWho left?\tNobody stayed.\tnot_entailment\n",
        "diagnostic/diagnostic.tsv": "index\tsentence1\tsentence2\n0\tThe cat sat.\tA cat sat.\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def write_idx(path, array, compress=False):
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int32): 0x0C, np.dtype(np.float64): 0x0E}
    array = np.asarray(array)
    header = bytes([0, 0, codes[array.dtype], array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    payload = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if compress else open
    with opener(str(path) + (".gz" if compress else ""), "wb") as f:
        f.write(payload)
