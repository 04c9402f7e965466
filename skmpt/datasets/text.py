"""Text: WordNet's example sentences (embedded), GLUE tasks, and a WordPiece tokenizer to train.

:func:`load_wordnet_sentences` reads the corpus shipped in skmpt's package data;
:func:`load_glue` reads the official GLUE files from a directory (or asks the Hugging Face hub
when none is given); :func:`make_wordpiece_tokenizer` trains a BERT-style vocabulary.
"""

import gzip
import os
from importlib import resources
from pathlib import Path

from .._validation import Options, validated

__all__ = ["load_glue", "load_wordnet_sentences", "make_wordpiece_tokenizer"]


def load_wordnet_sentences():
    """The 48,224 English example sentences of WordNet 3.0, embedded in skmpt.

    Short everyday sentences (six words on average, at most 46) quoted in WordNet's glosses,
    read from Debian's ``wordnet-base`` package and shipped, with WordNet's licence notice
    (``skmpt/data/WORDNET_NOTICE.txt``), as a compressed file: a corpus for masked-LM demos
    and tests that needs no download.

    Returns
    -------
    sentences : list of str
        In the order of WordNet's data files (nouns, verbs, adjectives, adverbs).

    Examples
    --------
    >>> from skmpt.datasets import load_wordnet_sentences
    >>> sentences = load_wordnet_sentences()
    >>> len(sentences), sentences[2]
    (48224, 'the team is a unit')
    """
    corpus = resources.files("skmpt") / "data" / "wordnet_examples.txt.gz"
    with corpus.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as file:
        return file.read().splitlines()


def make_wordpiece_tokenizer(texts, *, vocab_size=8000, lowercase=True):
    """Train a BERT-style WordPiece tokenizer on ``texts`` with Hugging Face ``tokenizers``.

    BERT's normalisation and pre-tokenisation, its special tokens ``[PAD] [UNK] [CLS] [SEP]
    [MASK]`` and its template ``[CLS] text [SEP]``, wrapped as a ``transformers`` fast
    tokenizer: what a small masked LM trained from scratch needs (``save_pretrained`` writes it
    next to the model).

    Parameters
    ----------
    texts : iterable of str
    vocab_size : int, default=8000
        Largest vocabulary, special tokens included; a small corpus may give fewer.
    lowercase : bool, default=True

    Returns
    -------
    tokenizer : transformers.PreTrainedTokenizerFast

    Notes
    -----
    The vocabulary is a function of ``texts``, ``vocab_size`` and ``lowercase`` alone: the same in
    every call and every process. ``tokenizers``' own WordPiece trainer numbers the ``##``
    continuation pieces in hash-map order and breaks ties between merge counts by those numbers
    (huggingface/tokenizers issue 1794), so two calls in one process could give two vocabularies.
    Here its BPE trainer learns the merges instead, with each continuation character written as a
    character of Unicode's private use area ``U+F0000..``: the alphabet is then numbered in sorted
    order, ties are broken by those numbers, and the merges are mapped back to ``##`` pieces.

    Examples
    --------
    >>> from skmpt.datasets import make_wordpiece_tokenizer
    >>> tokenizer = make_wordpiece_tokenizer(["the cat sat on the mat"] * 5, vocab_size=60)
    >>> tokenizer.convert_ids_to_tokens(tokenizer("the cat")["input_ids"])
    ['[CLS]', 'the', 'cat', '[SEP]']
    """
    try:
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
        from transformers import PreTrainedTokenizerFast
    except ImportError as error:
        raise ImportError(f'make_wordpiece_tokenizer needs tokenizers and transformers ({error}), of skmpt\'s text '
                          'extra. Install it with: pip install "skmpt[text]"') from error

    specials = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]"}
    specials["mask_token"] = "[MASK]"
    normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    vocab = _wordpiece_vocab(texts, normalizer, pre_tokenizer, vocab_size, list(specials.values()))
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **specials)


# Continuation characters are trained as characters of the supplementary private use area A.
_PRIVATE_USE_START, _PRIVATE_USE_SIZE = 0xF0000, 65534


