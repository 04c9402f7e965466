"""Encoding texts: a text spelt in characters the tokenizer does not know is named in one warning."""

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import SPECIALS, binary_tokenizer  # noqa: E402

import skmpt.text as sktext  # noqa: E402
from skmpt import MLMCurveScorer  # noqa: E402


def character_tokenizer(alphabet):
    """One token per character of ``alphabet``, spaces optional, as AntiBERTy's tokenizer."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*SPECIALS, *alphabet])}
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                     pre_tokenizers.Split(Regex("."), "isolated")])
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def unknown_warnings(caught):
    return [w for w in caught if "does not know" in str(w.message)]


def test_unknown_tokens_warn_once_per_call_with_each_texts_count_and_characters():
    tokenizer = character_tokenizer("ACDE")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sktext.encode_texts(["ACE", "acE", "A-C*1", "DE"], tokenizer, 32)
    [warning] = unknown_warnings(caught)
    message = str(warning.message)
    assert warning.category is UserWarning
    assert message.startswith("2 of 4 texts hold 5 tokens the tokenizer does not know, each scored as '[UNK]'")
    assert "Text 1 (2: 'a' 1, 'c' 1); Text 2 (3: '-' 1, '*' 1, '1' 1)." in message
    assert "'a', 'c' are in the vocabulary in upper case." in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sktext.encode_texts(["ACE", "D E"], tokenizer, 32)  # known characters: no warning


def test_a_scorer_warns_at_each_scoring_call_and_a_word_tokenizer_names_the_word():
    tokenizer = binary_tokenizer()
    scorer = MLMCurveScorer(sktext.ModulePredictor(lambda input_ids, attention_mask: input_ids[..., None].new_zeros(
        (*input_ids.shape, len(tokenizer)), dtype=float), tokenizer.mask_token_id), tokenizer=tokenizer, device="cpu",
        score_masks=2, random_state=0).fit()
    message = re.escape("1 of 2 texts hold 1 tokens") + ".*Text 0 \\(1: 'ab' 1\\)"
    for _ in range(2):
        with pytest.warns(UserWarning, match=message) as caught:
            scores = scorer.score_samples(["a ab b", "a b"])
        assert np.isfinite(scores).all() and caught[0].filename == __file__  # the warning points at this call


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet="ACDEacx-*1 ", min_size=1, max_size=12).filter(str.strip), min_size=1, max_size=6))
def test_the_warning_counts_every_unknown_character(texts):
    tokenizer = character_tokenizer("ACDE")
    unknown = [sum(c not in "ACDE " for c in text) for text in texts]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sktext.encode_texts(texts, tokenizer, 64)
    found = unknown_warnings(caught)
    if not any(unknown):
        assert not found
        return
    [warning] = found
    flagged = sum(count > 0 for count in unknown)
    assert str(warning.message).startswith(
        f"{flagged} of {len(texts)} texts hold {sum(unknown)} tokens the tokenizer does not know")
    for i, count in enumerate(unknown[:5]):
        assert (f"Text {i} ({count}" in str(warning.message)) == (count > 0)


def test_antiberty_says_residues_are_upper_case_one_letter_codes():
    pytest.importorskip("antiberty")
    _, tokenizer = sktext.load_antiberty(pretrained=False, random_state=0)
    with pytest.warns(UserWarning, match="AntiBERTy's residues are upper-case one-letter amino-acid codes"):
        sktext.encode_texts(["evqlvesgg"], tokenizer, 64)


@pytest.mark.installed  # the stacklevel is found from the installed package's path, in CI
def test_the_warning_points_at_the_users_call():
    tokenizer = character_tokenizer("ACDE")
    with pytest.warns(UserWarning, match="does not know") as caught:
        sktext.encode_texts(["acE"], tokenizer, 32)
    assert caught[0].filename == __file__
