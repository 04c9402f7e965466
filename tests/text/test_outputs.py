"""MLMCurveScorer on a real pretrained masked LM (AntiBERTy) and its per-token, per-word outputs."""

import types

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from support.text import SPECIALS, JointMaskedLM, binary_tokenizer  # noqa: E402

import skmpt.text as sktext  # noqa: E402
from skmpt import MLMCurveScorer  # noqa: E402

# The first residues of trastuzumab's heavy and light variable domains (IMGT/mAb-DB; see
# examples/data/antibody_sequences.csv for the full domains and their source).
SEQUENCES = ["EVQLVESGGGLVQPG", "DIQMTQSPSSLSASV"]


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


class RecordingMaskedLM(torch.nn.Module):
    """Keeps the inputs it is given; predicts uniformly."""

    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size, self.calls = vocab_size, []

    def forward(self, input_ids, attention_mask):
        self.calls.append(input_ids.clone())
        return types.SimpleNamespace(logits=torch.zeros(*input_ids.shape, self.vocab_size, device=input_ids.device))


@pytest.fixture(scope="module")
def tiny():
    """A tiny random BERT and a WordPiece tokenizer of 200 pieces: most words are several tokens."""
    from transformers import BertConfig, BertForMaskedLM

    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    corpus = load_wordnet_sentences()
    tokenizer = make_wordpiece_tokenizer(corpus[:300], vocab_size=200)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    model = BertForMaskedLM(config).double().eval()
    texts = [" ".join(t.split()[:6]) for t in corpus[300:303]]
    return model, tokenizer, texts


def direct_pll(model, tokenizer, text, l2r):
    """Kauf and Ivanova's definitions, written out token by token with the model called directly."""
    encoding = tokenizer(text, return_tensors="pt")
    ids, words = encoding["input_ids"][0], encoding.word_ids(0)
    total = 0.0
    for j in range(1, len(ids) - 1):
        masked = ids.clone()
        masked[j] = tokenizer.mask_token_id
        if l2r:
            for k in range(j + 1, len(ids) - 1):
                if words[k] == words[j]:
                    masked[k] = tokenizer.mask_token_id
        with torch.no_grad():
            logits = model(input_ids=masked[None]).logits[0, j]
        total += float(torch.log_softmax(logits.double(), -1)[ids[j]])
    return total


def test_pll_metrics_equal_a_direct_implementation(tiny):
    model, tokenizer, texts = tiny
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, random_state=0).fit()
    for metric, l2r in (("original", False), ("within_word_l2r", True)):
        expected = [direct_pll(model, tokenizer, text, l2r) for text in texts]
        np.testing.assert_allclose(scorer.pseudo_log_likelihood(texts, metric=metric), expected, rtol=1e-10)
    # the texts have multi-token words, so the two metrics differ
    gap = scorer.pseudo_log_likelihood(texts) - scorer.pseudo_log_likelihood(texts, metric="within_word_l2r")
    assert np.abs(gap).max() > 1e-5


def test_token_and_word_scores_add_up_units_and_perplexity(tiny):
    model, tokenizer, texts = tiny
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, random_state=0).fit()
    for metric in ("original", "within_word_l2r"):
        pll = scorer.pseudo_log_likelihood(texts, metric=metric)
        tokens = scorer.token_scores(texts, metric=metric)
        words = scorer.token_scores(texts, level="word", metric=metric)
        np.testing.assert_allclose([t.sum() for t in tokens], pll, rtol=1e-12)
        np.testing.assert_allclose([w.sum() for w in words], pll, rtol=1e-12)
    n_tokens = [len(t) for t in tokens]
    assert [len(w) for w in words] == [len(t.split()) for t in texts] and n_tokens > [len(w) for w in words]
    pll = scorer.pseudo_log_likelihood(texts)
    np.testing.assert_allclose(scorer.pseudo_perplexity(texts), np.exp(-pll / n_tokens), rtol=1e-12)
    np.testing.assert_allclose(scorer.pseudo_perplexity(texts, level="word"),
                               np.exp(-pll / [len(w) for w in words]), rtol=1e-12)
    bits = MLMCurveScorer(model, tokenizer=tokenizer, unit="bits", random_state=0).fit()
    np.testing.assert_allclose(bits.pseudo_log_likelihood(texts), pll / np.log(2), rtol=1e-12)
    np.testing.assert_allclose(bits.token_scores(texts)[0], scorer.token_scores(texts)[0] / np.log(2), rtol=1e-12)
    np.testing.assert_allclose(bits.pseudo_perplexity(texts), scorer.pseudo_perplexity(texts), rtol=1e-12)


