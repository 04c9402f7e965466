"""MLMCurveScorer: the identity on an explicit joint, exact masking, batching, loading, fitting."""

import sys
import types
import warnings

import hypothesis
import numpy as np
import pytest
import torch
from hypothesis import strategies as st

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from transformers import BertConfig, BertForMaskedLM  # noqa: E402

from skmpt import MLMCurveScorer  # noqa: E402
from support.text import JointMaskedLM, binary_tokenizer  # noqa: E402
import skmpt  # noqa: E402
import skmpt.text as sktext  # noqa: E402
from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer  # noqa: E402
from skmpt.testing import TabularJoint  # noqa: E402


def encode(scorer, texts):
    """The texts as the fitted scorer encodes them."""
    return sktext.encode_texts(texts, scorer.tokenizer_, scorer.max_length_)



class RecordingMaskedLM(torch.nn.Module):
    """Keeps what it is given; predicts uniformly."""

    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size, self.calls = vocab_size, []

    def forward(self, input_ids, attention_mask):
        self.calls.append((input_ids.clone(), attention_mask.clone()))
        return types.SimpleNamespace(logits=torch.zeros(*input_ids.shape, self.vocab_size))


@pytest.fixture(scope="module")
def joint_setup():
    joint = TabularJoint.random(5, random_state=0)
    tokenizer = binary_tokenizer()
    X = joint.sample(12, random_state=1).numpy()
    texts = [" ".join("ab"[int(v)] for v in row) for row in X]
    return joint, tokenizer, texts, torch.as_tensor(X, dtype=torch.float64)


@pytest.fixture(scope="module")
def tiny_bert():
    texts = load_wordnet_sentences()[:400]
    tokenizer = make_wordpiece_tokenizer(texts, vocab_size=400)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = BertForMaskedLM(config).eval()
    return model, tokenizer, texts


def test_chain_is_exact_on_an_explicit_joint(joint_setup):
    joint, tokenizer, texts, X = joint_setup
    scorer = MLMCurveScorer(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer, score_method="chain",
                            score_masks=3, random_state=0, device="cpu").fit()
    np.testing.assert_allclose(scorer.score_samples(texts), joint.log_marginal(X).numpy(), rtol=1e-10)


def test_curve_sums_to_log_marginal_over_all_masks(joint_setup):
    # With D=5 every mask of every size can be listed: sum_M S(x; M) over exact averages = log p(x).
    from itertools import combinations

    joint, tokenizer, texts, X = joint_setup
    scorer = MLMCurveScorer(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer, device="cpu").fit()
    encoded = encode(scorer, texts)
    all_masks = torch.tensor([[j in c for j in range(5)] for M in range(1, 6) for c in combinations(range(5), M)])
    sizes = all_masks.sum(1).numpy()
    sums = scorer.runner_.run_copies(encoded, [(all_masks, all_masks)] * len(texts))
    curve = np.stack([[np.mean(s[sizes == M] / M) for M in range(1, 6)] for s in sums])
    np.testing.assert_allclose(curve.sum(1), joint.log_marginal(X).numpy(), rtol=1e-10)
    # the sweep is the same sum with random masks: close, not exact
    sweep = scorer.set_params(score_masks=200, random_state=0).fit().score_samples(texts)
    assert np.abs(sweep - curve.sum(1)).max() < 0.1


def test_pseudo_log_likelihood_is_every_single_token_mask(joint_setup):
    joint, tokenizer, texts, X = joint_setup
    scorer = MLMCurveScorer(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer, device="cpu").fit()
    single = torch.eye(5, dtype=torch.bool)
    expected = joint.masked_log_prob(X, single)[:, torch.arange(5), torch.arange(5)].sum(1)
    np.testing.assert_allclose(scorer.pseudo_log_likelihood(texts), expected.numpy(), rtol=1e-12)
    # L * S(x; 1) from transform at the smallest rate (one token of five) is the same number
    curve = scorer.set_params(mask_rates=[0.2], score_masks=400, random_state=0).fit().transform(texts)
    np.testing.assert_allclose(5 * curve[:, 0], expected.numpy(), atol=0.5)


@pytest.mark.parametrize("rate", [0.01, 0.4, 0.99])
def test_masks_exactly_m_of_the_own_tokens(joint_setup, rate):
    joint, tokenizer, _, _ = joint_setup
    texts = ["a b", "a b b a b", "b"]
    model = RecordingMaskedLM(len(tokenizer))
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[rate], score_masks=4, device="cpu",
                            random_state=0).fit()
    encoded = encode(scorer, texts)
    generator = torch.Generator().manual_seed(0)
    copies = [
        sktext.strategies._size_masks(np.repeat(max(1, round(rate * len(p))), 4), len(p), generator)
        for p in encoded.content_positions
    ]
    for i, (masked, _) in enumerate(copies):
        L = len(encoded.content_positions[i])
        assert masked.shape == (4, L) and (masked.sum(1) == max(1, round(rate * L))).all()
    # what reaches the model: specials and unmasked words as they were, exactly M mask tokens
    calls = []
    for pieces in scorer.runner_.batches(encoded, copies):
        model.calls.clear()
        scorer.runner_.forward(encoded, copies, pieces)
        calls.append((pieces, *model.calls[0]))
    for pieces, ids, attention in calls:
        row = 0
        for i, start, stop in pieces:
            original = encoded.input_ids[i]
            for c in range(start, stop):
                seen = ids[row, : len(original)]
                changed = seen != original
                assert (seen[changed] == tokenizer.mask_token_id).all()
                assert changed.nonzero().squeeze(1).tolist() == encoded.content_positions[i][copies[i][0][c]].tolist()
                assert (ids[row, len(original) :] == tokenizer.pad_token_id).all()
                assert attention[row].tolist() == [1] * len(original) + [0] * (ids.shape[1] - len(original))
                row += 1


