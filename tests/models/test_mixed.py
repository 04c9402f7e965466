"""MixedMixtureModule against brute force: dense Gaussian marginals times categoricals, sums over
the categories, the chain-rule identity and the contract, with and without holes."""

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

from skmpt.models.imputation import gaussian_conditional
from skmpt.models.mixed import MixedMixtureModule
from skmpt.testing import check_masked_model, check_mpt_identity

F64 = dict(dtype=torch.float64)
# Columns: numeric 0 and 3, categorical 1 (values 0, 1, 2) and 2 (values 5, 7.5).
NUMERIC, CATEGORICAL = [0, 3], [1, 2]
VALUES = [torch.tensor([0.0, 1.0, 2.0], **F64), torch.tensor([5.0, 7.5], **F64)]


def _mixture(covariance_type, K=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    weights = torch.softmax(torch.randn(K, generator=g, **F64), 0)
    means = 2 * torch.randn(K, 2, generator=g, **F64)
    A = torch.randn(K, 2, 2, generator=g, **F64)
    full = A @ A.mT + 0.5 * torch.eye(2, **F64)
    given_cov = {"full": full, "tied": full[0], "diag": full.diagonal(dim1=-2, dim2=-1),
                 "spherical": full.diagonal(dim1=-2, dim2=-1).mean(-1)}[covariance_type]
    dense = {"full": full, "tied": full[0].expand(K, 2, 2), "diag": torch.diag_embed(given_cov),
             "spherical": given_cov[:, None, None] * torch.eye(2, **F64)}[covariance_type]
    probabilities = [torch.softmax(torch.randn(K, len(v), generator=g, **F64), -1) for v in VALUES]
    module = MixedMixtureModule(weights, means, given_cov, probabilities, VALUES, NUMERIC, CATEGORICAL,
                                covariance_type)
    return module, (weights, means, dense, probabilities)


def _rows(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    numeric = 2 * torch.randn(n, 2, generator=g, **F64)
    first = VALUES[0][torch.randint(0, 3, (n,), generator=g)]
    second = VALUES[1][torch.randint(0, 2, (n,), generator=g)]
    return torch.stack([numeric[:, 0], first, second, numeric[:, 1]], 1)


def _brute_log_density(x, keep, parameters):
    """``log p(x_keep)`` written out: per component, a dense Gaussian marginal over the kept
    numeric columns times the kept categories' probabilities."""
    weights, means, dense, probabilities = parameters
    keep_n = keep[NUMERIC]
    terms = []
    for k in range(len(weights)):
        term = weights[k].log()
        if keep_n.any():
            term = term + torch.distributions.MultivariateNormal(
                means[k][keep_n], dense[k][keep_n][:, keep_n]).log_prob(x[NUMERIC][keep_n])
        for j, column in enumerate(CATEGORICAL):
            if keep[column]:
                code = int((VALUES[j] == x[column]).nonzero())
                term = term + probabilities[j][k, code].log()
        terms.append(term)
    return torch.logsumexp(torch.stack(terms), 0)


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_log_marginal_and_every_conditional_are_the_brute_force_ones(covariance_type):
    module, parameters = _mixture(covariance_type)
    X = _rows(4)
    for pattern in itertools.product([False, True], repeat=4):
        keep = torch.tensor(pattern)
        observed = keep.expand(4, 4)
        expected = torch.stack([_brute_log_density(x, keep, parameters) for x in X])
        torch.testing.assert_close(module.log_marginal(X, observed=observed), expected, rtol=1e-10, atol=1e-10)
    # p(x_j | x_r) = p(x_j, x_r) / p(x_r) for every mask of one token and every conditioning set.
    for j in range(4):
        for pattern in itertools.product([False, True], repeat=4):
            given_set = torch.tensor(pattern) & (torch.arange(4) != j)
            mask = torch.arange(4) == j
            observed = (given_set | mask).expand(4, 4)
            conditional = module.masked_log_prob(X, mask[None], observed=observed)[:, 0, j]
            expected = torch.stack([_brute_log_density(x, given_set | mask, parameters)
                                    - _brute_log_density(x, given_set, parameters) for x in X])
            torch.testing.assert_close(conditional, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_a_missing_category_is_the_sum_over_its_categories(covariance_type):
    module, _ = _mixture(covariance_type)
    X = _rows(5, seed=1)
    for j, column in enumerate(CATEGORICAL):
        observed = torch.ones(5, 4, dtype=torch.bool)
        observed[:, column] = False
        filled = []
        for value in VALUES[j]:
            Xc = X.clone()
            Xc[:, column] = value
            filled.append(module.log_marginal(Xc))
        torch.testing.assert_close(module.log_marginal(X, observed=observed), torch.logsumexp(torch.stack(filled), 0))
        # and a masked category's conditionals sum to one over its categories
        mask = (torch.arange(4) == column)[None]
        conditionals = []
        for value in VALUES[j]:
            Xc = X.clone()
            Xc[:, column] = value
            conditionals.append(module.masked_log_prob(Xc, mask)[:, 0, column])
        torch.testing.assert_close(torch.logsumexp(torch.stack(conditionals), 0), torch.zeros(5, **F64))


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_the_contract_and_the_chain_rule_identity_hold(covariance_type):
    module, _ = _mixture(covariance_type)
    X = _rows(6, seed=2)
    report = check_masked_model(module, X)
    assert report["identity"] < 1e-10 and report["incomplete rows"] < 1e-10
    identity = check_mpt_identity(module, X, score_method="exhaustive")
    assert identity.max_abs_discrepancy < 1e-10


@given(pattern=st.lists(st.booleans(), min_size=24, max_size=24), seed=st.integers(0, 3))
def test_identity_over_the_observed_entries_for_any_hole_pattern(pattern, seed):
    module, _ = _mixture("full", seed=seed)
    X = _rows(6, seed=seed)
    observed = torch.tensor(pattern).view(6, 4)
    observed[:, 0] |= ~observed.any(1)  # every row observes something
    orderings = torch.stack([torch.randperm(4, generator=torch.Generator().manual_seed(s)) for s in range(3)])
    terms = module.chain_log_prob(X, orderings, observed=observed)
    expected = module.log_marginal(X, observed=observed)
    torch.testing.assert_close(terms.sum(-1), expected.unsqueeze(-1).expand(-1, 3), rtol=1e-10, atol=1e-10)


def test_impute_takes_the_most_probable_category_and_the_conditional_mean():
    module, parameters = _mixture("full")
    module.requires_grad_(False)
    X = _rows(6, seed=3)
    observed = torch.ones(6, 4, dtype=torch.bool)
    observed[:, 1] = False
    observed[:3, 0] = False
    imputed = module.impute(X, observed)
    for i in range(6):
        log_p = []
        for value in VALUES[0]:
            x = X[i].clone()
            x[1] = value
            log_p.append(_brute_log_density(x, observed[i] | (torch.arange(4) == 1), parameters))
        assert imputed[i, 1] == VALUES[0][int(torch.stack(log_p).argmax())]
    assert torch.equal(imputed[observed], X[observed])
    # the numeric mean: sum over the categories' posterior of E[x_0 | x_o, k]
    draws = module.sample_missing(X, observed, 4000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(draws[:, observed], X[observed].expand(4000, -1))
    assert set(draws[:, :, 1].unique().tolist()) <= {0.0, 1.0, 2.0}
    np.testing.assert_allclose(draws[:, :3, 0].mean(0), imputed[:3, 0], atol=0.15)


def test_draws_of_a_category_follow_its_conditional():
    module, parameters = _mixture("diag")
    X = _rows(1, seed=4)
    observed = torch.tensor([[True, False, True, True]])
    draws = module.sample_missing(X, observed, 20000, generator=torch.Generator().manual_seed(1))[:, 0, 1]
    log_p = []
    for value in VALUES[0]:
        x = X[0].clone()
        x[1] = value
        log_p.append(_brute_log_density(x, torch.ones(4, dtype=torch.bool), parameters))
    expected = torch.softmax(torch.stack(log_p), 0)
    frequencies = torch.stack([(draws == v).double().mean() for v in VALUES[0]])
    torch.testing.assert_close(frequencies, expected, atol=0.015, rtol=0)


def test_a_map_of_units_moves_the_categories_with_the_data():
    module, _ = _mixture("full")
    X = _rows(5, seed=5)
    center, scale = torch.tensor([1.0, -2.0, 3.0, 0.5], **F64), torch.tensor(2.5, **F64)
    before = module.log_marginal(X)
    with torch.no_grad():
        module.unstandardize_(center, scale)
    after = module.log_marginal(center + scale * X)
    # the two numeric columns take the Jacobian; the categories' probabilities do not change
    torch.testing.assert_close(after, before - 2 * torch.log(scale))


def test_a_model_with_no_numeric_or_no_categorical_column_works():
    K = 2
    weights = torch.tensor([0.5, 0.5], **F64)
    probabilities = [torch.tensor([[0.9, 0.1], [0.3, 0.7]], **F64)]
    only_categories = MixedMixtureModule(weights, torch.zeros(K, 0, **F64), torch.ones(K, 0, 0, **F64),
                                         probabilities, [torch.tensor([0.0, 1.0], **F64)], [], [0])
    X = torch.tensor([[0.0], [1.0]], **F64)
    torch.testing.assert_close(only_categories.log_marginal(X), torch.tensor([0.6, 0.4], **F64).log())
    only_numbers = MixedMixtureModule(weights, torch.zeros(K, 1, **F64), torch.ones(K, 1, 1, **F64), [], [], [0], [])
    assert check_masked_model(only_numbers, torch.randn(4, 1, **F64))["identity"] < 1e-12


def test_columns_must_be_named_once():
    with pytest.raises(ValueError, match="each column once"):
        MixedMixtureModule(torch.ones(1, **F64), torch.zeros(1, 1, **F64), torch.ones(1, 1, 1, **F64), [],
                           [], [0], [0])


def _with_counts(covariance_type="full"):
    """Numeric 0, a count 1 (Poisson), a binary category 2."""
    g = torch.Generator().manual_seed(7)
    weights = torch.tensor([0.35, 0.65], **F64)
    means = torch.randn(2, 1, generator=g, **F64)
    covariances = torch.tensor([[[0.7]], [[1.3]]], **F64)
    if covariance_type == "diag":
        covariances = covariances[:, :, 0]
    rates = torch.tensor([[1.5], [6.0]], **F64)
    probabilities = [torch.tensor([[0.9, 0.1], [0.2, 0.8]], **F64)]
    module = MixedMixtureModule(weights, means, covariances, probabilities, [torch.tensor([0.0, 1.0], **F64)], [0],
                                [2], covariance_type, count_features=[1], rates=rates)
    X = torch.tensor([[0.3, 2.0, 0.0], [1.0, 7.0, 1.0], [-1.0, 0.0, 1.0], [0.5, 4.0, 0.0]], **F64)
    return module, X, (weights, means, covariances, rates, probabilities)


def test_a_count_column_is_a_poisson_and_drops_out_when_missing():
    from scipy.stats import norm, poisson

    module, X, (weights, means, covariances, rates, probabilities) = _with_counts()
    for pattern in itertools.product([False, True], repeat=3):
        keep = np.array(pattern)
        expected = []
        for x in X.numpy():
            terms = []
            for k in range(2):
                term = weights[k].item()
                if keep[0]:
                    term *= norm(means[k, 0].item(), covariances[k, 0, 0].item() ** 0.5).pdf(x[0])
                if keep[1]:
                    term *= poisson(rates[k, 0].item()).pmf(x[1])
                if keep[2]:
                    term *= probabilities[0][k, int(x[2])].item()
                terms.append(term)
            expected.append(np.log(sum(terms)))
        observed = torch.tensor(pattern).expand(4, 3)
        np.testing.assert_allclose(module.log_marginal(X, observed=observed).detach().numpy(), expected, rtol=1e-10)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_counts_keep_the_contract_and_move_with_the_units(covariance_type):
    module, X, _ = _with_counts(covariance_type)
    assert check_masked_model(module, X)["identity"] < 1e-10
    before = module.log_marginal(X)
    center, scale = torch.tensor([1.0, -2.0, 3.0], **F64), torch.tensor([2.0, 0.5, 4.0], **F64)
    with torch.no_grad():
        module.unstandardize_(center, scale)
    torch.testing.assert_close(module.log_marginal(center + scale * X), before - torch.log(scale[0]))
    observed = torch.tensor([[True, False, True]] * 4)
    draws = module.sample_missing(center + scale * X, observed, 3, generator=torch.Generator().manual_seed(0))
    counts = (draws[..., 1] - center[1]) / scale[1]
    torch.testing.assert_close(counts, counts.round())


def _wide(covariance_type, n=200, seed=11):
    """Four numeric columns (0, 2, 3, 5), a category (1) and a count (4); entries missing at random: many
    patterns of holes among the numbers."""
    g = torch.Generator().manual_seed(seed)
    K, D = 3, 4
    A = torch.randn(K, D, D, generator=g, **F64)
    full = A @ A.mT + 0.5 * torch.eye(D, **F64)
    covariances = {"full": full, "tied": full[0], "diag": full.diagonal(dim1=-2, dim2=-1)}[covariance_type]
    module = MixedMixtureModule(torch.tensor([0.2, 0.3, 0.5], **F64), torch.randn(K, D, generator=g, **F64),
                                covariances, [torch.softmax(torch.randn(K, 3, generator=g, **F64), -1)], [VALUES[0]],
                                [0, 2, 3, 5], [1], covariance_type, count_features=[4],
                                rates=torch.tensor([[1.0], [3.0], [6.0]], **F64))
    X = torch.randn(n, 6, generator=g, **F64)
    X[:, 1] = VALUES[0][torch.randint(0, 3, (n,), generator=g)]
    X[:, 4] = torch.randint(0, 8, (n,), generator=g).to(torch.float64)
    observed = torch.rand(n, 6, generator=g) < 0.6
    return module.requires_grad_(False), X, observed


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag"])
def test_the_conditional_by_pattern_of_holes_is_the_rowwise_one(covariance_type):
    # EM's E-step, impute and draws condition the numbers once per pattern of holes; row by row gives the same.
    module, X, observed = _wide(covariance_type)
    numeric = [0, 2, 3, 5]
    assert len(observed[:, numeric].unique(dim=0)) >= 12
    covariances = module.gaussian.covariances()
    covariances = covariances if covariances.ndim == 3 else torch.diag_embed(covariances)
    expected_mean, expected_cov, log_density = gaussian_conditional(X[:, numeric], observed[:, numeric],
                                                                    module.gaussian.means.unsqueeze(1), covariances)
    mean, cov, log_joint = module.missing_given_observed(X, observed)
    torch.testing.assert_close(mean, expected_mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(cov, expected_cov, rtol=0, atol=1e-12)
    # log pi_k + log p_k(x_o): the numbers' density row by row, the category's and the count's terms
    seen = observed.to(torch.float64)
    discrete = (module._category_token_log_prob(X)[..., 0] * seen[:, [1]]
                + module._count_token_log_prob(X)[..., 0] * seen[:, [4]])
    expected_joint = module.log_weights + log_density.T + discrete
    torch.testing.assert_close(log_joint, expected_joint, rtol=0, atol=1e-12)
    torch.testing.assert_close(module.log_marginal(X, observed=observed), torch.logsumexp(expected_joint, -1),
                               rtol=0, atol=1e-12)
    # a masked number's conditional (MPT's and the score's path): log p(x_j, x_o) - log p(x_o), row by row
    for j in numeric:
        mask = (torch.arange(6) == j) & observed
        given = observed & ~mask
        _, _, given_density = gaussian_conditional(X[:, numeric], given[:, numeric],
                                                   module.gaussian.means.unsqueeze(1), covariances)
        discrete = (module._category_token_log_prob(X)[..., 0] * given[:, [1]]
                    + module._count_token_log_prob(X)[..., 0] * given[:, [4]])
        conditional = module.masked_log_prob(X, mask.unsqueeze(1), observed=observed)[:, 0, j]
        expected = (torch.logsumexp(expected_joint, -1)
                    - torch.logsumexp(module.log_weights + given_density.T + discrete, -1))
        torch.testing.assert_close(conditional[mask[:, j]], expected[mask[:, j]], rtol=0, atol=1e-12)
    resp = torch.softmax(log_joint, -1)
    imputed = module.impute(X, observed)
    torch.testing.assert_close(imputed[:, numeric], torch.where(observed[:, numeric], X[:, numeric],
                                                                torch.einsum("nk,knd->nd", resp, expected_mean)),
                               rtol=0, atol=1e-12)
    # a draw: the component and the noise from the generator, the numbers through each row's Cholesky factor
    draws = module.sample_missing(X, observed, 3, generator=torch.Generator().manual_seed(2))
    generator = torch.Generator().manual_seed(2)
    picks = torch.multinomial(resp, 3, replacement=True, generator=generator).T  # (3, n)
    noise = torch.randn(3, 1, len(X), 4, 1, generator=generator, **F64)
    factor = torch.linalg.cholesky(expected_cov + torch.diag_embed(observed[:, numeric].to(torch.float64)))
    numbers = (expected_mean + (factor @ noise).squeeze(-1))[torch.arange(3)[:, None], picks, torch.arange(len(X))]
    torch.testing.assert_close(draws[..., numeric], torch.where(observed[:, numeric], X[:, numeric], numbers),
                               rtol=0, atol=1e-12)
