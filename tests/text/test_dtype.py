"""dtype="auto" of MLMCurveScorer and the CLI is the checkpoint's own dtype, whatever the machine."""

import copy

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import binary_tokenizer  # noqa: E402
from transformers import BertConfig, BertForMaskedLM  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from skmpt._validation import InvalidParameterError  # noqa: E402
from skmpt.cli import main  # noqa: E402

TEXTS = ["a b a b b a", "b b a", "a b"]


@pytest.fixture(scope="module")
def tiny():
    tokenizer = binary_tokenizer()
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    torch.manual_seed(0)
    return BertForMaskedLM(config).eval(), tokenizer


def fitted(tiny, **params):
    model, tokenizer = tiny
    return MLMCurveScorer(model, tokenizer=tokenizer, device="cpu", score_masks=2, random_state=0, **params).fit()


def test_auto_is_the_model_objects_own_dtype(tiny):
    auto = fitted(tiny)
    assert auto.dtype_ == torch.float32 and next(auto.model_.parameters()).dtype == torch.float32
    # the same numbers as float32 asked for by name, bit for bit: nothing is decided by the machine
    np.testing.assert_array_equal(auto.score_samples(TEXTS), fitted(tiny, dtype="float32").score_samples(TEXTS))
    model, tokenizer = tiny
    double = MLMCurveScorer(copy.deepcopy(model).double(), tokenizer=tokenizer, device="cpu").fit()
    assert double.dtype_ == torch.float64


def test_auto_never_times_the_machine(tiny, monkeypatch):
    """No timing probe on the path of a number: a slow or fast matrix product changes nothing."""
    calls = []
    original = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear", lambda *a, **k: calls.append(1) or original(*a, **k))
    model, tokenizer = tiny
    MLMCurveScorer(model, tokenizer=tokenizer, device="cpu").fit()
    probe = len(calls)  # the runner's one probe pass through the model's layers, no timing loop
    assert 0 < probe < 20


def test_bfloat16_is_asked_for_by_name(tiny):
    exact, bf16 = fitted(tiny, dtype="float32"), fitted(tiny, dtype="bfloat16")
    assert bf16.dtype_ == torch.bfloat16 and next(bf16.model_.parameters()).dtype == torch.bfloat16
    model, _ = tiny
    assert next(model.parameters()).dtype == torch.float32  # the user's model was cast as a copy
    got, expected = bf16.pseudo_log_likelihood(TEXTS), exact.pseudo_log_likelihood(TEXTS)
    assert not np.array_equal(got, expected)  # the products did run in bfloat16
    lengths = np.array([len(text.split()) for text in TEXTS])
    assert np.max(np.abs(got - expected) / lengths) < 0.05  # nats per token, on this tiny random model


def test_auto_is_the_checkpoints_dtype(tiny, tmp_path):
    model, tokenizer = tiny
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    scorer = MLMCurveScorer(str(tmp_path / "model"), device="cpu", score_masks=2).fit()
    assert scorer.dtype_ == torch.bfloat16  # as torch_dtype="auto" in Hugging Face


def test_a_bad_dtype_is_a_clear_error(tiny):
    with pytest.raises(InvalidParameterError, match="'dtype' parameter of MLMCurveScorer must be .*'auto'.*got 'bf16'"):
        fitted(tiny, dtype="bf16")


@pytest.mark.parametrize("dtype, chosen", [("auto", "float32"), ("bfloat16", "bfloat16")])
def test_the_cli_passes_the_dtype_and_logs_the_choice(tiny, tmp_path, capsys, dtype, chosen):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "curve.csv"
    option = [] if dtype == "auto" else ["--dtype", dtype]  # "auto" is the default
    assert main(["mlm-curve", "--model", str(tmp_path / "model"), "--texts", str(tmp_path / "texts.txt"),
                 "--out", str(out), "--mask-rates", "0.5", "--score-masks", "2", "--device", "cpu", *option]) == 0
    assert f"the model runs in {chosen} (--dtype {dtype})" in capsys.readouterr().err
    scorer = MLMCurveScorer(str(tmp_path / "model"), mask_rates=[0.5], score_masks=2, random_state=0, device="cpu",
                            dtype=dtype).fit()
    assert str(scorer.dtype_) == f"torch.{chosen}"
    scores = np.loadtxt(out, delimiter=",", skiprows=1, usecols=2)
    np.testing.assert_allclose(scores, scorer.score_samples(TEXTS), rtol=1e-12)