def test_head_only_at_masked_positions_matches_full_logits(tiny_bert, monkeypatch):
    model, tokenizer, texts = tiny_bert
    assert sktext.predictors.language_model_head(model) is not None
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=2, random_state=0, device="cpu").fit()
    fast = scorer.pseudo_log_likelihood(texts[:6])
    curve = scorer.transform(texts[:6])
    monkeypatch.setattr(sktext.predictors, "_HEAD_ATTRIBUTES", ())
    assert sktext.predictors.language_model_head(model) is None
    whole = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=2, random_state=0, device="cpu").fit()
    assert type(scorer.predictor_).__name__ == "MaskedLMPredictor"
    assert type(whole.predictor_).__name__ == "ModulePredictor"  # the whole model, logits read at the targets
    np.testing.assert_allclose(whole.pseudo_log_likelihood(texts[:6]), fast, rtol=1e-5)
    np.testing.assert_allclose(whole.transform(texts[:6]), curve, rtol=1e-5)


def test_batching_does_not_change_scores(tiny_bert):
    model, tokenizer, texts = tiny_bert
    params = dict(tokenizer=tokenizer, score_masks=2, mask_rates=[0.15, 0.6], random_state=3, device="cpu")
    big = MLMCurveScorer(model, **params).fit()
    small = MLMCurveScorer(model, score_batch_size=3, max_batch_tokens=40, **params).fit()
    np.testing.assert_allclose(small.transform(texts[:8]), big.transform(texts[:8]), rtol=1e-5)
    np.testing.assert_allclose(small.score_samples(texts[:8]), big.score_samples(texts[:8]), rtol=1e-5)
    # a forward pass never holds more than the token budget (one copy when a copy alone exceeds it)
    encoded = encode(small, texts[:8])
    copies = [sktext.strategies._size_masks(np.arange(1, len(p) + 1), len(p), None) for p in encoded.content_positions]
    for pieces in small.runner_.batches(encoded, copies):
        rows = sum(stop - start for _, start, stop in pieces)
        width = max(len(encoded.input_ids[i]) for i, _, _ in pieces)
        assert rows <= 3 and (rows * width <= 40 or rows == 1)


def test_groups_of_texts_do_not_change_scores(tiny_bert, monkeypatch):
    model, tokenizer, texts = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=2, mask_rates=[0.2, 0.7], random_state=0,
                            device="cpu").fit()
    expected = scorer.transform(texts[:7]), scorer.score_samples(texts[:7]), scorer.pseudo_log_likelihood(texts[:7])
    with skmpt.working_memory(400 / 2**20):  # 50 mask entries per group: about one text
        np.testing.assert_allclose(scorer.transform(texts[:7]), expected[0], rtol=1e-6)
        np.testing.assert_allclose(scorer.score_samples(texts[:7]), expected[1], rtol=1e-6)
        np.testing.assert_allclose(scorer.pseudo_log_likelihood(texts[:7]), expected[2], rtol=1e-6)


def test_scores_do_not_depend_on_the_other_texts(tiny_bert):
    model, tokenizer, texts = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=2, random_state=0, device="cpu").fit()
    together = scorer.score_samples(texts[:5])
    alone = [scorer.score_samples([text])[0] for text in texts[:5]]
    np.testing.assert_allclose(alone, together, rtol=1e-6)
    # a different seed draws different masks
    assert not np.allclose(scorer.set_params(random_state=1).fit().score_samples(texts[:5]), together)


def test_paper_area_and_random_init_curve(tiny_bert):
    model, tokenizer, texts = tiny_bert
    config = model.config
    scorer = MLMCurveScorer(config, tokenizer=tokenizer, score_masks=1, random_state=0, device="cpu").fit()
    curve = scorer.transform(texts[:4])
    assert curve.shape == (4, 99)
    np.testing.assert_allclose(scorer.paper_area(texts[:4]), 512 * 0.01 * curve.sum(1), rtol=1e-10)
    # a random initialisation predicts about uniformly: a flat curve near -log V
    assert np.abs(curve - (-np.log(config.vocab_size))).max() < 0.5
    # the same seed builds the same random model
    again = MLMCurveScorer(config, tokenizer=tokenizer, score_masks=1, random_state=0, device="cpu").fit()
    np.testing.assert_array_equal(again.transform(texts[:4]), curve)


def test_loads_from_a_saved_directory(tiny_bert, tmp_path):
    model, tokenizer, texts = tiny_bert
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    from_disk = MLMCurveScorer(str(tmp_path), device="cpu").fit()
    in_memory = MLMCurveScorer(model, tokenizer=tokenizer, device="cpu").fit()
    assert from_disk.max_length_ == 64
    np.testing.assert_allclose(
        from_disk.pseudo_log_likelihood(texts[:4]), in_memory.pseudo_log_likelihood(texts[:4]), rtol=1e-6
    )
    assert in_memory.model_ is model  # used as it is: nothing to train, nothing to move