def test_long_table_with_set_output(tiny):
    model, tokenizer, texts = tiny
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.3, 0.9], score_masks=2,
                            random_state=0).fit()
    tokens = scorer.token_scores(texts)
    table = scorer.set_output(transform="pandas").token_scores(texts, level="word")
    assert list(table.columns) == ["text", "position", "token", "word", "score"]
    assert len(table) == sum(len(t.split()) for t in texts)
    np.testing.assert_allclose(table.groupby("text")["score"].sum(), [t.sum() for t in tokens], rtol=1e-12)
    assert table["token"].iloc[0].replace(" ##", "") == texts[0].split()[0].lower()
    curve = scorer.token_scores(texts, curve=True)
    assert list(curve.columns[-2:]) == ["S@0.3", "S@0.9"] and len(curve) == sum(len(t) for t in tokens)
    assert curve["word"].notna().all()  # a fast tokenizer's word ids fill the token-level table's word column


def test_curve_token_scores_average_to_the_curve_when_every_token_is_masked(joint_setup):
    joint, tokenizer, texts, X = joint_setup
    scorer = MLMCurveScorer(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer, mask_rates=[0.2, 0.99],
                            score_masks=3, random_state=0).fit()
    tokens = scorer.token_scores(texts, curve=True)
    assert tokens[0].shape == (5, 2)
    # at rate 0.99 every mask covers all 5 tokens: the tokens' mean is S(x; 5)
    np.testing.assert_allclose([t[:, 1].mean() for t in tokens], scorer.transform(texts)[:, 1], rtol=1e-12)


@pytest.fixture(scope="module")
def joint_setup():
    from skmpt.testing import TabularJoint

    joint = TabularJoint.random(5, random_state=0)
    tokenizer = binary_tokenizer()
    X = joint.sample(6, random_state=1).numpy()
    texts = [" ".join("ab"[int(v)] for v in row) for row in X]
    return joint, tokenizer, texts, torch.as_tensor(X, dtype=torch.float64)


def test_standard_errors_match_the_spread_of_repeats(tiny):
    model, tokenizer, texts = tiny
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.2, 0.5], score_masks=4)
    for method in ("sweep", "chain"):
        repeats, errors = [], []
        for seed in range(25):
            scores, std = scorer.set_params(score_method=method, random_state=seed).fit().score_samples(
                texts[:2], return_std=True)
            repeats.append(scores)
            errors.append(std)
        ratio = np.std(repeats, axis=0, ddof=1) / np.mean(errors, axis=0)
        assert ((ratio > 0.6) & (ratio < 1.6)).all(), (method, ratio)
    curves = [scorer.set_params(random_state=seed).fit().transform(texts[:2], return_std=True) for seed in range(25)]
    ratio = np.std([c for c, _ in curves], axis=0, ddof=1) / np.mean([s for _, s in curves], axis=0)
    assert ((ratio > 0.5) & (ratio < 2.0)).all(), ratio


def test_bad_requests_fail_before_any_forward_pass(tiny):
    from transformers import BertTokenizerLegacy

    model, tokenizer, texts = tiny
    recorder = RecordingMaskedLM(len(tokenizer))
    scorer = MLMCurveScorer(recorder, tokenizer=tokenizer, score_masks=1).fit()
    recorder.calls.clear()  # fit's probe pass on a few ids (the adapters' checks); no text was scored
    with pytest.raises(ValueError, match="return_std=True needs score_masks >= 2"):
        scorer.score_samples(texts, return_std=True)
    with pytest.raises(ValueError, match="return_std=True needs score_masks >= 2"):
        scorer.transform(texts, return_std=True)
    with pytest.raises(ValueError, match="return_std=True needs score_masks >= 2"):
        scorer.conditional_transform(["a"], [" b"], return_std=True)
    with pytest.raises(ValueError, match="needs score_masks >= 2"):
        scorer.inconsistency(texts)
    with pytest.raises(ValueError, match="'metric' parameter of SingleTokenMasks must be a str among"):
        scorer.pseudo_log_likelihood(texts, metric="l2r")
    with pytest.raises(ValueError, match="'level' parameter of MLMCurveScorer.token_scores must be a str"):
        scorer.token_scores(texts, level="sentence")
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/vocab.txt"
        with open(path, "w") as f:
            f.write("\n".join([*SPECIALS, "a", "b"]))
        slow = BertTokenizerLegacy(path)
    slow_scorer = MLMCurveScorer(recorder, tokenizer=slow).fit()
    whole_words = MLMCurveScorer(recorder, tokenizer=slow, whole_word_masking=True).fit()
    recorder.calls.clear()
    for call in (lambda: slow_scorer.token_scores(["a b"], level="word"),
                 lambda: slow_scorer.pseudo_log_likelihood(["a b"], metric="within_word_l2r"),
                 lambda: whole_words.transform(["a b"])):
        with pytest.raises(ValueError, match="need a tokenizer that gives word ids: a fast tokenizer"):
            call()
    assert recorder.calls == []


