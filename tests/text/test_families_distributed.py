"""The tiny masked predictors under a launcher: 2 CPU processes (gloo) give the numbers of one process."""

import os

import numpy as np
import pytest
from support.ranks import free_port, run_two_ranks

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

TEXTS = ["the cat sat on the mat", "a big red dog ran", "the dog saw a cat and ran", "a cat ran"]


def _compute():
    """Every kind of predictor: scores, the diffusion bound, a conditional, and two steps of training."""
    from support.tiny_predictors import MASK_ID, ShiftedLM, TinyBidirectionalLM, gpt2_style_tokenizer

    from skmpt import MLMCurveScorer
    from skmpt.text import conditional_log_likelihood, masked_diffusion_bound

    def fit(model, tokenizer, X=None, **params):
        return MLMCurveScorer(model, tokenizer=tokenizer, mask_token_id=MASK_ID, device="cpu", random_state=0,
                              score_masks=2, **params).fit(X)

    tokenizer = gpt2_style_tokenizer()
    plain = fit(TinyBidirectionalLM(), tokenizer)
    shifted = fit(ShiftedLM(TinyBidirectionalLM()), gpt2_style_tokenizer(bos=True), shift_logits=True)
    timed = fit(TinyBidirectionalLM(timestep=True), tokenizer, TEXTS, timestep_fn=lambda rate: {"timesteps": rate},
                max_steps=2, batch_size=4, mask_rate="uniform", learning_rate=1e-2)
    return {
        "plain": plain.score_samples(TEXTS),
        "shifted": shifted.score_samples(TEXTS),
        "timestep": timed.score_samples(TEXTS),
        "losses": np.array([entry["loss"] for entry in timed.history_]),
        "bound": masked_diffusion_bound(plain.runner_, TEXTS, score_method="chain", score_masks=2,
                                        random_state=0).nelbo,
        "conditional": conditional_log_likelihood(plain.runner_, ["the cat", "a big", "the dog"],
                                                  [" sat on the mat", " red dog ran", " ran"],
                                                  score_method="chain", score_masks=2, random_state=0).log_likelihood,
    }


def _rank(rank, port, directory):
    import torch

    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    try:
        np.savez(os.path.join(directory, f"rank{rank}.npz"), **_compute())
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def test_tiny_predictors_on_two_ranks_equal_one_process(tmp_path):

    run_two_ranks(_rank, (free_port(), str(tmp_path)), timeout=180)
    single = _compute()
    for rank in range(2):
        got = np.load(tmp_path / f"rank{rank}.npz")
        assert sorted(got.files) == sorted(single)
        for name, want in single.items():
            # float32 models: a text scored in another batch differs by rounding only
            np.testing.assert_allclose(got[name], want, rtol=1e-5, err_msg=name)