def test_accepts_series_arrays_and_datasets(tiny_bert):
    pd = pytest.importorskip("pandas")
    datasets = pytest.importorskip("datasets")
    model, tokenizer, texts = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, device="cpu").fit()
    expected = scorer.pseudo_log_likelihood(texts[:3])
    frame = pd.DataFrame({"label": [0, 1, 0], "sentence": texts[:3]})
    for X in (pd.Series(texts[:3]), np.array(texts[:3]), tuple(texts[:3]), frame,
              datasets.Dataset.from_pandas(frame)):
        np.testing.assert_allclose(scorer.pseudo_log_likelihood(X), expected)
    pair = datasets.Dataset.from_dict({"premise": texts[:2], "hypothesis": texts[2:4]})
    with pytest.raises(ValueError, match="set text_column"):
        scorer.pseudo_log_likelihood(pair)
    np.testing.assert_allclose(
        scorer.set_params(text_column="hypothesis").fit().pseudo_log_likelihood(pair),
        scorer.pseudo_log_likelihood(texts[2:4]),
    )


@pytest.mark.parametrize(
    "X, message",
    [
        (["a fine text", ""], "Text 1 is empty"),
        (["a fine text", "   "], "Text 1 is empty"),
        (["a fine text", None], "Text 1 is not a string"),
        ([3.5], "Text 0 is not a string"),
        ([], "at least one text"),
        ("just one string", "single string"),
        (np.array([["a", "b"]]), "1-D array"),
        (["the [MASK] sat"], r"Text 0 contains the special token '\[MASK\]'"),
    ],
)
def test_bad_texts_are_named(tiny_bert, X, message):
    model, tokenizer, _ = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, device="cpu").fit()
    with pytest.raises(ValueError, match=message):
        scorer.transform(X)


def test_long_texts_are_truncated_with_a_warning(tiny_bert):
    model, tokenizer, texts = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, max_length=12, device="cpu").fit()
    long_text = " ".join(texts[:10])
    with pytest.warns(UserWarning, match="2 of 3 texts are longer than max_length=12"):
        pll = scorer.pseudo_log_likelihood([long_text, "the team is a unit", long_text + " again"])
    with pytest.warns(UserWarning, match="1 of 1 texts"):
        assert encode(scorer, [long_text]).n_tokens[0] == 10  # 12 less [CLS] and [SEP]
    assert np.isfinite(pll).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scorer.pseudo_log_likelihood(["the team is a unit"])


def test_bad_parameters(tiny_bert):
    model, tokenizer, _ = tiny_bert
    with pytest.raises(ValueError, match="mask_rates must lie in"):
        MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.5, 1.5], device="cpu").fit()
    with pytest.raises(ValueError, match=r"mask_rates must lie in \(0, 1\) \(exclusive\); got 1.0"):
        MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.5, 1.0], device="cpu").fit()
    with pytest.raises(ValueError, match="strictly increasing"):
        MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.5, 0.2], device="cpu").fit()
    with pytest.raises(ValueError, match="pass tokenizer="):
        MLMCurveScorer(model.config, device="cpu").fit()
    with pytest.raises(ValueError, match="is a path that does not exist"):
        MLMCurveScorer("/no/such/model/dir", device="cpu").fit()
    with pytest.raises(ValueError, match="tokenizer='./no-such-tokenizer' is a path"):
        MLMCurveScorer(model, tokenizer="./no-such-tokenizer", device="cpu").fit()
    with pytest.raises(ValueError, match="The 'model' parameter of load_masked_lm must be"):
        MLMCurveScorer(42, tokenizer=tokenizer, device="cpu").fit()
    with pytest.raises(ValueError, match="score_masks"):
        MLMCurveScorer(model, tokenizer=tokenizer, score_masks=0).fit()
    with pytest.raises(ValueError, match="needs training texts"):
        MLMCurveScorer(model, tokenizer=tokenizer, max_steps=2, device="cpu").fit()
    for options in ({"checkpoint_every": 2}, {"resume": True}):
        with pytest.raises(ValueError, match="need checkpoint_dir"):
            MLMCurveScorer(model, tokenizer=tokenizer, max_steps=2, device="cpu", **options).fit(["a b"])
    small = BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8)
    with pytest.raises(ValueError, match="do not belong together"):
        MLMCurveScorer(small, tokenizer=tokenizer, device="cpu").fit()
    with pytest.raises(ValueError, match="CUDA is not available"):
        if not torch.cuda.is_available():
            MLMCurveScorer(model, tokenizer=tokenizer, device="cuda").fit()
        else:
            raise ValueError("CUDA is not available (skipped: CUDA present)")


@pytest.mark.parametrize("mask_rate", [0.15, "uniform"])
def test_fit_continues_masked_pretraining(tiny_bert, mask_rate):
    model, tokenizer, texts = tiny_bert
    before = [p.detach().clone() for p in model.parameters()]
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, max_steps=40, batch_size=32, learning_rate=3e-3,
                            mask_rate=mask_rate, random_state=0, device="cpu").fit(texts)
    losses = np.array([h["loss"] for h in scorer.history_])
    assert len(losses) == 40 and losses[-10:].mean() < losses[:5].mean() - 0.3
    assert scorer.model_ is not model and not scorer.model_.training
    # the caller's model is untouched
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    trained = scorer.pseudo_log_likelihood(texts[:20]).mean()
    untrained = MLMCurveScorer(model, tokenizer=tokenizer, device="cpu").fit().pseudo_log_likelihood(texts[:20])
    assert trained > untrained.mean() + 5


