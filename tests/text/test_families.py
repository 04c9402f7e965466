"""Any masked predictor through MLMCurveScorer: plain modules, callables, AutoModel (remote code),
mask_token_id, shifted logits, timestep hooks, and the errors raised before any text is scored."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.tiny_predictors import (  # noqa: E402
    MASK_ID,
    VOCAB_SIZE,
    ShiftedLM,
    TinyBidirectionalLM,
    TinyDiffusionConfig,
    TinyDiffusionModel,
    gpt2_style_tokenizer,
)

from skmpt import MLMCurveScorer  # noqa: E402

TEXTS = ["the cat sat on the mat", "a big red dog ran", "the dog saw a cat and ran"]


def direct_pll(model, tokenizer, text, timestep=False):
    """``sum_j log p(x_j | x_-j)`` computed by hand: each own token replaced by MASK_ID in turn."""
    ids = torch.tensor(tokenizer(text)["input_ids"])
    own = [j for j, i in enumerate(ids.tolist()) if i != 0]
    total = 0.0
    with torch.no_grad():
        for j in own:
            masked = ids.clone()
            masked[j] = MASK_ID
            extra = {"timesteps": torch.tensor([1 / len(own)])} if timestep else {}
            logits = model(masked[None], torch.ones(1, len(ids), dtype=torch.long), **extra)
            total += float(torch.log_softmax(logits[0, j].double(), -1)[ids[j]])
    return total


def scorer(model, tokenizer, **params):
    return MLMCurveScorer(model, tokenizer=tokenizer, mask_token_id=MASK_ID, device="cpu", random_state=0,
                          score_masks=2, **params).fit()


def test_a_plain_module_and_a_callable_with_a_tokenizer_without_mask_token():
    tokenizer, model = gpt2_style_tokenizer(), TinyBidirectionalLM().eval()
    assert tokenizer.mask_token_id is None and tokenizer.pad_token_id is None
    fitted = scorer(model, tokenizer)
    want = [direct_pll(model, tokenizer, text) for text in TEXTS]
    np.testing.assert_allclose(fitted.pseudo_log_likelihood(TEXTS), want, rtol=1e-5)
    assert fitted.runner_.vocab_size == VOCAB_SIZE  # from the probe pass
    function = scorer(lambda input_ids, attention_mask: model(input_ids, attention_mask), tokenizer)
    np.testing.assert_allclose(function.score_samples(TEXTS), fitted.score_samples(TEXTS), rtol=1e-6)


def test_shifted_logits_are_read_one_position_earlier():
    tokenizer, base = gpt2_style_tokenizer(bos=True), TinyBidirectionalLM().eval()
    plain, shifted = scorer(base, tokenizer, score_method="chain"), scorer(ShiftedLM(base), tokenizer,
                                                                          score_method="chain", shift_logits=True)
    np.testing.assert_allclose(shifted.score_samples(TEXTS), plain.score_samples(TEXTS), rtol=1e-6)
    np.testing.assert_allclose(shifted.transform(TEXTS), plain.transform(TEXTS), rtol=1e-6)
    # without BOS, the first token has no position before it
    with pytest.raises(ValueError, match="shift_logits=True reads a token's logits at the position before it"):
        scorer(ShiftedLM(base), gpt2_style_tokenizer(), shift_logits=True).score_samples(TEXTS)


def test_the_timestep_hook_gives_each_copy_its_masking_rate():
    tokenizer, model = gpt2_style_tokenizer(), TinyBidirectionalLM(timestep=True).eval()
    fitted = scorer(model, tokenizer, timestep_fn=lambda rate: {"timesteps": rate.float()})
    want = [direct_pll(model, tokenizer, text, timestep=True) for text in TEXTS]
    np.testing.assert_allclose(fitted.pseudo_log_likelihood(TEXTS), want, rtol=1e-5)
    # the rate matters: a hook giving another time changes the scores
    other = scorer(model, tokenizer, timestep_fn=lambda rate: {"timesteps": 1 - rate.float()})
    assert not np.allclose(other.pseudo_log_likelihood(TEXTS), want, rtol=1e-3)


def test_fit_uniform_trains_any_of_these_models():
    tokenizer = gpt2_style_tokenizer()
    for model, hook in [(TinyBidirectionalLM(), None), (TinyBidirectionalLM(timestep=True),
                                                         lambda rate: {"timesteps": rate.float()})]:
        fitted = MLMCurveScorer(model, tokenizer=tokenizer, mask_token_id=MASK_ID, timestep_fn=hook, device="cpu",
                                max_steps=4, batch_size=3, mask_rate="uniform", learning_rate=1e-2,
                                random_state=0).fit(TEXTS)
        assert [h["step"] for h in fitted.history_] == [1, 2, 3, 4]
        assert fitted.model_ is not model and not torch.equal(fitted.model_.head.weight, model.head.weight)
    # shifted logits and an AutoModel train through the same logits adapter
    for model, bos, shift in [(ShiftedLM(TinyBidirectionalLM()), True, True),
                              (TinyDiffusionModel(TinyDiffusionConfig()), False, False)]:
        fitted = MLMCurveScorer(model, tokenizer=gpt2_style_tokenizer(bos=bos), mask_token_id=MASK_ID,
                                shift_logits=shift, device="cpu", max_steps=2, batch_size=3, mask_rate="uniform",
                                learning_rate=1e-2, random_state=0).fit(TEXTS)
        assert len(fitted.history_) == 2 and np.isfinite([h["loss"] for h in fitted.history_]).all()
    base = TinyBidirectionalLM()
    with pytest.raises(ValueError, match="a plain callable has no trainable parameters"):
        MLMCurveScorer(lambda input_ids, attention_mask: base(input_ids, attention_mask), tokenizer=tokenizer,
                       mask_token_id=MASK_ID, device="cpu", max_steps=2, mask_rate="uniform").fit(TEXTS)


def save_remote_code_model(tmp_path):
    """A TinyDiffusionModel and its tokenizer saved with the model's code, as a hub repository with remote code."""
    tokenizer = gpt2_style_tokenizer()
    model = TinyDiffusionModel(TinyDiffusionConfig()).eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    shutil.copy(Path(__file__).parents[1] / "support" / "tiny_predictors.py", tmp_path / "tiny_modeling.py")
    config = json.loads((tmp_path / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "tiny_modeling.TinyDiffusionConfig",
                          "AutoModel": "tiny_modeling.TinyDiffusionModel"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return model, tokenizer


def test_automodel_remote_code_with_trust_remote_code(tmp_path):
    model, tokenizer = save_remote_code_model(tmp_path)
    with pytest.raises(ValueError, match="trust_remote_code=True"):  # remote code runs only when asked for
        MLMCurveScorer(str(tmp_path), mask_token_id=MASK_ID, device="cpu").fit()
    loaded = MLMCurveScorer(str(tmp_path), mask_token_id=MASK_ID, model_kwargs={"trust_remote_code": True},
                            device="cpu", random_state=0, score_masks=2).fit()
    assert type(loaded.model_).__name__ == "TinyDiffusionModel"
    direct = scorer(model, tokenizer)
    np.testing.assert_allclose(loaded.score_samples(TEXTS), direct.score_samples(TEXTS), rtol=1e-6)


def test_command_line_mask_token_id_shift_logits_and_remote_code(tmp_path, capsys):
    import pandas as pd

    from skmpt.cli import main

    model, tokenizer = save_remote_code_model(tmp_path / "model")
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    common = ["mlm-curve", "--model", str(tmp_path / "model"), "--texts", str(tmp_path / "texts.txt"),
              "--mask-rates", "0.5", "--score-masks", "2", "--device", "cpu", "--quiet", "--trust-remote-code"]
    assert main([*common, "--out", str(tmp_path / "out.csv"), "--mask-token-id", str(MASK_ID)]) == 0
    want = MLMCurveScorer(model, tokenizer=tokenizer, mask_token_id=MASK_ID, mask_rates=[0.5], score_masks=2,
                          device="cpu", random_state=0).fit()
    np.testing.assert_allclose(pd.read_csv(tmp_path / "out.csv")["score"], want.score_samples(TEXTS), rtol=1e-6)
    assert main([*common, "--out", str(tmp_path / "none.csv")]) != 0  # a tokenizer without a mask token
    assert "pass mask_token_id=" in capsys.readouterr().err
    # --shift-logits reaches the scorer: without a BOS token the first word has no position before it
    assert main([*common, "--out", str(tmp_path / "shift.csv"), "--mask-token-id", str(MASK_ID),
                 "--shift-logits", "--timestep-arg", "timesteps"]) != 0
    assert "shift_logits=True reads a token's logits at the position before it" in capsys.readouterr().err


class NoLogits(torch.nn.Module):
    def forward(self, input_ids, attention_mask=None):
        return {"last_hidden_state": torch.zeros(*input_ids.shape, 8)}


class ShortLogits(torch.nn.Module):
    def forward(self, input_ids, attention_mask=None):
        return torch.zeros(input_ids.shape[0], input_ids.shape[1] - 1, VOCAB_SIZE)


class LogitsElsewhere(torch.nn.Module):
    """Logits on another device than its inputs (the meta device stands in for a GPU)."""

    def forward(self, input_ids, attention_mask=None):
        return torch.zeros(*input_ids.shape, VOCAB_SIZE, device="meta")


class Counting(TinyBidirectionalLM):
    calls = 0

    def forward(self, *args, **kwargs):
        type(self).calls += 1
        return super().forward(*args, **kwargs)


@pytest.mark.parametrize("model, params, message", [
    (NoLogits(), {}, r"no usable logits of shape \(batch, length, vocab_size\): found a dict holding "
                     r"\{last_hidden_state: \(2, 3, 8\)\}"),
    (ShortLogits(), {}, r"logits have shape \(2, 2, 14\) for input_ids of shape \(2, 3\)"),
    (LogitsElsewhere(), {}, "logits are on meta for input_ids on cpu: a model must return them on its inputs' device"),
    (TinyBidirectionalLM(), {"mask_token_id": VOCAB_SIZE}, "mask_token_id=14 is outside the model's vocabulary"),
    (TinyBidirectionalLM(), {"mask_token_id": 0}, r"mask_token_id=0 is the special token '<\|endoftext\|>'"),
    (TinyBidirectionalLM(), {"mask_token_id": None}, "has no mask token; pass mask_token_id="),
    (TinyBidirectionalLM(vocab_size=VOCAB_SIZE - 2), {}, "token ids up to 12 but the model's logits cover 12"),
    (Counting(timestep=True), {"timestep_fn": lambda rate: {"timesteps": rate[:1]}},
     r"timestep_fn returned 'timesteps' of shape \(1,\) for 2 masked copies"),
    (Counting(timestep=True), {"timestep_fn": lambda rate: rate}, "timestep_fn must return a dict"),
])
def test_bad_predictors_are_refused_before_any_text_is_scored(model, params, message):
    Counting.calls = 0
    params = {"mask_token_id": MASK_ID, **params}
    with pytest.raises(ValueError, match=message):
        MLMCurveScorer(model, tokenizer=gpt2_style_tokenizer(), device="cpu", **params).fit()
    assert Counting.calls == 0  # the hook is checked before the model runs


def test_a_padding_id_as_mask_is_refused():
    tokenizer = gpt2_style_tokenizer()
    tokenizer.add_special_tokens({"pad_token": "[PAD]"})
    with pytest.raises(ValueError, match=f"mask_token_id={tokenizer.pad_token_id} is the padding token's id"):
        MLMCurveScorer(TinyBidirectionalLM(), tokenizer=tokenizer, mask_token_id=tokenizer.pad_token_id,
                       device="cpu").fit()
