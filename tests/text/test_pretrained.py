"""load_antiberty: AntiBERTy's architecture and tokenizer from the installed wheel, and its errors."""


import importlib.metadata
import types

import pytest
import torch

import skmpt.text as sktext  # noqa: E402
from skmpt.text.pretrained import ANTIBERTY_VERSION, load_antiberty  # noqa: E402

pytest.importorskip("transformers")


pytest.importorskip("tokenizers")


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


pytest.importorskip("transformers")


pytest.importorskip("tokenizers")


RESIDUES = "ACDEFGHIKLMNPQRSTVWY"


FRAMEWORK = "EVQLVESGGGLVQPGGSLRLSCAASGFNIK"


@pytest.fixture(scope="module")
def antiberty():
    """The pretrained model and tokenizer, two random initialisations with one seed, and whether
    initialising them changed torch's global random state."""
    pytest.importorskip("antiberty")
    state = torch.random.get_rng_state()
    model, tokenizer = load_antiberty()
    random_model, _ = load_antiberty(pretrained=False, random_state=0)
    again, _ = load_antiberty(pretrained=False, random_state=0)
    unchanged = torch.equal(state, torch.random.get_rng_state())
    return types.SimpleNamespace(model=model, tokenizer=tokenizer, random=random_model, again=again,
                                 global_state_unchanged=unchanged)


def package_file(*parts):
    """A file of the installed ``antiberty`` package (where its wheel puts the checkpoint)."""
    return importlib.metadata.distribution("antiberty").locate_file("antiberty").joinpath("trained_models", *parts)


def test_the_version_is_the_installed_one(antiberty):
    assert importlib.metadata.version("antiberty") == ANTIBERTY_VERSION


def test_the_model_has_antibertys_architecture_in_evaluation_mode_float32_on_the_cpu(antiberty):
    model, tokenizer = antiberty.model, antiberty.tokenizer
    assert type(model).__name__ == "BertForMaskedLM" and not model.training
    config = model.config
    sizes = (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.vocab_size)
    assert sizes == (8, 512, 8, 25)
    assert config.vocab_size == len(tokenizer) and config.name_or_path == "antiberty"
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_the_weights_are_the_checkpoints_masked_lm_weights(antiberty):
    state = torch.load(package_file("AntiBERTy_md_smooth", "pytorch_model.bin"), map_location="cpu", weights_only=True)
    loaded = antiberty.model.state_dict()
    compared = [key for key in loaded if key in state and key != "bert.embeddings.position_ids"]
    # every encoder and masked-LM head weight of BertForMaskedLM is found in the checkpoint and copied
    assert {key for key in loaded if key.startswith(("bert.encoder.", "cls.predictions."))} <= set(compared)
    for key in compared:
        assert torch.equal(loaded[key], state[key]), key
    assert any(key.startswith("cls.species.") for key in state)  # the extra heads exist, and are dropped
    assert not any(key.startswith(("cls.species.", "cls.chain.", "cls.graft.")) for key in loaded)


def test_the_pretrained_head_predicts_masked_framework_residues(antiberty):
    model, tokenizer = antiberty.model, antiberty.tokenizer
    ids = torch.tensor(tokenizer(FRAMEWORK)["input_ids"])
    positions = torch.arange(1, len(FRAMEWORK) + 1)
    batch = ids.repeat(len(positions), 1)
    batch[torch.arange(len(positions)), positions] = tokenizer.mask_token_id
    with torch.no_grad():
        logits = model(input_ids=batch).logits[torch.arange(len(positions)), positions]
    assert logits.shape == (len(FRAMEWORK), 25)
    probabilities = logits.softmax(-1)
    accuracy = float((probabilities.argmax(-1) == ids[positions]).double().mean())
    special = probabilities[:, tokenizer.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])]
    assert accuracy > 0.8  # measured 0.97; the random initialisation gets 0.1
    assert float(special.sum(-1).max()) < 0.01


def test_random_initialisation_is_seeded_and_leaves_the_global_state_alone(antiberty):
    pretrained_state, random_state = antiberty.model.state_dict(), antiberty.random.state_dict()
    again = antiberty.again.state_dict()
    assert random_state.keys() == pretrained_state.keys()
    assert all(torch.equal(random_state[key], again[key]) for key in random_state)
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(random_state[key], pretrained_state[key])
    assert antiberty.random.config.name_or_path == "antiberty (random initialisation)" and not antiberty.random.training
    assert antiberty.global_state_unchanged


def test_the_tokenizer_reads_the_vocabulary_file_in_order(antiberty):
    tokenizer = antiberty.tokenizer
    tokens = package_file("vocab.txt").read_text(encoding="utf-8").split()
    assert tokenizer.convert_ids_to_tokens(list(range(len(tokens)))) == tokens
    assert set(RESIDUES) <= set(tokens)
    assert (tokenizer.pad_token, tokenizer.unk_token, tokenizer.cls_token, tokenizer.sep_token,
            tokenizer.mask_token) == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert tokenizer.model_max_length == 512


def test_one_token_and_one_word_per_residue_with_or_without_spaces(antiberty):
    tokenizer = antiberty.tokenizer
    encoded = tokenizer(RESIDUES)
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"]) == ["[CLS]", *RESIDUES, "[SEP]"]
    assert encoded.word_ids() == [None, *range(20), None]
    for spelling in (" ".join(RESIDUES), "  ".join(RESIDUES[:10]) + "\t" + RESIDUES[10:]):
        spaced = tokenizer(spelling)
        assert spaced["input_ids"] == encoded["input_ids"] and spaced.word_ids() == encoded.word_ids()


def test_other_characters_become_unknown_and_pairs_follow_berts_template(antiberty):
    tokenizer = antiberty.tokenizer
    assert tokenizer.convert_ids_to_tokens(tokenizer("EVx*Q")["input_ids"]) == [
        "[CLS]", "E", "V", "[UNK]", "[UNK]", "Q", "[SEP]"]
    pair = tokenizer("EV", "DI", return_token_type_ids=True)
    assert tokenizer.convert_ids_to_tokens(pair["input_ids"]) == ["[CLS]", "E", "V", "[SEP]", "D", "I", "[SEP]"]
    assert pair["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]
    padded = tokenizer(["EVQ", "E"], padding=True)
    assert padded["input_ids"][1][-2:] == [tokenizer.pad_token_id] * 2 and padded["attention_mask"][1][-2:] == [0, 0]


def test_a_version_without_weights_is_named_with_what_it_lacks(monkeypatch, tmp_path):
    fake = types.SimpleNamespace(version="0.1.4", locate_file=lambda name: tmp_path / name)
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: fake)
    with pytest.raises(ImportError, match=r"antiberty 0\.1\.4 is installed but lacks .*config\.json, .*"
                                          r"pytorch_model\.bin, .*vocab\.txt: only version 0\.1\.3 ships the weights"):
        load_antiberty()


def test_a_checkpoint_that_does_not_match_is_refused(antiberty, monkeypatch):
    original = torch.load

    def without_a_weight(*args, **kwargs):
        state = original(*args, **kwargs)
        del state["cls.predictions.transform.dense.weight"]
        return state

    monkeypatch.setattr(torch, "load", without_a_weight)
    with pytest.raises(ValueError, match=r"does not match BertForMaskedLM: missing \['cls\.predictions\.transform"
                                         r"\.dense\.weight'\], unexpected \[\]"):
        load_antiberty()