def test_grid_search_over_masking_rates(tiny_bert):
    from sklearn.model_selection import GridSearchCV

    model, tokenizer, texts = tiny_bert
    search = GridSearchCV(
        MLMCurveScorer(model, tokenizer=tokenizer, max_steps=5, batch_size=16, learning_rate=1e-3, score_masks=1,
                       score_method="chain", random_state=0, device="cpu"),
        {"mask_rate": [0.15, "uniform"]},
        cv=2,
    )
    search.fit(texts[:40])
    assert set(search.cv_results_["param_mask_rate"]) == {0.15, "uniform"}
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_command_line(tiny_bert, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from skmpt.cli import main

    model, tokenizer, texts = tiny_bert
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "texts.txt").write_text("\n".join(texts[:3]) + "\n\n", encoding="utf-8")
    status = main(["mlm-curve", "--model", str(tmp_path / "model"), "--texts", str(tmp_path / "texts.txt"),
                   "--out", str(tmp_path / "curve.csv"), "--plot", str(tmp_path / "curve.png"),
                   "--mask-rates", "0.1:0.9:0.2", "--score-masks", "2", "--device", "cpu"])
    rows = (tmp_path / "curve.csv").read_text().splitlines()
    assert status == 0 and rows[0] == "line,n_tokens,score,paper_area,S@0.1,S@0.3,S@0.5,S@0.7,S@0.9"
    assert len(rows) == 5 and rows[4] == "4,,,,,,,,"  # the blank line, numbered, with empty cells
    assert (tmp_path / "curve.png").stat().st_size > 0
    assert "3 texts, 1 blank line(s), mean score" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_scores_match_cpu(tiny_bert):
    model, tokenizer, texts = tiny_bert
    params = dict(tokenizer=tokenizer, score_masks=2, random_state=0)
    cpu = MLMCurveScorer(model, device="cpu", **params).fit().transform(texts[:8])
    cuda = MLMCurveScorer(model, device="cuda", **params).fit().transform(texts[:8])
    np.testing.assert_allclose(cuda, cpu, atol=1e-3)  # float32 on both ("auto": the model's own dtype)


def test_roberta_head_and_position_limit(tiny_bert):
    from transformers import RobertaConfig, RobertaForMaskedLM

    _, tokenizer, texts = tiny_bert
    config = RobertaConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=40, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = RobertaForMaskedLM(config).eval()
    assert sktext.predictors.language_model_head(model)[1] is model.lm_head
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, device="cpu").fit()
    assert scorer.max_length_ == 40 - (tokenizer.pad_token_id + 1)  # RoBERTa reserves the padding position
    encoded = encode(scorer, texts[:4])
    single = [(torch.eye(len(p), dtype=torch.bool),) * 2 for p in encoded.content_positions]
    expected = []
    for i, (masked, _) in enumerate(single):  # the whole model, all single-token masks of a text
        own = encoded.content_positions[i]
        ids = encoded.input_ids[i].repeat(len(masked), 1)
        ids[:, own] = torch.where(masked, tokenizer.mask_token_id, ids[:, own])
        with torch.no_grad():
            log_probs = model(input_ids=ids).logits.double().log_softmax(-1)
        expected.append(log_probs[torch.arange(len(own)), own, encoded.input_ids[i][own]].sum())
    np.testing.assert_allclose(scorer.pseudo_log_likelihood(texts[:4]), torch.stack(expected).numpy(), rtol=1e-5)


def test_progress_bar_clone_and_pickle(tiny_bert, capsys):
    import pickle

    from sklearn.base import clone

    model, tokenizer, texts = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=1, random_state=0, device="cpu", verbose=1).fit()
    pll = scorer.pseudo_log_likelihood(texts[:3])
    err = capsys.readouterr().err
    assert "scoring" in err and "44/44" in err  # masked copies: one per token of the three texts
    restored = pickle.loads(pickle.dumps(scorer))
    np.testing.assert_allclose(restored.pseudo_log_likelihood(texts[:3]), pll, rtol=1e-6)
    fresh = clone(scorer)
    assert fresh.model is model and not hasattr(fresh, "model_")  # shared: fit never modifies it
    np.testing.assert_allclose(fresh.fit().pseudo_log_likelihood(texts[:3]), pll, rtol=1e-6)


# ---------------------------------------------------------------- boundaries (empty inputs, budgets, lengths)


@pytest.fixture(scope="module")
def saved_bert(tiny_bert, tmp_path_factory):
    """The tiny BERT saved with its tokenizer, and saved again without one."""
    model, tokenizer, texts = tiny_bert
    root = tmp_path_factory.mktemp("saved")
    model.save_pretrained(root / "full")
    tokenizer.save_pretrained(root / "full")
    model.save_pretrained(root / "weights-only")
    return root


def test_directory_without_tokenizer_files_is_an_error(saved_bert, tiny_bert):
    _, tokenizer, texts = tiny_bert
    directory = str(saved_bert / "weights-only")
    with pytest.raises(ValueError, match=r"No tokenizer was found in model='.*weights-only'.*pass one with tokenizer="):
        MLMCurveScorer(directory, device="cpu").fit()
    with pytest.raises(ValueError, match="No tokenizer was found in tokenizer="):
        MLMCurveScorer(directory, tokenizer=directory, device="cpu").fit()
    scorer = MLMCurveScorer(directory, tokenizer=str(saved_bert / "full"), device="cpu").fit()
    assert len(scorer.tokenizer_) == len(tokenizer)


def test_tokenizer_ids_beyond_the_embedding_are_an_error(tiny_bert):
    _, tokenizer, _ = tiny_bert
    config = BertConfig(vocab_size=len(tokenizer) - 1, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=8)
    with pytest.raises(ValueError, match=rf"token ids up to {len(tokenizer) - 1} but the model's embedding holds "
                                         rf"{len(tokenizer) - 1}"):
        MLMCurveScorer(config, tokenizer=tokenizer, device="cpu").fit()


