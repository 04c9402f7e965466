"""Speed of the factor-analysis and Gaussian-mixture masked conditionals against dense conditioning.

Prints CPU seconds per mask (one thread, float64, the minimum over interleaved repeats) of

- ``dense``: per mask, condition the model covariance densely (the paper's method, errata
  corrected: invert ``S_rr``, then ``S_mm - S_mr S_rr^{-1} S_rm`` and the conditional mean);
  for a mixture, per mask and component, then the responsibilities of the observed tokens;
- ``skmpt``: :meth:`FactorAnalysisModule.masked_log_prob_sum` (``K x K`` posterior of ``z``,
  per-mask statistics) and :meth:`GaussianMixtureModule.masked_log_prob` (one batched
  Cholesky factor per mask and component);

on the same masks (uniform sizes, shared by the samples), their ratio, and the largest
difference of their outputs. Then the chain estimator (exact ``log p(x)`` from one ordering)
through each model's ``chain_log_prob`` fast path against the generic path (``D`` nested masks
through the reference per-token conditionals). First, a table of the identity's discrepancies
over random models: the exact LML against scikit-learn's ``score_samples`` for the same
parameters, and the exhaustive and chain cumulative scores against the exact LML.

    python benchmarks/gaussian_conditionals.py [--n-samples 100] [--masks 32] [--repeats 3]
"""

import argparse
import math
from functools import partial

import numpy as np
import torch

from _common import dense_masked_log_prob_sum, interleaved_minimum
from skmpt.masks import nested_masks, random_orderings, uniform_size_masks
from skmpt.models import FactorAnalysisModule, GaussianMixtureModule
from skmpt.objectives import cumulative_score


def factor_analysis(n_features, n_components, n_samples, rng):
    module = FactorAnalysisModule(
        torch.as_tensor(rng.randn(n_components, n_features)),
        torch.as_tensor(rng.randn(n_features)),
        torch.as_tensor(rng.uniform(0.1, 2.0, n_features)),
    ).requires_grad_(False)
    X = module.mean + torch.as_tensor(rng.randn(n_samples, n_components)) @ module.components
    return module, X + module.noise_variance.sqrt() * torch.as_tensor(rng.randn(n_samples, n_features))


def mixture(n_features, n_components, n_samples, rng):
    factors = rng.randn(n_components, n_features, n_features) / np.sqrt(n_features)
    covariances = factors @ factors.transpose(0, 2, 1) + 0.5 * np.eye(n_features)
    weights = rng.dirichlet(np.ones(n_components))
    module = GaussianMixtureModule(
        torch.as_tensor(weights), torch.as_tensor(3 * rng.randn(n_components, n_features)), torch.as_tensor(covariances)
    ).requires_grad_(False)
    return module, module.sample(n_samples, generator=torch.Generator().manual_seed(0))[0]


def dense_mixture_log_prob(module, X, masks):
    """Per mask and component, dense conditioning of the covariance; then the mixture's per-token values."""
    covariances, means, log_weights = module.covariances(), module.means, module.log_weights
    out = X.new_zeros(X.shape[0], len(masks), X.shape[1])
    for p, mask in enumerate(masks):
        rest = ~mask
        joint, tokens = [], []
        for k in range(len(means)):
            S, mu = covariances[k], means[k]
            S_rr_inv = torch.inverse(S[rest][:, rest])
            gain = S[mask][:, rest] @ S_rr_inv
            residual = X[:, rest] - mu[rest]
            cond_mean = mu[mask] + residual @ gain.T
            var = S[mask][:, mask].diagonal() - (gain * S[mask][:, rest]).sum(-1)
            tokens.append(-0.5 * (math.log(2 * math.pi) + var.log() + (X[:, mask] - cond_mean) ** 2 / var))
            quad = ((residual @ S_rr_inv) * residual).sum(-1)
            log_det = torch.logdet(S[rest][:, rest])
            joint.append(log_weights[k] - 0.5 * (int(rest.sum()) * math.log(2 * math.pi) + log_det + quad))
        joint, tokens = torch.stack(joint, -1), torch.stack(tokens, -1)
        out[:, p, mask] = torch.logsumexp(joint.unsqueeze(1) + tokens, -1) - torch.logsumexp(joint, -1, keepdim=True)
    return out


def generic_chain(module, X, orderings):
    per_token = module.masked_log_prob(X, nested_masks(orderings).reshape(-1, X.shape[1]))
    index = orderings.view(1, len(orderings), -1, 1).expand(X.shape[0], -1, -1, 1)
    return per_token.reshape(X.shape[0], len(orderings), X.shape[1], X.shape[1]).gather(-1, index).squeeze(-1)


