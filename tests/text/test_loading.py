"""Loading a masked LM and its tokenizer: what is refused before any weight loads, and what is returned.

Everything here is local: tiny models built from a configuration, saved under ``tmp_path``.
"""

import contextlib
import os
import sys

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from transformers import BertConfig, BertForMaskedLM, BertModel, GPT2Config  # noqa: E402
from transformers.utils import logging as transformers_logging  # noqa: E402

import skmpt.text as sktext  # noqa: E402
from skmpt.text import MaskedLMPredictor, load_masked_lm, load_tokenizer  # noqa: E402
from skmpt.text.loading import (check_hub_name, check_local_path, hidden_transformers_bars, model_max_length,  # noqa: E402
                                require_text_extra)
from support.text import binary_tokenizer  # noqa: E402

CPU = torch.device("cpu")


def _config(tokenizer, **options):
    return BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=16, max_position_embeddings=16, **options)


def test_hub_names_look_like_hub_names():
    assert not sktext.loading._looks_like_path("bert-base-uncased")
    assert not sktext.loading._looks_like_path("google-bert/bert-base-uncased")
    assert sktext.loading._looks_like_path("a/b/c") and sktext.loading._looks_like_path("vocab.txt")


@pytest.mark.parametrize("missing", ["transformers", "tokenizers"])
def test_a_missing_package_of_the_extra_is_named_with_its_install_line(monkeypatch, missing):
    assert require_text_extra("this test").__name__ == "transformers"
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(ImportError, match=rf"this test needs {missing}, one of the packages of skmpt's text extra "
                                          r".*pip install \"skmpt\[text\]\""):
        require_text_extra("this test")


@pytest.mark.parametrize("shown", [True, False])
def test_transformers_bars_are_hidden_in_the_block_and_restored_after(shown):
    before = transformers_logging.is_progress_bar_enabled()
    (transformers_logging.enable_progress_bar if shown else transformers_logging.disable_progress_bar)()
    try:
        with hidden_transformers_bars():
            assert not transformers_logging.is_progress_bar_enabled()
        assert transformers_logging.is_progress_bar_enabled() is shown
        with hidden_transformers_bars(hidden=False):
            assert transformers_logging.is_progress_bar_enabled() is shown
    finally:
        (transformers_logging.enable_progress_bar if before else transformers_logging.disable_progress_bar)()


def test_local_paths_must_exist_and_hub_names_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    check_local_path("here", "model")  # exists
    check_local_path("org/name", "model")  # a hub name: left to transformers
    with pytest.raises(ValueError, match=rf"--model='gone' is a path that does not exist \(relative to "
                                         rf"{str(tmp_path)!r}\)"):
        check_local_path(tmp_path.relative_to(tmp_path) / "gone", "--model")  # a PathLike is always a path
    absolute = str(tmp_path / "gone.bin")
    with pytest.raises(ValueError, match=r"is a path that does not exist; give a saved directory"):
        check_local_path(absolute, "tokenizer")


def _cache_entry(cache, repo_id, revision="main"):
    """A hub-cache entry holding ``config.json`` for ``repo_id`` at ``revision``, as huggingface_hub lays it out."""
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / revision).write_text("0" * 40)
    snapshot = folder / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")


@pytest.mark.parametrize("source, cached, refused", [
    ("nosuchmodel-xyz", False, True),
    ("org/nosuchmodel", False, True),
    ("cached-model", True, False),
    ("org/cached-model", True, False),
    ("here", False, False),  # a local directory
    ("./gone.bin", False, False),  # a path: check_local_path's, not this check's
])
def test_offline_a_hub_name_must_be_cached(tmp_path, monkeypatch, source, cached, refused):
    cache = tmp_path / "cache"
    cache.mkdir()
    if cached:
        _cache_entry(cache, source)
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path)
    if refused:
        with pytest.raises(ValueError, match=f"--model={source!r}: no local directory and no entry of the cache"):
            check_hub_name(source, "--model", cache_dir=cache, local_files_only=True)
    else:
        check_hub_name(source, "--model", cache_dir=cache, local_files_only=True)
    # the cache holds the name at "main" only: at another revision, every hub name is refused
    hub_name = cached or refused
    with pytest.raises(ValueError, match="at revision 'v2'") if hub_name else contextlib.nullcontext():
        check_hub_name(source, "--model", cache_dir=cache, local_files_only=True, revision="v2")


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}],
                         ids=["offline", "unreachable"])