def test_models_that_are_not_masked_lms_are_rejected(tiny_bert, tmp_path):
    from transformers import BertModel, GPT2Config, GPT2LMHeadModel

    model, tokenizer, texts = tiny_bert
    gpt2_config = GPT2Config(vocab_size=len(tokenizer), n_embd=16, n_layer=1, n_head=2, n_positions=32)
    gpt2 = GPT2LMHeadModel(gpt2_config)
    gpt2.save_pretrained(tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    base = BertModel(model.config)
    base.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    for given, message in [
        (gpt2, "GPT2LMHeadModel, not a masked language model"),
        (base, "BertModel, not a masked language model"),
        (gpt2_config, "'gpt2' model, which has no masked language-model class"),
        (str(tmp_path / "gpt2"), "'gpt2' model, which has no masked language-model class"),
        (str(tmp_path / "base"), r"lacks 6 weights of its masked LM, which transformers would initialise at random: "
                                 r"cls\.predictions\.bias"),
    ]:
        with pytest.raises(ValueError, match=message):
            MLMCurveScorer(given, tokenizer=tokenizer, device="cpu").fit()
    # asked for explicitly, a random head is accepted
    scorer = MLMCurveScorer(str(tmp_path / "base"), allow_missing_weights=True, device="cpu").fit()
    assert np.isfinite(scorer.pseudo_log_likelihood(texts[:2])).all()


@pytest.mark.parametrize(
    "path", ["./no-such-model", "../no-such-model", "no/such/model", "model.safetensors", "models\\bert", "~/no-model"]
)
def test_paths_that_do_not_exist_are_not_hub_names(tiny_bert, path):
    with pytest.raises(ValueError, match=rf"model={path!r} is a path that does not exist".replace("\\", "\\\\")):
        MLMCurveScorer(path, device="cpu").fit()


@pytest.mark.parametrize("token", ["[SEP]", "[CLS]", "[PAD]", "[MASK]"])
def test_literal_special_tokens_are_rejected_by_every_method(joint_setup, token):
    _, tokenizer, _, _ = joint_setup
    texts = ["a b", f"a {token} b"]
    scorer = MLMCurveScorer(RecordingMaskedLM(len(tokenizer)), tokenizer=tokenizer, mask_rates=[0.5], score_masks=1,
                            device="cpu").fit()
    message = rf"Text 1 contains the special token '\[{token[1:-1]}\]'"
    for method in (scorer.transform, scorer.score_samples, scorer.pseudo_log_likelihood, scorer.paper_area,
                   scorer.fit, scorer.fit_transform, scorer.set_params(max_steps=1).fit):
        with pytest.raises(ValueError, match=message):
            method(texts)
    # an unknown word becomes [UNK], as the tokenizer spells it, and is scored
    assert scorer.set_params(max_steps=0).fit().transform(["a zzz b"]).shape == (1, 1)


def test_pandas_string_columns_arrays_and_datasets(tiny_bert):
    pd = pytest.importorskip("pandas")
    datasets = pytest.importorskip("datasets")
    model, tokenizer, texts = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, device="cpu").fit()
    expected = scorer.pseudo_log_likelihood(texts[:3])
    inputs = [np.array(texts[:3])[:, None], [[t] for t in texts[:3]],
              datasets.Dataset.from_dict({"n": [1, 2, 3], "body": texts[:3]}).to_iterable_dataset(),
              datasets.IterableDataset.from_generator(lambda: iter({"text": t} for t in texts[:3]))]
    for dtype in ("str", "string[pyarrow]", "string[python]", object):
        inputs += [pd.Series(texts[:3], dtype=dtype), pd.DataFrame({"body": texts[:3]}, dtype=dtype),
                   pd.DataFrame({"n": [1, 2, 3], "body": pd.Series(texts[:3], dtype=dtype)})]
    for X in inputs:
        np.testing.assert_allclose(scorer.pseudo_log_likelihood(X), expected, err_msg=type(X).__name__)
    with pytest.raises(ValueError, match=r"Text 1 is not a string but NAType"):
        scorer.transform(pd.Series([texts[0], None], dtype="string"))
    with pytest.raises(ValueError, match=r"column of shape \(n, 1\); got shape \(3, 2\)"):
        scorer.transform(np.array([texts[:2]] * 3))


def test_a_transformer_with_pandas_output(tiny_bert):
    pd = pytest.importorskip("pandas")
    model, tokenizer, texts = tiny_bert
    params = dict(tokenizer=tokenizer, mask_rates=[0.1, 0.25, 0.5], score_masks=1, random_state=0)
    scorer = MLMCurveScorer(model, device=torch.device("cpu"), **params)
    curve = scorer.fit_transform(texts[:3])
    np.testing.assert_array_equal(curve, MLMCurveScorer(model, device="cpu", **params).fit().transform(texts[:3]))
    assert scorer.device_ == torch.device("cpu")
    assert scorer.get_feature_names_out().tolist() == ["S@0.1", "S@0.25", "S@0.5"]
    frame = scorer.set_output(transform="pandas").transform(pd.Series(texts[:3], index=[7, 8, 9]))
    assert isinstance(frame, pd.DataFrame) and frame.columns.tolist() == ["S@0.1", "S@0.25", "S@0.5"]
    assert frame.index.tolist() == [7, 8, 9]
    np.testing.assert_array_equal(frame.to_numpy(), curve)