def test_whole_word_masks_cover_whole_words(tiny):
    model, tokenizer, texts = tiny
    recorder = RecordingMaskedLM(len(tokenizer))
    scorer = MLMCurveScorer(recorder, tokenizer=tokenizer, mask_rates=[0.4], score_masks=3, whole_word_masking=True,
                            random_state=0).fit()
    recorder.calls.clear()  # fit's probe pass
    scorer.transform(texts[:1])
    encoding = tokenizer(texts[0])
    words = np.array([-1 if w is None else w for w in encoding.word_ids()])
    n_words = len(texts[0].split())
    for row in torch.cat(recorder.calls).numpy():
        masked = row == tokenizer.mask_token_id
        masked_words = set(words[masked])
        assert len(masked_words) == round(0.4 * n_words)
        assert all(masked[words == w].all() for w in masked_words)  # every token of a masked word
    # the curve's token scores use the same word masks: a word's tokens are scored together or not at all
    scores = scorer.token_scores(texts[:1], curve=True)[0][:, 0]
    own = words[words >= 0]
    assert all(len(set(np.isnan(scores[own == w]))) == 1 for w in set(own)) and np.isfinite(scores).any()


def test_whole_word_masking_with_one_token_words_is_token_masking(joint_setup):
    joint, tokenizer, texts, X = joint_setup
    model = JointMaskedLM(joint, tokenizer)
    plain = MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.4, 0.8], score_masks=2, random_state=0).fit()
    words = MLMCurveScorer(model, tokenizer=tokenizer, mask_rates=[0.4, 0.8], score_masks=2, random_state=0,
                           whole_word_masking=True).fit()
    np.testing.assert_array_equal(words.transform(texts), plain.transform(texts))
    np.testing.assert_array_equal(words.score_samples(texts), plain.score_samples(texts))


def test_inconsistency_is_zero_on_a_joint_and_positive_on_a_trained_bert(joint_setup, antiberty):
    joint, tokenizer, texts, X = joint_setup
    exact = MLMCurveScorer(JointMaskedLM(joint, tokenizer), tokenizer=tokenizer, score_masks=4, random_state=0).fit()
    spread, error = exact.inconsistency(texts, return_std=True)
    assert np.abs(spread).max() < 1e-10 and np.abs(error).max() < 1e-10
    model, tokenizer = antiberty
    trained = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=4, random_state=0).fit()
    spread, error = trained.inconsistency(["EVQLVESGGG"], return_std=True)
    assert spread[0] > 3 * error[0] > 0


def test_command_line_unit_std_and_pll(tiny, tmp_path):
    import pandas as pd

    from skmpt.cli import main

    model, tokenizer, texts = tiny
    model.float().save_pretrained(tmp_path / "model")
    model.double()
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    common = ["mlm-curve", "--model", str(tmp_path / "model"), "--texts", str(tmp_path / "texts.txt"),
              "--mask-rates", "0.5", "--score-masks", "2", "--device", "cpu", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "nats.csv")]) == 0
    assert main([*common, "--out", str(tmp_path / "bits.csv"), "--unit", "bits", "--std", "--pll",
                 "within_word_l2r"]) == 0
    nats, bits = pd.read_csv(tmp_path / "nats.csv"), pd.read_csv(tmp_path / "bits.csv")
    assert list(bits.columns) == ["line", "n_tokens", "score", "score_std", "pll", "paper_area", "S@0.5"]
    np.testing.assert_allclose(bits["score"], nats["score"] / np.log(2), rtol=1e-9)
    assert (bits["score_std"] > 0).all() and (bits["pll"] < 0).all()
    assert main([*common, "--out", str(tmp_path / "x.csv"), "--std", "--score-masks", "1"]) == 2


@pytest.mark.parametrize("unit", ["nat", "Bits", 1.0, None])
def test_an_unknown_unit_is_named_with_the_units_accepted(unit):
    from skmpt._validation import InvalidParameterError
    from skmpt.text.outputs import unit_factor

    with pytest.raises(InvalidParameterError, match=r"The 'unit' parameter of unit_factor must be a str among "
                                                     r"{'bits', 'nats'}; got"):
        unit_factor(unit)
    assert unit_factor("bits") == pytest.approx(1 / np.log(2))
