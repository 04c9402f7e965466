"""Outputs of every estimator, of the MLM scorer and of the command line on fixed seeds.

``python tests/support/golden.py`` writes them to ``tests/data/golden.npz``; ``tests/test_golden.py``
recomputes them and compares. They were first recorded before the package was restructured, so
the test shows that every move since changed no number. Regenerate the file only for a
change that is meant to move the numbers, and say so in the commit.
"""

import collections
import csv
import io
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

GOLDEN = Path(__file__).parents[1] / "data" / "golden.npz"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _ppca_data(n_samples=120, n_features=6, seed=0):
    rng = np.random.RandomState(seed)
    W = rng.randn(2, n_features)
    return rng.randn(n_samples, 2) @ W + rng.randn(n_features) + 0.6 * rng.randn(n_samples, n_features)


def _estimators():
    from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedLinearVAE, MaskedPPCA, MaskedVAE

    common = {"max_epochs": 4, "random_state": 0, "device": "cpu"}
    return {
        # Recorded with mini-batches, the solver of complete data of fewer than 1,000 rows until 0.1.0.
        "ppca": MaskedPPCA(n_components=2, solver="minibatch", **common),
        "ppca_fixed": MaskedPPCA(n_components=2, mask_rate=0.3, n_masks=2, score_method="sweep", score_masks=3,
                                 solver="minibatch", **common),
        "fa": MaskedFactorAnalysis(n_components=2, solver="minibatch", **common),
        "gmm_full": MaskedGaussianMixture(n_components=2, **common),
        "gmm_diag": MaskedGaussianMixture(n_components=2, covariance_type="diag", **common),
        "linear_vae_gaussian": MaskedLinearVAE(n_components=1, likelihood="gaussian", n_quadrature=6, **common),
        "linear_vae_bernoulli": MaskedLinearVAE(n_components=1, n_quadrature=6, **common),
        "linear_vae_elbo": MaskedLinearVAE(n_components=1, n_quadrature=6, objective="elbo", **common),
        "vae": MaskedVAE(n_components=1, hidden_layer_sizes=(4,), n_particles=3, score_masks=2, n_lml_samples=5,
                         **{**common, "max_epochs": 2}),
        "vae_gibbs": MaskedVAE(n_components=1, hidden_layer_sizes=(4,), conditional="pseudo_gibbs", n_particles=3,
                               n_gibbs=2, score_masks=2, n_lml_samples=5, **{**common, "max_epochs": 2}),
    }


def _exhaustive(estimator, X):
    """The same estimator scoring every mask: refitted, since parameters act at fit (the score's
    options do not change training, so the refit's module is the same, bit for bit)."""
    from sklearn.base import clone

    return clone(estimator).set_params(score_method="exhaustive").fit(X)


def estimator_outputs():
    from sklearn.decomposition import PCA, FactorAnalysis
    from sklearn.mixture import GaussianMixture

    from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedPPCA

    out = {}
    X = _ppca_data()
    X_binary = (X > X.mean(0)).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, estimator in _estimators().items():
            data = X_binary if "bernoulli" in name or name == "linear_vae_elbo" else X
            if name.startswith("vae"):
                data = data[:, :4]
            estimator.fit(data)
            out[f"{name}/history"] = np.array([r["objective"] for r in estimator.history_])
            out[f"{name}/score_samples"] = estimator.score_samples(data[:10])
            out[f"{name}/mpt_curve"] = estimator.mpt_curve(data[:10])[1]
            out[f"{name}/transform"] = estimator.transform(data[:10])
            out[f"{name}/log_marginal_likelihood"] = estimator.log_marginal_likelihood(data[:10])
            out[f"{name}/score_exhaustive"] = _exhaustive(estimator, data).score_samples(data[:5])
        for name, (source, target) in {
            "pca": (PCA(2), MaskedPPCA),
            "factor_analysis": (FactorAnalysis(2, random_state=0), MaskedFactorAnalysis),
            "gaussian_mixture": (GaussianMixture(2, random_state=0), MaskedGaussianMixture),
        }.items():
            converted = target.from_estimator(source.fit(X), device="cpu", random_state=0)
            out[f"from_{name}/score_samples"] = converted.score_samples(X[:10])
            out[f"from_{name}/mpt_curve"] = converted.mpt_curve(X[:10])[1]
        partial = MaskedPPCA(n_components=2, random_state=0, device="cpu")
        for chunk in np.array_split(X, 3):
            partial.partial_fit(chunk)
        out["ppca_partial_fit/score_samples"] = partial.score_samples(X[:10])
    return out


def tiny_masked_lm():
    """A tiny BERT and a word-level tokenizer, both the same in every process."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    from skmpt.datasets import load_wordnet_sentences

    texts = load_wordnet_sentences()[:300]
    counts = collections.Counter(word for text in texts for word in text.lower().split())
    words = sorted(counts, key=lambda word: (-counts[word], word))[:200]
    vocab = {token: i for i, token in enumerate([*SPECIALS, *words])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]",
    )
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertForMaskedLM(config).eval()
    return model, tokenizer, [text.lower() for text in texts]


def mlm_outputs(tmp_dir):
    from skmpt import MLMCurveScorer
    from skmpt.cli import main

    model, tokenizer, texts = tiny_masked_lm()
    sample = texts[:6]
    out = {}
    common = {"tokenizer": tokenizer, "device": "cpu", "random_state": 0, "mask_rates": [0.2, 0.5, 0.8]}
    for method in ("sweep", "chain"):
        scorer = MLMCurveScorer(model, score_method=method, score_masks=3, **common).fit()
        out[f"mlm_{method}/transform"] = scorer.transform(sample)
        out[f"mlm_{method}/score_samples"] = scorer.score_samples(sample)
        out[f"mlm_{method}/pseudo_log_likelihood"] = scorer.pseudo_log_likelihood(sample)
    trained = MLMCurveScorer(model, max_steps=2, batch_size=4, score_batch_size=4, score_masks=2,
                             **common).fit(texts[:20])
    out["mlm_fit/score_samples"] = trained.score_samples(sample)

    directory = Path(tmp_dir) / "model"
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    text_file = Path(tmp_dir) / "texts.txt"
    text_file.write_text("\n".join(sample) + "\n", encoding="utf-8")
    csv_file = Path(tmp_dir) / "curve.csv"
    code = main(["mlm-curve", "--model", str(directory), "--texts", str(text_file), "--out", str(csv_file),
                 "--mask-rates", "0.25,0.5,0.75", "--score-masks", "2", "--device", "cpu", "--quiet"])
    assert code == 0, code
    rows = list(csv.reader(io.StringIO(csv_file.read_text(encoding="utf-8"))))
    numeric = [i for i, name in enumerate(rows[0]) if name != "text"]
    out["cli/csv"] = np.array([[float(row[i]) for i in numeric] for row in rows[1:]])
    return out


def golden_outputs(tmp_dir):
    return {**estimator_outputs(), **mlm_outputs(tmp_dir)}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        outputs = golden_outputs(tmp)
    GOLDEN.parent.mkdir(exist_ok=True)
    np.savez(GOLDEN, **outputs)
    print(f"wrote {len(outputs)} arrays to {GOLDEN}", file=sys.stderr)