def test_clone_does_not_copy_the_weights(tiny_bert, monkeypatch):
    from sklearn.base import clone

    model, tokenizer, texts = tiny_bert
    n_parameters = len(list(model.parameters()))
    copies = []
    original = torch.nn.Parameter.__deepcopy__

    def counting(self, memo):
        copies.append(1)
        return original(self, memo)

    monkeypatch.setattr(torch.nn.Parameter, "__deepcopy__", counting)
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, max_steps=1, batch_size=4, device="cpu", random_state=0)
    fresh = clone(clone(scorer))
    assert len(copies) == 0 and fresh.model is model
    fresh.fit(texts[:8])  # training works on one copy; the user's model is untouched
    assert len(copies) == n_parameters and fresh.model_ is not model
    MLMCurveScorer(model, tokenizer=tokenizer, device="cpu").fit()  # nothing to train, move or cast
    assert len(copies) == n_parameters


def test_from_pretrained_options_are_passed_through(saved_bert, monkeypatch):
    import transformers

    seen = {}
    for cls in (transformers.AutoConfig, transformers.AutoModelForMaskedLM, transformers.AutoTokenizer):
        original = cls.from_pretrained.__func__

        def spy(klass, source, *args, _original=original, _name=cls.__name__, **kwargs):
            seen[_name] = kwargs
            return _original(klass, source, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    options = {"revision": "main", "local_files_only": True, "trust_remote_code": False}
    MLMCurveScorer(str(saved_bert / "full"), model_kwargs=options, dtype="float32", device="cpu").fit()
    assert options.items() <= seen["AutoConfig"].items() and options.items() <= seen["AutoTokenizer"].items()
    expected = {**options, "dtype": torch.float32, "output_loading_info": True}
    assert expected.items() <= seen["AutoModelForMaskedLM"].items()
    with pytest.raises(ValueError, match="model_kwargs may not hold 'torch_dtype': use the dtype parameter"):
        MLMCurveScorer(str(saved_bert / "full"), model_kwargs={"torch_dtype": "float16"}, device="cpu").fit()


def test_bfloat16_scores_are_close_to_float32_and_the_model_is_not_cast(tiny_bert):
    model, tokenizer, texts = tiny_bert
    params = dict(tokenizer=tokenizer, score_masks=2, mask_rates=[0.15, 0.5], random_state=0, device="cpu")
    full = MLMCurveScorer(model, **params).fit()
    half = MLMCurveScorer(model, dtype="bfloat16", **params).fit()
    assert next(half.model_.parameters()).dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.float32  # the user's model is not cast
    for method in ("transform", "pseudo_log_likelihood"):
        exact, rounded = getattr(full, method)(texts[:8]), getattr(half, method)(texts[:8])
        assert rounded.dtype == np.float64
        per_token = np.abs(rounded - exact) / (1 if method == "transform" else encode(full, texts[:8]).n_tokens)
        assert per_token.max() < 0.005, per_token.max()  # measured: 6.2e-4 (curve), 3.3e-4 (PLL) nats per token
    config = model.config
    before = config.to_dict()
    MLMCurveScorer(config, dtype="bfloat16", **params).fit()
    assert config.to_dict() == before  # the user's configuration is not written to


def test_training_logs_to_the_skmpt_logger(tiny_bert, caplog, capsys):
    model, tokenizer, texts = tiny_bert
    with caplog.at_level("INFO", logger="skmpt"):
        scorer = MLMCurveScorer(model, tokenizer=tokenizer, max_steps=2, batch_size=4, random_state=0,
                                device="cpu", verbose=1).fit(texts[:8])
    steps = [r.getMessage()[:14] for r in caplog.records if "step" in r.getMessage()]
    assert steps == ["step 1 of 2: l", "step 2 of 2: l"]
    assert all(r.name.startswith("skmpt") for r in caplog.records)
    captured = capsys.readouterr()
    assert captured.out == "" and "training" in captured.err  # a tqdm bar, no print
    assert len(scorer.history_) == 2


def test_progress_bar_advances_per_forward_pass(tiny_bert, monkeypatch):
    import tqdm.auto

    model, tokenizer, texts = tiny_bert
    bars = []

    class Recording(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.steps, self.hidden = [], kwargs.get("disable")  # tqdm's close() sets disable itself
            bars.append(self)

        def update(self, n=1):
            self.steps.append(n)
            return super().update(n)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, score_batch_size=4, device="cpu", verbose=1).fit()
    scorer.pseudo_log_likelihood(texts[:3])
    lengths = encode(scorer, texts[:3]).n_tokens
    (bar,) = bars
    assert bar.total == lengths.sum() == sum(bar.steps) and len(bar.steps) >= lengths.sum() // 4
    assert max(bar.steps) <= 4  # one update per forward pass of at most score_batch_size copies
    scorer.set_params(verbose=0).pseudo_log_likelihood(texts[:3])  # set_params acts at the next fit
    assert bars[-1].hidden is False
    scorer.fit().pseudo_log_likelihood(texts[:3])
    assert bars[-1].hidden is True


def test_clone_keeps_the_output_configuration(joint_setup):
    from sklearn.base import clone

    joint, tokenizer, texts, _ = joint_setup
    model = JointMaskedLM(joint, tokenizer)
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.4], score_masks=1, device="cpu")
    fresh = clone(scorer.set_output(transform="pandas"))
    assert fresh.model is model and fresh.tokenizer is tokenizer
    assert fresh.get_params()["mask_rates"] == [0.4] and fresh.get_params()["mask_rates"] is not scorer.mask_rates
    assert fresh.fit_transform(texts[:2]).columns.tolist() == ["S@0.4"]
    # token_scores builds its table itself, from the choice the clone carries
    assert fresh.token_scores(texts[:1]).columns.tolist()[-1] == "score"
    assert isinstance(clone(scorer.set_output(transform="default")).fit().token_scores(texts[:1]), list)


