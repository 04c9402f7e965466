"""load_antiberty: AntiBERTy's architecture and tokenizer from the installed wheel, and its errors."""

import types

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import skmpt.text as sktext  # noqa: E402


@pytest.fixture(scope="module")
def random_antiberty():
    pytest.importorskip("antiberty")
    return sktext.load_antiberty(pretrained=False, random_state=0)


def test_a_random_antiberty_has_the_architecture_and_is_seeded(random_antiberty):
    model, tokenizer = random_antiberty
    assert type(model).__name__ == "BertForMaskedLM" and not model.training
    assert model.config.num_hidden_layers == 8 and model.config.hidden_size == 512 and len(tokenizer) == 25
    assert model.config.name_or_path == "antiberty (random initialisation)"
    again, _ = sktext.load_antiberty(pretrained=False, random_state=0)
    other, _ = sktext.load_antiberty(pretrained=False, random_state=1)
    weight = "cls.predictions.transform.dense.weight"
    assert torch.equal(dict(again.named_parameters())[weight], dict(model.named_parameters())[weight])
    assert not torch.equal(dict(other.named_parameters())[weight], dict(model.named_parameters())[weight])


def test_the_tokenizer_makes_one_token_and_one_word_of_each_residue(random_antiberty):
    _, tokenizer = random_antiberty
    spaced, joined = tokenizer("E V Q"), tokenizer("EVQ")
    assert spaced["input_ids"] == joined["input_ids"]
    assert tokenizer.convert_ids_to_tokens(joined["input_ids"]) == ["[CLS]", "E", "V", "Q", "[SEP]"]
    assert joined.word_ids() == [None, 0, 1, 2, None]
    assert tokenizer.convert_ids_to_tokens(tokenizer("EvQ")["input_ids"])[2] == "[UNK]"  # residues are upper case
    assert tokenizer.name_or_path == "antiberty" and tokenizer.mask_token == "[MASK]"


def test_load_antiberty_error_without_the_package(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ImportError, match="antiberty==0.1.3"):
        sktext.load_antiberty()


def test_a_version_whose_wheel_has_no_weights_is_named(monkeypatch, tmp_path):
    import importlib.metadata

    fake = types.SimpleNamespace(version="0.1.4", locate_file=lambda name: tmp_path / name)
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: fake)
    with pytest.raises(ImportError, match=r"antiberty 0.1.4 is installed but lacks .*config.json.*only version 0.1.3 "
                                          r"ships the weights"):
        sktext.load_antiberty(pretrained=False)