def test_a_missing_name_is_refused_at_once_without_the_hub(tmp_path, env):
    """A fresh process (the hub reads its settings on import) refuses the name in seconds, without retries."""
    import subprocess
    import time

    code = "from skmpt.text.loading import load_masked_lm; load_masked_lm('nosuchmodel-xyz', device='cpu')"
    environ = {**os.environ, "HF_HUB_CACHE": str(tmp_path), "PYTHONPATH": os.getcwd(), **env}
    environ.pop("HTTPS_PROXY", None), environ.pop("https_proxy", None)
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120)
    assert "ValueError: model='nosuchmodel-xyz': no local directory and no entry of the cache" in result.stderr, (
        result.stderr[-2000:])
    assert time.monotonic() - start < 60


def test_a_tokenizer_object_is_returned_as_it_is_and_a_saved_one_loads(tmp_path):
    tokenizer = binary_tokenizer()
    assert load_tokenizer(tokenizer, None) is tokenizer
    tokenizer.save_pretrained(tmp_path / "saved")
    loaded = load_tokenizer(None, str(tmp_path / "saved"))  # from the model's source
    assert loaded.get_vocab() == tokenizer.get_vocab() and loaded.mask_token == "[MASK]"
    with pytest.raises(ValueError, match="tokenizer=None needs a model given by name or directory"):
        load_tokenizer(None, None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"No tokenizer was found in tokenizer='.*empty' \(no tokenizer.json"):
        load_tokenizer(str(tmp_path / "empty"), None)


def test_a_configuration_gives_a_seeded_random_model_in_evaluation_mode():
    tokenizer = binary_tokenizer()
    config = _config(tokenizer)
    first, loaded_tokenizer = load_masked_lm(config, tokenizer=tokenizer, device=CPU, random_state=0)
    second, _ = load_masked_lm(config, tokenizer=tokenizer, device=CPU, random_state=0)
    other, _ = load_masked_lm(config, tokenizer=tokenizer, device=CPU, random_state=1)
    assert isinstance(first, MaskedLMPredictor) and loaded_tokenizer is tokenizer
    assert not first.module.training and first.mask_token_id == tokenizer.mask_token_id
    name = "cls.predictions.transform.dense.weight"
    weights = [dict(p.module.named_parameters())[name] for p in (first, second, other)]
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])
    assert config.to_dict() == _config(tokenizer).to_dict()  # the user's configuration is not written to


def test_a_model_object_is_copied_only_to_train_move_or_cast():
    tokenizer = binary_tokenizer()
    torch.manual_seed(0)
    model = BertForMaskedLM(_config(tokenizer)).eval()
    assert load_masked_lm(model, tokenizer=tokenizer, device=CPU)[0].module is model
    trained = load_masked_lm(model, tokenizer=tokenizer, device=CPU, train=True)[0].module
    cast = load_masked_lm(model, tokenizer=tokenizer, device=CPU, dtype=torch.float64)[0].module
    assert trained is not model and cast is not model
    assert next(cast.parameters()).dtype == torch.float64 and next(model.parameters()).dtype == torch.float32
    torch.testing.assert_close(next(trained.parameters()), next(model.parameters()), rtol=0, atol=0)