def identity_discrepancies(n_models, rng):
    """Largest relative discrepancies, over random models with D <= 8, of the exact LML against
    scikit-learn's ``score_samples`` and of the exhaustive and chain cumulative scores against it."""
    from sklearn.decomposition import FactorAnalysis
    from sklearn.mixture import GaussianMixture
    from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky

    worst = {}
    for trial in range(n_models):
        n_features = rng.randint(1, 9)
        n_components = rng.randint(1, min(3, n_features) + 1)
        components, mean = 3 * rng.randn(n_components, n_features), rng.randn(n_features)
        noise = np.exp(rng.uniform(np.log(0.05), np.log(5), n_features))
        fa = FactorAnalysis(n_components)
        fa.components_, fa.mean_, fa.noise_variance_, fa.n_features_in_ = components, mean, noise, n_features
        models = [("factor analysis", FactorAnalysisModule(*map(torch.as_tensor, (components, mean, noise))), fa)]
        for covariance_type in ("full", "diag"):
            n_components = rng.randint(1, 4)
            if covariance_type == "full":
                factors = rng.randn(n_components, n_features, n_features)
                covariances = factors @ factors.transpose(0, 2, 1) + 0.1 * np.eye(n_features)
            else:
                covariances = np.exp(rng.uniform(-2, 1, (n_components, n_features)))
            gmm = GaussianMixture(n_components, covariance_type=covariance_type)
            gmm.weights_, gmm.means_ = rng.dirichlet(np.ones(n_components)), 3 * rng.randn(n_components, n_features)
            gmm.covariances_, gmm.n_features_in_ = covariances, n_features
            gmm.precisions_cholesky_ = _compute_precision_cholesky(covariances, covariance_type)
            module = GaussianMixtureModule(*map(torch.as_tensor, (gmm.weights_, gmm.means_, covariances)),
                                           covariance_type)
            models.append((f"mixture, {covariance_type} cov.", module, gmm))
        X = 2 * rng.randn(8, n_features)
        X_t = torch.as_tensor(X)
        for name, module, reference in models:
            with torch.no_grad():
                lml = module.log_marginal(X_t).numpy()
                scores = {
                    "exhaustive": cumulative_score(module, X_t, score_method="exhaustive").numpy(),
                    "chain": cumulative_score(module, X_t, score_method="chain", score_masks=5,
                                              random_state=trial).numpy(),
                    "sklearn": reference.score_samples(X),
                }
            for what, score in scores.items():
                worst[name, what] = max(worst.get((name, what), 0.0), float(np.max(np.abs(score - lml) / np.abs(lml))))
    return worst


def main(argv=None):
    parser = argparse.ArgumentParser(description="FA and GMM masked conditionals against dense conditioning")
    parser.add_argument("--n-samples", type=int, default=100)
    parser.add_argument("--masks", type=int, default=32, help="masks per timing (shared by the samples)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats; the minimum is kept")
    parser.add_argument("--identity-models", type=int, default=100, help="random models for the identity table")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.RandomState(0)
    worst = identity_discrepancies(args.identity_models, rng)
    print(f"largest |x - LML| / |LML| over {args.identity_models} random models of each kind (D <= 8, 8 samples), "
          f"x = sklearn's score_samples, the exhaustive and the chain (5 orderings) cumulative scores")
    print(f"{'model':<22}{'sklearn':>12}{'exhaustive':>12}{'chain':>12}")
    for name in dict.fromkeys(name for name, _ in worst):
        print(f"{name:<22}" + "".join(f"{worst[name, what]:>12.2e}" for what in ("sklearn", "exhaustive", "chain")))
    print()
    print(f"torch {torch.__version__}, 1 thread, float64, {args.n_samples} samples, {args.masks} masks, "
          f"CPU seconds per mask (min of {args.repeats} interleaved repeats)")
    print(f"{'model':<22}{'D':>5}{'K':>4}{'dense':>12}{'skmpt':>12}{'speed-up':>10}{'max |diff|':>12}")
    cases = [(factor_analysis, "factor analysis", d, k) for d, k in [(64, 2), (256, 2), (256, 16)]]
    cases += [(mixture, "mixture, full cov.", d, k) for d, k in [(8, 3), (32, 3), (64, 5)]]
    for build, name, n_features, n_components in cases:
        module, X = build(n_features, n_components, args.n_samples, rng)
        masks = uniform_size_masks(args.masks, n_features, random_state=0)
        if build is factor_analysis:
            dense = partial(dense_masked_log_prob_sum, module, X, masks)
            fast = partial(module.masked_log_prob_sum, X, masks)
        else:
            dense = partial(dense_mixture_log_prob, module, X, masks)
            fast = partial(module.masked_log_prob, X, masks)
        with torch.no_grad():
            diff = float((dense() - fast()).abs().max())
            dense_time, fast_time = interleaved_minimum([dense, fast], args.repeats)
        print(f"{name:<22}{n_features:>5}{n_components:>4}{dense_time / len(masks):>12.3e}"
              f"{fast_time / len(masks):>12.3e}{dense_time / fast_time:>9.1f}x{diff:>12.2e}")

    print("\nchain estimator, 4 orderings: CPU seconds of the generic path (D nested masks) and of chain_log_prob")
    print(f"{'model':<22}{'D':>5}{'K':>4}{'generic':>12}{'fast':>12}{'speed-up':>10}{'|sum - LML|':>12}")
    for build, name, n_features, n_components in [(factor_analysis, "factor analysis", 256, 8),
                                                  (mixture, "mixture, full cov.", 32, 3)]:
        module, X = build(n_features, n_components, args.n_samples, rng)
        orderings = random_orderings(4, n_features, random_state=0)
        with torch.no_grad():
            error = float((module.chain_log_prob(X, orderings).sum(-1) - module.log_marginal(X)[:, None]).abs().max())
            generic_time, fast_time = interleaved_minimum(
                [partial(generic_chain, module, X, orderings), partial(module.chain_log_prob, X, orderings)],
                args.repeats,
            )
        print(f"{name:<22}{n_features:>5}{n_components:>4}{generic_time:>12.3e}{fast_time:>12.3e}"
              f"{generic_time / fast_time:>9.1f}x{error:>12.2e}")


if __name__ == "__main__":
    main()
