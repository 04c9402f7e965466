"""dtype="auto" of MLMCurveScorer and the CLI: bfloat16 only where the device multiplies it natively."""

import copy

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import binary_tokenizer  # noqa: E402
from transformers import BertConfig, BertForMaskedLM  # noqa: E402

import skmpt._utils  # noqa: E402
from skmpt import MLMCurveScorer  # noqa: E402
from skmpt._validation import InvalidParameterError  # noqa: E402
from skmpt.cli import main  # noqa: E402
from skmpt.text import BFLOAT16_TOLERANCE, auto_dtype, native_bfloat16  # noqa: E402

CPU = torch.device("cpu")
TEXTS = ["a b a b b a", "b b a", "a b"]


@pytest.fixture(scope="module")
def tiny():
    tokenizer = binary_tokenizer()
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    torch.manual_seed(0)
    return BertForMaskedLM(config).eval(), tokenizer


@pytest.fixture
def native(monkeypatch):
    """Every device counts as having native bfloat16 units."""
    monkeypatch.setattr(skmpt._utils, "native_bfloat16", lambda device: True)


def fitted(tiny, **params):
    model, tokenizer = tiny
    return MLMCurveScorer(model, tokenizer=tokenizer, device="cpu", score_masks=2, random_state=0, **params).fit()


def test_auto_is_float32_where_the_cpu_emulates_bfloat16(tiny):
    expected = torch.bfloat16 if native_bfloat16(CPU) else torch.float32  # the probe's verdict on this CPU
    scorer = fitted(tiny)
    assert scorer.dtype_ == expected == auto_dtype(CPU)
    assert next(scorer.model_.parameters()).dtype == torch.float32  # the weights are never cast by "auto"
    assert scorer.runner_.autocast_dtype == (torch.bfloat16 if expected == torch.bfloat16 else None)
    if expected == torch.float32:  # the scores are float32's, exactly
        np.testing.assert_array_equal(scorer.score_samples(TEXTS), fitted(tiny, dtype="float32").score_samples(TEXTS))
    assert auto_dtype(CPU, torch.float64) == torch.float64  # a float64 model stays float64 anywhere


def test_auto_is_bfloat16_autocast_on_native_units(tiny, native):
    auto, exact = fitted(tiny), fitted(tiny, dtype="float32")
    assert auto.dtype_ == torch.bfloat16 and auto.runner_.autocast_dtype == torch.bfloat16
    assert next(auto.model_.parameters()).dtype == torch.float32  # mixed precision: float32 weights
    assert exact.dtype_ == torch.float32 and exact.runner_.autocast_dtype is None  # an explicit dtype is kept
    got, expected = auto.pseudo_log_likelihood(TEXTS), exact.pseudo_log_likelihood(TEXTS)
    assert not np.array_equal(got, expected)  # the products did run in bfloat16
    lengths = np.array([len(text.split()) for text in TEXTS])
    assert np.max(np.abs(got - expected) / lengths) < BFLOAT16_TOLERANCE
    model, tokenizer = tiny
    double = MLMCurveScorer(copy.deepcopy(model).double(), tokenizer=tokenizer, device="cpu").fit()
    assert double.dtype_ == torch.float64 and double.runner_.autocast_dtype is None


def test_native_bfloat16_on_cuda_asks_for_units_not_emulation(monkeypatch):
    asked = []
    for supported in (True, False):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                            lambda including_emulation=True, s=supported: asked.append(including_emulation) or s)
        assert native_bfloat16(torch.device("cuda")) is supported
    assert asked == [False, False]


@pytest.mark.parametrize("flags, speedup, expected", [
    ({"avx2", "fma"}, 3.0, False),  # no bfloat16 units listed: no probe, whatever it would say
    ({"avx2", "avx512_bf16"}, 1.2, False),  # listed, but not faster than float32
    ({"avx2", "amx_bf16"}, 3.0, True),
])
def test_native_bfloat16_on_the_cpu_needs_the_flags_and_the_speed(monkeypatch, flags, speedup, expected):
    probed = []
    monkeypatch.setattr(skmpt._utils.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(skmpt._utils, "_cpu_flags", lambda: flags)
    monkeypatch.setattr(skmpt._utils, "_cpu_bfloat16_speedup", lambda: probed.append(1) or speedup)
    assert native_bfloat16(CPU) is expected
    assert probed == ([1] if flags & {"avx512_bf16", "amx_bf16"} else [])
    monkeypatch.setattr(skmpt._utils, "_cpu_flags", lambda: None)  # no /proc/cpuinfo: the probe alone decides
    assert native_bfloat16(CPU) is (speedup >= 1.5)


def test_a_bad_dtype_is_a_clear_error(tiny):
    with pytest.raises(InvalidParameterError, match="'dtype' parameter of MLMCurveScorer must be .*'auto'.*got 'bf16'"):
        fitted(tiny, dtype="bf16")


@pytest.mark.parametrize("dtype, chosen", [("auto", "bfloat16"), ("float32", "float32")])
def test_the_cli_passes_the_dtype_and_logs_the_choice(tiny, tmp_path, capsys, native, dtype, chosen):
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


def test_a_device_may_be_named():
    """A device may be given by its name, as torch takes it elsewhere."""
    assert native_bfloat16("cpu") == native_bfloat16(torch.device("cpu"))
    assert auto_dtype("cpu", torch.float64) == torch.float64