def _wordpiece_vocab(texts, normalizer, pre_tokenizer, vocab_size, special_tokens):
    """A WordPiece vocabulary (token -> id) learnt by BPE merges in an order fixed by ``texts`` alone."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    words = [[word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))] for text in texts]
    characters = sorted({c for text_words in words for word in text_words for c in word})
    # BERT's normaliser removes private-use characters from the texts: the codes cannot collide
    if len(characters) > _PRIVATE_USE_SIZE:
        raise ValueError(f"make_wordpiece_tokenizer takes texts of at most {_PRIVATE_USE_SIZE} distinct characters; "
                         f"got {len(characters)}.")
    coded = {c: chr(_PRIVATE_USE_START + i) for i, c in enumerate(characters)}
    decoded = {code: c for c, code in coded.items()}
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens, show_progress=False)
    bpe.train_from_iterator(
        (" ".join(word[0] + "".join(coded[c] for c in word[1:]) for word in text_words) for text_words in words),
        trainer,
    )
    vocab = {}
    for token, index in sorted(bpe.get_vocab().items(), key=lambda item: item[1]):
        if token not in special_tokens:
            # a token that starts inside a word is a continuation piece
            head = "##" + decoded[token[0]] if token[0] in decoded else token[0]
            token = head + "".join(decoded[c] for c in token[1:])
        vocab[token] = index
    return vocab


# The official GLUE layout (the files of gluebenchmark.com's download script): per task a
# directory, per split a TSV file, with or without a header, read with quoting off. Each entry
# gives the directory, the file of each split, whether it has a header row, the column names
# of train/dev and of test, and how they map to the hub's names (``nyu-mll/glue``).
_GLUE_TASKS = {
    "cola": ("CoLA", None, ["source", "label", "original_label", "sentence"], ["idx", "sentence"], ("sentence",)),
    "sst2": ("SST-2", 0, ["sentence", "label"], ["idx", "sentence"], ("sentence",)),
    "mrpc": (
        "MRPC",
        0,
        ["label", "id1", "id2", "sentence1", "sentence2"],
        ["idx", "id1", "id2", "sentence1", "sentence2"],
        ("sentence1", "sentence2"),
    ),
    "qnli": (
        "QNLI", 0, ["idx", "question", "sentence", "label"], ["idx", "question", "sentence"], ("question", "sentence")
    ),
    "rte": (
        "RTE",
        0,
        ["idx", "sentence1", "sentence2", "label"],
        ["idx", "sentence1", "sentence2"],
        ("sentence1", "sentence2"),
    ),
    "ax": ("diagnostic", 0, None, ["idx", "premise", "hypothesis"], ("premise", "hypothesis")),
}
_GLUE_FILES = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}
_GLUE_LABELS = {"entailment": 0, "not_entailment": 1}


def _check_glue_tsv(path, names, has_header):
    """Raise a ValueError naming ``path`` and the line of the first row ``datasets`` would misread.

    With quoting off, a row with too few fields would be read with empty columns and one with
    too many fails deep inside pandas; a blank line would be skipped; a label or index that is
    not a number would fail later without a line number.
    """
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text: {exc}.") from exc
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    numeric = [i for i, name in enumerate(names) if name in ("label", "idx")]
    for number, line in enumerate(lines, start=1):
        fields = line.removesuffix("\r").split("\t")
        if line in ("", "\r"):
            raise ValueError(f"{path}, line {number}: empty line; GLUE files have one row per line.")
        if len(fields) != len(names):
            raise ValueError(
                f"{path}, line {number}: {len(fields)} tab-separated fields where {len(names)} are expected "
                f"({', '.join(names)})."
            )
        if has_header and number == 1:
            continue
        for i in numeric:
            if names[i] == "label" and fields[i] in _GLUE_LABELS:
                continue
            try:
                int(fields[i])
            except ValueError:
                raise ValueError(
                    f"{path}, line {number}: the {names[i]} field is {fields[i]!r}, not an integer"
                    + (f" or one of {sorted(_GLUE_LABELS)}." if names[i] == "label" else ".")
                ) from None


@validated(
    {
        "task": [Options(_GLUE_TASKS)],
        "split": [Options(_GLUE_FILES)],
        "data_dir": [None, str, os.PathLike],
        "cache_dir": [None, str, os.PathLike],
    }
)
def load_glue(task, split="validation", *, data_dir=None, cache_dir=None):
    r"""A GLUE task's split as a ``datasets.Dataset``, from the official TSV files or the hub.

    With ``data_dir`` the official layout is read from disk (``<data_dir>/CoLA/dev.tsv``,
    ``<data_dir>/diagnostic/diagnostic.tsv`` for AX, ...): no network. Without it the task is
    loaded from the Hugging Face hub (``nyu-mll/glue``), which needs a connection or a cached
    copy. Either way the columns are the hub's: the text columns, ``label`` (an int; -1 on
    test splits, whose labels are not public) and ``idx``.

    Parameters
    ----------
    task : {"cola", "sst2", "mrpc", "qnli", "rte", "ax"}
        The paper's Table 2 uses AX, CoLA, QNLI and MRPC. AX has only a test split.
    split : {"train", "validation", "test"}, default="validation"
        ``"validation"`` is the ``dev.tsv`` file.
    data_dir : str or path-like, default=None
        The directory holding the task directories (``CoLA/``, ``MRPC/``, ...).
    cache_dir : str or path-like, default=None
        Where ``datasets`` caches what it reads; its default cache when ``None``.

    Returns
    -------
    dataset : datasets.Dataset
        Text columns ``sentence`` (CoLA, SST-2), ``sentence1`` and ``sentence2`` (MRPC, RTE),
        ``question`` and ``sentence`` (QNLI) or ``premise`` and ``hypothesis`` (AX), then
        ``label`` and ``idx``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from skmpt.datasets import load_glue
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "CoLA").mkdir()
    >>> _ = (root / "CoLA" / "dev.tsv").write_text("gj04\t1\t\tThe sailors rode the breeze.\n")
    >>> cola = load_glue("cola", "validation", data_dir=root, cache_dir=root / "cache")
    >>> cola[0]
    {'sentence': 'The sailors rode the breeze.', 'label': 1, 'idx': 0}
    """
    import datasets

    if data_dir is None:
        return datasets.load_dataset("nyu-mll/glue", task, split=split, cache_dir=cache_dir)
    directory, header, names, test_names, text_columns = _GLUE_TASKS[task]
    if task == "ax":
        if split != "test":
            raise ValueError(f"GLUE's AX (diagnostic) task has only a test split; got split={split!r}.")
        path = Path(data_dir) / directory / "diagnostic.tsv"
    else:
        path = Path(data_dir) / directory / _GLUE_FILES[split]
    if not path.is_file():
        raise FileNotFoundError(
            f"No GLUE file {path}; data_dir must hold the official layout (<task dir>/<split>.tsv)."
        )
    if split == "test":
        header, names = 0, test_names
    _check_glue_tsv(path, names, header is not None)
    features = datasets.Features({name: datasets.Value("string") for name in names})
    raw = datasets.load_dataset(
        "csv",
        data_files={split: str(path)},
        split=split,
        sep="\t",
        header=header,
        names=names,
        quoting=3,  # csv.QUOTE_NONE: GLUE's texts contain quotes
        keep_default_na=False,
        features=features,
        cache_dir=cache_dir,
    )

    def normalise(row, index):
        label = row.get("label")
        if label is None:
            label = -1
        elif label in _GLUE_LABELS:
            label = _GLUE_LABELS[label]
        else:
            label = int(label)
        out = {column: row[column] for column in text_columns}
        out.update(label=label, idx=int(row["idx"]) if "idx" in row else index)
        return out

    dataset = raw.map(normalise, with_indices=True, remove_columns=raw.column_names)
    return dataset.select_columns([*text_columns, "label", "idx"])
