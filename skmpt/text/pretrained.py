"""Pretrained masked LMs that install offline: AntiBERTy's checkpoint as a ``transformers`` BERT.

AntiBERTy (Ruffolo et al., 2021, MIT licence) is a BERT with 8 layers of 512 units trained as a
masked LM on 558 million antibody sequences, one token per amino acid. The wheel of its package
``antiberty==0.1.3`` holds the checkpoint (``pytorch_model.bin`` with the masked-LM head under
the key names of ``BertForMaskedLM``, plus species, chain and grafting heads) and its
``vocab.txt``; later versions download the weights at run time instead. :func:`load_antiberty`
reads those files from the installed package, with no network.
"""

import importlib.metadata
import json
from pathlib import Path

import torch

__all__ = ["ANTIBERTY_VERSION", "load_antiberty"]

#: The version of the ``antiberty`` package whose wheel ships the weights.
ANTIBERTY_VERSION = "0.1.3"

# The heads of AntiBERTy beside the masked-LM head (species, chain, grafting): not part of BertForMaskedLM.
_EXTRA_HEADS = ("cls.species.", "cls.chain.", "cls.graft.")


def _antiberty_files():
    """``(checkpoint directory, vocab.txt)`` of the installed ``antiberty`` package, or a clear error."""
    try:
        distribution = importlib.metadata.distribution("antiberty")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(
            f"load_antiberty needs the package antiberty=={ANTIBERTY_VERSION}, whose wheel ships the weights: "
            f"pip install --no-deps antiberty=={ANTIBERTY_VERSION} (it needs only torch and transformers)."
        ) from None
    root = Path(distribution.locate_file("antiberty"))
    checkpoint = root / "trained_models" / "AntiBERTy_md_smooth"
    vocab = root / "trained_models" / "vocab.txt"
    missing = [path for path in (checkpoint / "config.json", checkpoint / "pytorch_model.bin", vocab)
               if not path.is_file()]
    if missing:
        raise ImportError(
            f"antiberty {distribution.version} is installed but lacks {', '.join(map(str, missing))}: only "
            f"version {ANTIBERTY_VERSION} ships the weights in its wheel (later versions download them). "
            f"pip install --no-deps antiberty=={ANTIBERTY_VERSION}."
        )
    return checkpoint, vocab


def _antiberty_tokenizer(vocab_file):
    """One token per residue, spaces optional: ``"EVQ"`` and ``"E V Q"`` give the same ids and word ids."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tokens = Path(vocab_file).read_text(encoding="utf-8").split()
    vocab = {token: index for index, token in enumerate(tokens)}
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex("."), "isolated")]
    )
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_max_length=512, name_or_path="antiberty",
    )


def load_antiberty(*, pretrained=True, random_state=None):
    """AntiBERTy as a ``transformers.BertForMaskedLM`` and its tokenizer, from the installed package.

    Reads the checkpoint and vocabulary that the wheel of ``antiberty==0.1.3`` installs (no
    network): the configuration (8 layers, 512 hidden units, 8 heads, 25 tokens), the encoder
    and the masked-LM head (``cls.predictions.*``); AntiBERTy's species, chain and grafting
    heads are dropped, and every weight of ``BertForMaskedLM`` must be found. The tokenizer
    makes one token, and one word, of each residue letter (``A C D E F G H I K L M N P Q R S T
    V W Y``; spaces between residues are optional, other characters become ``[UNK]``), between
    ``[CLS]`` and ``[SEP]``, as AntiBERTy was trained. Both go straight to
    :class:`~skmpt.MLMCurveScorer`: ``MLMCurveScorer(model, tokenizer=tokenizer)``.

    Parameters
    ----------
    pretrained : bool, default=True
        ``False`` gives the same architecture at random initialisation (the paper's random
        baseline), seeded by ``random_state``; the checkpoint's configuration is still read.
    random_state : int, RandomState instance or None, default=None
        Seeds the random initialisation when ``pretrained=False``.

    Returns
    -------
    model : transformers.BertForMaskedLM
        In evaluation mode, float32, on the CPU.
    tokenizer : transformers.PreTrainedTokenizerFast

    Raises
    ------
    ImportError
        When ``antiberty`` is not installed, or is a version whose wheel holds no weights.
    ValueError
        When the checkpoint lacks weights of ``BertForMaskedLM`` or holds unexpected ones.

    Examples
    --------
    >>> from skmpt.text import load_antiberty
    >>> model, tokenizer = load_antiberty()  # doctest: +SKIP
    >>> model.config.num_hidden_layers, len(tokenizer)  # doctest: +SKIP
    (8, 25)
    >>> tokenizer.convert_ids_to_tokens(tokenizer("EVQ")["input_ids"])  # doctest: +SKIP
    ['[CLS]', 'E', 'V', 'Q', '[SEP]']
    """
    import transformers
    from sklearn.utils import check_random_state

    checkpoint, vocab = _antiberty_files()
    settings = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    settings = {key: value for key, value in settings.items()
                if key not in ("_name_or_path", "architectures", "transformers_version")}
    config = transformers.BertConfig(**settings)
    tokenizer = _antiberty_tokenizer(vocab)
    seed = int(check_random_state(random_state).randint(2**31 - 1))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.BertForMaskedLM(config)
    if pretrained:
        state = torch.load(checkpoint / "pytorch_model.bin", map_location="cpu", weights_only=True)
        state = {key: value for key, value in state.items() if not key.startswith(_EXTRA_HEADS)}
        expected = set(model.state_dict())
        state = {key: value for key, value in state.items() if key in expected or not key.startswith("bert.pooler")}
        missing = sorted(expected - set(state) - {"bert.embeddings.position_ids"})
        unexpected = sorted(set(state) - expected - {"bert.embeddings.position_ids"})
        if missing or unexpected:
            raise ValueError(
                f"The AntiBERTy checkpoint {checkpoint} does not match BertForMaskedLM: missing {missing[:5]}, "
                f"unexpected {unexpected[:5]}."
            )
        state = {key: value for key, value in state.items() if key in expected}
        model.load_state_dict(state, strict=False)
    model.config.name_or_path = "antiberty" if pretrained else "antiberty (random initialisation)"
    return model.eval(), tokenizer