def test_what_cannot_be_loaded_is_refused_with_its_reason(tmp_path):
    tokenizer = binary_tokenizer()
    config = _config(tokenizer)
    for kwargs, message in [
        ({"model_kwargs": {"torch_dtype": torch.float16}}, "model_kwargs may not hold 'torch_dtype': use the dtype"),
        ({"model_kwargs": {"output_loading_info": True}}, "model_kwargs may not hold 'output_loading_info'"),
    ]:
        with pytest.raises(ValueError, match=message):
            load_masked_lm(config, tokenizer=tokenizer, device=CPU, **kwargs)
    with pytest.raises(ValueError, match="'gpt2' model, which has no masked language-model class"):
        load_masked_lm(GPT2Config(vocab_size=len(tokenizer), n_embd=8, n_layer=1, n_head=2), tokenizer=tokenizer,
                       device=CPU)
    with pytest.raises(ValueError, match="model is a BertModel, not a masked language model"):
        load_masked_lm(BertModel(config), tokenizer=tokenizer, device=CPU)
    with pytest.raises(ValueError, match=r"The 'model' parameter of load_masked_lm must be an instance of str, an "
                                         r"instance of os.PathLike, .*Pre[Tt]rainedConfig, .*MaskedPredictor or a "
                                         r"callable; got 3"):
        load_masked_lm(3, tokenizer=tokenizer, device=CPU)
    with pytest.raises(ValueError, match="a plain callable has no trainable parameters"):
        load_masked_lm(lambda input_ids, attention_mask: None, tokenizer=tokenizer, device=CPU, train=True)
    small = BertForMaskedLM(BertConfig(vocab_size=6, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=16))
    with pytest.raises(ValueError, match=r"token ids up to 6 but the model's embedding holds 6 \(ids 0..5\)"):
        load_masked_lm(small, tokenizer=tokenizer, device=CPU)
    predictor = MaskedLMPredictor(BertForMaskedLM(config), tokenizer.mask_token_id)
    with pytest.raises(ValueError, match=r"mask_token_id=3 differs from the predictor's own \(4\)"):
        load_masked_lm(predictor, tokenizer=tokenizer, device=CPU, mask_token_id=3)


def test_a_saved_model_loads_and_a_headless_one_needs_permission(tmp_path):
    tokenizer = binary_tokenizer()
    torch.manual_seed(0)
    model = BertForMaskedLM(_config(tokenizer)).eval()
    model.save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    predictor, loaded_tokenizer = load_masked_lm(os.fspath(tmp_path / "bert"), device=CPU, dtype=torch.float32)
    assert loaded_tokenizer.get_vocab() == tokenizer.get_vocab()
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(dict(predictor.module.named_parameters())[name], parameter, rtol=0, atol=0)
    BertModel(model.config).save_pretrained(tmp_path / "base")
    with pytest.raises(ValueError, match=r"lacks \d+ weights of its masked LM.*allow_missing_weights=True"):
        load_masked_lm(os.fspath(tmp_path / "base"), tokenizer=tokenizer, device=CPU)
    assert load_masked_lm(os.fspath(tmp_path / "base"), tokenizer=tokenizer, device=CPU,
                          allow_missing_weights=True)[0] is not None


def test_max_length_is_capped_by_the_positions_and_the_tokenizer():
    tokenizer = binary_tokenizer()
    model = BertForMaskedLM(_config(tokenizer))  # 16 positions
    assert model_max_length(model, tokenizer, 512) == 16
    assert model_max_length(model, tokenizer, 10) == 10
    tokenizer.model_max_length = 12
    assert model_max_length(model, tokenizer, 512) == 12
    roberta = type("Roberta", (), {"config": type("C", (), {"max_position_embeddings": 16, "model_type": "roberta",
                                                              "pad_token_id": 1})()})()
    assert model_max_length(roberta, tokenizer, 512) == 12  # 16 - (pad_token_id + 1) = 14, the tokenizer's 12
    tokenizer.model_max_length = 10**30  # transformers' "no limit"
    assert model_max_length(roberta, tokenizer, 512) == 14
    with pytest.raises(ValueError, match="max_length=2 leaves no room for a token"):
        model_max_length(model, tokenizer, 2)