def test_a_tokenizer_of_special_tokens_only_is_no_tokenizer(saved_bert, tmp_path):
    import shutil

    # a stray tokenizer_config.json is not a vocabulary: transformers would build 5 tokens from it
    shutil.copytree(saved_bert / "weights-only", tmp_path / "model")
    (tmp_path / "model" / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer"}')
    with pytest.raises(ValueError, match=r"No tokenizer was found in model=.*holds only its \d special tokens"):
        MLMCurveScorer(str(tmp_path / "model"), device="cpu").fit()


def test_target_log_probs_match_a_float64_log_softmax():
    # Float32 logits are normalised without a float64 copy (within 3e-7 nats of it); rows
    # whose largest logit could overflow or underflow float32 exp take the float64 path.
    from skmpt.text.runner import target_log_probs

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 30522, generator=g) * 4
    logits[1] += 95.0  # would overflow exp in float32
    logits[2] -= 120.0  # would underflow
    logits[3, :50] += 30.0
    targets = torch.randint(0, 30522, (6,), generator=g)
    expected = torch.log_softmax(logits.double(), -1)[torch.arange(6), targets]
    got = target_log_probs(logits, targets)
    assert got.dtype == torch.float64 and torch.isfinite(got).all()
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=0, atol=3e-7)
    np.testing.assert_allclose(got[[1, 2]].numpy(), expected[[1, 2]].numpy(), rtol=0, atol=1e-12)
    for dtype in (torch.float64, torch.bfloat16):
        lower = logits.to(dtype)
        reference = torch.log_softmax(lower.double(), -1)[torch.arange(6), targets]
        np.testing.assert_allclose(target_log_probs(lower, targets).numpy(), reference.numpy(), rtol=0, atol=3e-7)


# --- containers, bounded work on one text, text that cannot be encoded --------------

_WORDS = st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=4).map(" ".join)

# Containers whose iteration is the texts in order, as a user means them.
_ORDERED = {
    "list": lambda texts: (list(texts), None),
    "tuple": lambda texts: (tuple(texts), None),
    "array": lambda texts: (np.array(texts, dtype=object), None),
    "column": lambda texts: (np.array(texts, dtype=object)[:, None], None),
    "rows": lambda texts: ([[text] for text in texts], None),
    "generator": lambda texts: ((text for text in texts), None),
    "iterator": lambda texts: (iter(list(texts)), None),
    "mapping": lambda texts: ({"label": list(range(len(texts))), "body": list(texts)}, "body"),
}
# Containers that iterate over something else, or in an arbitrary order: refused, never read.
_REFUSED = {
    "set": (lambda texts: set(texts), "order is arbitrary"),
    "frozenset": (lambda texts: frozenset(texts), "order is arbitrary"),
    "keys": (lambda texts: dict.fromkeys(texts).keys(), "view of a mapping"),
    "values": (lambda texts: dict(enumerate(texts)).values(), "view of a mapping"),
    "items": (lambda texts: dict(enumerate(texts)).items(), "view of a mapping"),
    "mapping": (lambda texts: {text: i for i, text in enumerate(texts)}, "keys are not texts"),
    "string": (lambda texts: " ".join(texts), "single string"),
    "bytes": (lambda texts: " ".join(texts).encode(), "single bytes"),
}


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(texts=st.lists(_WORDS, min_size=1, max_size=6), kind=st.sampled_from(sorted(_ORDERED)))
def test_ordered_containers_give_their_texts_in_order(texts, kind):
    X, column = _ORDERED[kind](texts)
    assert sktext.encoding.texts_of(X, text_column=column) == texts
    X, column = _ORDERED[kind](texts)  # a generator is read once: a fresh one
    encoded = sktext.encode_texts(X, binary_tokenizer(), 16, text_column=column)
    assert encoded.n_tokens.tolist() == [len(text.split()) for text in texts]


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(texts=st.lists(_WORDS, min_size=1, max_size=6), kind=st.sampled_from(sorted(_REFUSED)))
def test_containers_read_as_something_else_are_refused(texts, kind):
    make, message = _REFUSED[kind]
    with pytest.raises(ValueError, match=message):
        sktext.encode_texts(make(texts), binary_tokenizer(), 16)


def test_mappings_need_text_column_and_dataset_dicts_a_split(joint_setup):
    _, _, texts, _ = joint_setup
    with pytest.raises(ValueError, match="is not a key of the mapping"):
        sktext.encoding.texts_of({"text": texts}, text_column="body")
    with pytest.raises(ValueError, match="not a sequence of texts"):
        sktext.encoding.texts_of({"text": {"nested": texts}}, text_column="text")
    datasets = pytest.importorskip("datasets")
    splits = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": texts})})
    with pytest.raises(ValueError, match=r"Pass one split, e.g. X\['train'\]"):
        sktext.encoding.texts_of(splits)
    assert sktext.encoding.texts_of(splits["train"]) == texts


