"""MaskedPretraining on a tiny BERT: its checks, its masks, reproducible steps, and resuming its own runs only."""

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from transformers import BertConfig, BertForMaskedLM  # noqa: E402

from skmpt.text import MaskedLMPredictor, MaskedLMRunner, MaskedPretraining, encode_texts  # noqa: E402
from support.text import binary_tokenizer  # noqa: E402

TEXTS = ["a b a b", "b b a", "a", "a a b b a", "b a", "b b b a a"]


def _runner(seed=0):
    tokenizer = binary_tokenizer()
    torch.manual_seed(seed)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=16, max_position_embeddings=16))
    runner = MaskedLMRunner(MaskedLMPredictor(model.eval(), tokenizer.mask_token_id), tokenizer, torch.device("cpu"))
    return runner, encode_texts(TEXTS, tokenizer, runner.max_length)


def _training(**options):
    return MaskedPretraining(**{"max_steps": 3, "batch_size": 4, "mask_rate": 0.5, "learning_rate": 1e-2,
                                "random_state": 0, **options})


def test_a_run_trains_in_place_reproducibly_and_leaves_evaluation_mode():
    runner, encoded = _runner()
    before = [p.detach().clone() for p in runner.predictor.module.parameters()]
    state = torch.get_rng_state()
    history = _training().run(runner, encoded)
    assert torch.equal(torch.get_rng_state(), state)  # dropout drew from a fork of torch's generator
    assert [entry["step"] for entry in history] == [1, 2, 3]
    assert all(entry["loss"] > 0 and entry["seconds"] >= 0 for entry in history)
    assert not runner.predictor.module.training
    after = list(runner.predictor.module.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    again, encoded = _runner()
    assert [e["loss"] for e in _training().run(again, encoded)] == [e["loss"] for e in history]
    other, encoded = _runner()
    assert [e["loss"] for e in _training(random_state=1).run(other, encoded)] != [e["loss"] for e in history]


@pytest.mark.parametrize("mask_rate", [0.5, "uniform"])
def test_masks_hold_the_rate_or_a_uniform_size_and_weigh_by_length_over_size(mask_rate):
    training = _training(mask_rate=mask_rate)
    lengths = torch.tensor([4, 3, 1, 5])
    generator = torch.Generator().manual_seed(0)
    sizes = {i: set() for i in range(4)}
    for _ in range(50):
        copies, weights = training._masks(lengths, [0, 1, 2, 3], generator)
        for i, ((masked, given), weight) in enumerate(zip(copies, weights, strict=True)):
            size = int(masked.sum())
            assert masked is given and masked.shape == (1, int(lengths[i]))
            assert weight == pytest.approx(int(lengths[i]) / size)
            sizes[i].add(size)
    if mask_rate == "uniform":
        assert [sorted(s) for s in sizes.values()] == [[1, 2, 3, 4], [1, 2, 3], [1], [1, 2, 3, 4, 5]]
    else:  # round(0.5 * L), at least one token
        assert [sorted(s) for s in sizes.values()] == [[2], [2], [1], [2]]


def test_what_cannot_train_is_refused_before_anything_loads(tmp_path):
    with pytest.raises(ValueError, match="checkpoint_every and resume=True need checkpoint_dir"):
        _training(checkpoint_every=1).check(TEXTS)
    with pytest.raises(ValueError, match="checkpoint_every and resume=True need checkpoint_dir"):
        _training(resume=True).check(TEXTS)
    with pytest.raises(ValueError, match="fit with max_steps > 0 needs training texts X"):
        _training().check(None)
    _training(max_steps=0).check(None)  # scoring only: nothing to train on
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="cannot be created"):
        _training(checkpoint_every=1, checkpoint_dir=tmp_path / "afile" / "sub").check(TEXTS)


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(tmp_path):
    runner, encoded = _runner()
    whole = _training(max_steps=4).run(runner, encoded)
    runner, encoded = _runner()
    _training(max_steps=2, checkpoint_every=2, checkpoint_dir=tmp_path).run(runner, encoded)
    runner, encoded = _runner(seed=5)  # other weights: the checkpoint's replace them
    resumed = _training(max_steps=4, checkpoint_every=2, checkpoint_dir=tmp_path, resume=True).run(runner, encoded)
    assert [e["step"] for e in resumed] == [1, 2, 3, 4]
    assert [e["loss"] for e in resumed] == pytest.approx([e["loss"] for e in whole], rel=1e-6)


def test_another_run_s_checkpoint_is_not_resumed(tmp_path):
    runner, encoded = _runner()
    _training(max_steps=2, checkpoint_every=2, checkpoint_dir=tmp_path).run(runner, encoded)
    with pytest.raises(ValueError, match=r"is of another run: batch_size=4 there, 2 here"):
        _training(max_steps=4, batch_size=2, checkpoint_dir=tmp_path, resume=True).run(*_runner())
    tokenizer = runner.tokenizer
    fewer = encode_texts(TEXTS[:-1], tokenizer, runner.max_length)
    with pytest.raises(ValueError, match="6 training texts there, 5 here"):
        _training(max_steps=4, checkpoint_dir=tmp_path, resume=True).run(_runner()[0], fewer)


@pytest.mark.parametrize("name, value, accepted", [
    ("max_steps", -1, r"an int in the range \[0, inf\)"),
    ("batch_size", 0, r"an int in the range \[1, inf\)"),
    ("mask_rate", 0.0, r"a str among {'uniform'} or a float in the range \(0, 1\]"),
    ("mask_rate", "half", r"a str among {'uniform'} or a float in the range \(0, 1\]"),
    ("learning_rate", 0, r"a float in the range \(0, inf\)"),
    ("checkpoint_every", 0, r"None or an int in the range \[1, inf\)"),
    ("resume", "yes", "an instance of bool"),
    ("checkpoint_dir", 3, "None, an instance of str or an instance of os.PathLike"),
])
def test_each_parameter_is_refused_by_name_before_any_work(name, value, accepted):
    from skmpt._validation import InvalidParameterError

    training = _training(**{name: value})
    for call in (lambda: training.check(TEXTS), lambda: training.run(None, None)):
        with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of MaskedPretraining must be "
                                                         rf"{accepted}; got {value!r}"):
            call()
