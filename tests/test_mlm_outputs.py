"""MLMCurveScorer on a real pretrained masked LM (AntiBERTy) and its per-token, per-word outputs."""

import types

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from transformers import PreTrainedTokenizerFast  # noqa: E402

import skmpt.text as sktext  # noqa: E402
from skmpt import MLMCurveScorer  # noqa: E402

# Trastuzumab's heavy-chain CDR-H1 region and the first residues of its light chain (see
# examples/data/antibody_sequences.csv for the full domains and their source).
SEQUENCES = ["EVQLVESGGGLVQPGGSLRLSCAAS", "DIQMTQSPSSLSASVGDRVTITC"]


@pytest.fixture(scope="module")
def antiberty():
    pytest.importorskip("antiberty")
    return sktext.load_antiberty()


def test_antiberty_loads_offline_and_scores_far_above_random(antiberty):
    model, tokenizer = antiberty
    assert type(model).__name__ == "BertForMaskedLM" and model.config.num_hidden_layers == 8
    assert tokenizer.convert_ids_to_tokens(tokenizer("EV Q")["input_ids"]) == ["[CLS]", "E", "V", "Q", "[SEP]"]
    lengths = np.array([len(s) for s in SEQUENCES])
    pll = MLMCurveScorer(model, tokenizer=tokenizer, random_state=0).fit().pseudo_log_likelihood(SEQUENCES)
    random_model, _ = sktext.load_antiberty(pretrained=False, random_state=0)
    random_pll = MLMCurveScorer(random_model, tokenizer=tokenizer, random_state=0).fit().pseudo_log_likelihood(
        SEQUENCES
    )
    assert np.isfinite(pll).all()
    # per residue: the pretrained model is sure of these framework residues; a random one is near log(1/25)
    assert (pll / lengths > -1.0).all()
    assert (random_pll / lengths < -2.5).all()


def test_load_antiberty_error_without_the_package(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ImportError, match="antiberty==0.1.3"):
        sktext.load_antiberty()