def test_a_text_that_is_not_valid_unicode_is_named(joint_setup):
    _, tokenizer, texts, _ = joint_setup
    with pytest.raises(ValueError, match=r"Text 1 cannot be encoded: the character '\\ud800' at position 2"):
        sktext.encode_texts([texts[0], "a \ud800 b"], tokenizer, 16)


class _RecordingTokenizer:
    """A tokenizer that keeps the longest string it was given."""

    def __init__(self, tokenizer):
        self.tokenizer, self.longest = tokenizer, 0

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)

    def __call__(self, texts, **kwargs):
        self.longest = max(self.longest, *map(len, texts))
        return self.tokenizer(texts, **kwargs)


@pytest.mark.parametrize("separator", [" ", "\n", "  "])
def test_a_huge_line_is_cut_before_it_is_tokenised_and_warned_about_once(joint_setup, separator):
    _, tokenizer, _, _ = joint_setup
    short, huge = "a b a b", separator.join(["b a"] * 300_000)
    recording = _RecordingTokenizer(tokenizer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        encoded = sktext.encode_texts([huge, short], recording, 10)
    assert [str(w.message) for w in caught] == [
        "1 of 2 texts are longer than max_length=10 tokens and were truncated."
    ]
    assert recording.longest < 1000  # never the 1.2 million characters of the huge line
    expected = tokenizer(huge[:100], truncation=True, max_length=10)["input_ids"]
    assert encoded.input_ids[0].tolist() == expected and encoded.n_tokens.tolist() == [8, 4]


def test_a_cut_that_leaves_room_is_made_longer(joint_setup):
    _, tokenizer, _, _ = joint_setup
    text = "a" + " " * 5000 + "b a b"  # the first cut holds one token: cut again, longer
    encoded = sktext.encode_texts([text], tokenizer, 10)
    assert encoded.n_tokens.tolist() == [4]


def test_a_special_token_beyond_the_truncation_is_never_read(joint_setup):
    _, tokenizer, _, _ = joint_setup
    with pytest.warns(UserWarning, match="truncated"):
        encoded = sktext.encode_texts(["a b " * 10 + "[MASK]"], tokenizer, 6)
    assert encoded.n_tokens.tolist() == [4]
    with pytest.raises(ValueError, match="special token"):
        sktext.encode_texts(["a [MASK] " * 10], tokenizer, 6)


@pytest.mark.parametrize("max_length", [2, 1])
def test_max_length_must_leave_room_for_a_token(joint_setup, max_length):
    _, tokenizer, texts, _ = joint_setup
    with pytest.raises(ValueError, match=rf"max_length={max_length} leaves no room for a token.*at least 3"):
        sktext.encode_texts(texts, tokenizer, max_length)
    assert sktext.encoding.check_max_length(tokenizer, 3) == 1


def test_training_that_diverges_is_an_error(tiny_bert):
    model, tokenizer, texts = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, max_steps=3, batch_size=4, learning_rate=1e30,
                            random_state=0, device="cpu")
    with pytest.raises(FloatingPointError, match=r"diverged: the loss became nan at step 2; lower learning_rate"):
        scorer.fit(texts[:40])


def test_misread_containers_are_refused_before_the_model_loads(tmp_path):
    # The model path does not exist: had the model been loaded first, that error would come first.
    scorer = MLMCurveScorer(str(tmp_path / "no-model"), max_steps=2, device="cpu")
    with pytest.raises(ValueError, match="text_column"):
        scorer.fit({"text": ["a b", "b a"], "label": [0, 1]})


def test_unusable_checkpoint_dirs_are_refused_before_training(tiny_bert, tmp_path):
    model, tokenizer, texts = tiny_bert
    (tmp_path / "afile").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for directory, message in ((tmp_path / "afile" / "sub", "cannot be created"),
                               (tmp_path / "dangling", "symbolic link to nothing")):
        scorer = MLMCurveScorer(model, tokenizer=tokenizer, max_steps=2, checkpoint_every=2,
                                checkpoint_dir=str(directory), device="cpu")
        with pytest.raises(ValueError, match=message):
            scorer.fit(texts[:8])


def test_set_params_after_fit_acts_at_the_next_fit(tiny_bert):
    """A fitted scorer reads the parameters it was fitted with (params_), as every skmpt estimator."""
    model, tokenizer, texts = tiny_bert
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=2, random_state=0, device="cpu").fit()
    before = scorer.score_samples(texts[:3]), scorer.transform(texts[:3])
    scorer.set_params(score_masks=3, score_method="chain", unit="bits", random_state=1, whole_word_masking=True)
    np.testing.assert_array_equal(scorer.score_samples(texts[:3]), before[0])
    np.testing.assert_array_equal(scorer.transform(texts[:3]), before[1])
    assert scorer.params_["score_masks"] == 2
    refitted = scorer.fit()
    assert refitted.params_["unit"] == "bits" and not np.allclose(refitted.score_samples(texts[:3]), before[0])


@pytest.mark.parametrize("missing", ["transformers", "tokenizers"])
def test_a_missing_text_extra_is_an_import_error_naming_the_extra(monkeypatch, missing):
    from skmpt.datasets import make_wordpiece_tokenizer

    monkeypatch.setitem(sys.modules, missing, None)  # import of it fails as when it is not installed
    with pytest.raises(ImportError, match=rf"MLMCurveScorer.fit needs {missing}.*pip install \"skmpt\[text\]\""):
        MLMCurveScorer("bert-base-uncased", device="cpu").fit()
    with pytest.raises(ImportError, match=r"pip install \"skmpt\[text\]\""):
        make_wordpiece_tokenizer(["a b"], vocab_size=10)
