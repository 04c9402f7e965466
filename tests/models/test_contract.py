"""The masked-model contract: every registered model keeps it, and broken ones are caught."""

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from skmpt.testing import MODELS
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedLinearVAE, MaskedPPCA, MaskedVAE, objectives
from skmpt.datasets import make_ppca
from skmpt.models import MaskedModel, PPCAModule
from skmpt.testing import check_masked_model


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_keeps_the_contract(name):
    model, X = MODELS[name]()
    report = check_masked_model(model, X)
    fast_paths = ("masked_log_prob_sum", "weighted_log_prob_sum", "chain_log_prob")
    for key in ("masked_log_prob output", "batch independence", *fast_paths, "call shapes"):
        assert report[key] <= 1e-9
    if model.stochastic:
        assert report["identity"].startswith("skipped")
    else:
        with torch.no_grad():
            assert report["identity"] <= 1e-9 * float(model.log_marginal(X).abs().max())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_objectives_score_every_model_reproducibly_and_sample_by_sample(name):
    model, X = MODELS[name]()
    with torch.no_grad():
        for method in ("sweep", "chain"):
            score = objectives.cumulative_score(model, X, score_method=method, score_masks=2, random_state=0)
            assert score.shape == (len(X),) and score.dtype == X.dtype
            again = objectives.cumulative_score(model, X, score_method=method, score_masks=2, random_state=0)
            assert torch.equal(score, again)
            subset = objectives.cumulative_score(model, X[3:], score_method=method, score_masks=2, random_state=0)
            np.testing.assert_allclose(subset.numpy(), score[3:].numpy(), rtol=1e-12)


# ---------------------------------------------------------------------------- broken models
class DiagonalNoisePPCA(PPCAModule):
    """Factor analysis sketched by subclassing PPCA: per-feature noise ``psi``.

    Its reference conditionals (dense Gaussian conditioning), per-mask sums and LML are right,
    but it inherits PPCA's ``weighted_log_prob_sum`` (one quadratic form for all masks) and
    rank-one ``chain_log_prob``, both of which assume one noise variance.
    """

    def __init__(self, components, mean, noise):
        super().__init__(components, mean, noise.mean())
        self.register_buffer("noise", noise)

    def covariance(self):
        W = self.components.T
        return W @ W.T + torch.diag(self.noise)

    def masked_log_prob(self, X, masks):
        S, n = self.covariance(), X.shape[0]
        masks = masks if masks.ndim == 3 else masks.expand(n, -1, -1)
        out = X.new_zeros(masks.shape)
        for i in range(n):
            for p in range(masks.shape[1]):
                m, r = masks[i, p], ~masks[i, p]
                gain = torch.linalg.solve(S[r][:, r], S[r][:, m])
                mean = self.mean[m] + (X[i, r] - self.mean[r]) @ gain
                variance = S[m][:, m].diagonal() - (S[r][:, m] * gain).sum(0)
                out[i, p, m] = torch.distributions.Normal(mean, variance.sqrt()).log_prob(X[i, m])
        return out

    masked_log_prob_sum = MaskedModel.masked_log_prob_sum

    def log_marginal(self, X):
        return torch.distributions.MultivariateNormal(self.mean, self.covariance()).log_prob(X)


def _diagonal_noise_ppca():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(2, 5, generator=g, dtype=torch.float64)
    noise = torch.tensor([0.1, 0.5, 1.0, 2.0, 0.3], dtype=torch.float64)
    model = DiagonalNoisePPCA(W, torch.zeros(5, dtype=torch.float64), noise).requires_grad_(False)
    return model, torch.randn(4, 5, generator=g, dtype=torch.float64)


def test_inherited_isotropic_fast_paths_are_caught():
    model, X = _diagonal_noise_ppca()
    with pytest.raises(AssertionError, match=r"DiagonalNoisePPCA .*'weighted_log_prob_sum': max abs difference"):
        check_masked_model(model, X)
    # The cumulative scores through the inherited paths miss log p(x); the reference does not.
    with torch.no_grad():
        exact = model.log_marginal(X)
        for method in ("exhaustive", "chain"):
            wrong = objectives.cumulative_score(model, X, score_method=method, score_masks=1, random_state=0)
            assert float((wrong - exact).abs().max()) > 0.1

    class ChainStillWrong(DiagonalNoisePPCA):
        weighted_log_prob_sum = MaskedModel.weighted_log_prob_sum

    with pytest.raises(AssertionError, match=r"ChainStillWrong .*'chain_log_prob': max abs difference"):
        check_masked_model(ChainStillWrong(model.components, model.mean, model.noise), X)

    class Fixed(ChainStillWrong):
        chain_log_prob = MaskedModel.chain_log_prob

    report = check_masked_model(Fixed(model.components, model.mean, model.noise), X)
    assert report["identity"] < 1e-9 * float(exact.abs().max())
    assert report["weighted_log_prob_sum"] < 1e-9 * float(exact.abs().max()) * len(X)


class OffsetSum(PPCAModule):
    """A per-mask-sum fast path off by a constant."""

    def masked_log_prob_sum(self, X, masks):
        return super().masked_log_prob_sum(X, masks) + 0.1


class BatchCentred(MaskedModel):
    """Independent unit Gaussians centred on the *batch* mean: depends on the other samples."""

    def masked_log_prob(self, X, masks):
        token = torch.distributions.Normal(X.mean(0), 1.0).log_prob(X).unsqueeze(1)
        return torch.where(masks, token, torch.zeros_like(token))


class GlobalNoise(MaskedModel):
    """A stochastic model that ignores its generator and draws from torch's global one."""

    stochastic = True

    def masked_log_prob(self, X, masks, *, generator=None):
        token = torch.distributions.Normal(torch.randn(()), 1.0).log_prob(X).unsqueeze(1).to(X.dtype)
        return torch.where(masks, token, torch.zeros_like(token))


class Leaky(MaskedModel):
    """Non-zero values at observed positions."""

    def masked_log_prob(self, X, masks):
        return torch.distributions.Normal(0.0, 1.0).log_prob(X).unsqueeze(1).expand(-1, masks.shape[-2], -1)


class Single(MaskedModel):
    """Returns float32 for float64 input."""

    def masked_log_prob(self, X, masks):
        token = torch.distributions.Normal(0.0, 1.0).log_prob(X).unsqueeze(1).float()
        return torch.where(masks, token, torch.zeros_like(token))


class Overconfident(MaskedModel):
    """Conditionals of standard normal tokens with half the variance: not those of log_marginal."""

    def masked_log_prob(self, X, masks):
        token = torch.distributions.Normal(0.0, 0.5**0.5).log_prob(X).unsqueeze(1)
        return torch.where(masks, token, torch.zeros_like(token))

    def log_marginal(self, X):
        return torch.distributions.Normal(0.0, 1.0).log_prob(X).sum(-1)


def _gaussian(model):
    return model, torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def _offset_sum():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(2, 3, generator=g, dtype=torch.float64)
    return _gaussian(OffsetSum(W, torch.zeros(3, dtype=torch.float64), 0.5))


@pytest.mark.parametrize(
    "build, message",
    [
        (_offset_sum, r"OffsetSum .*'masked_log_prob_sum': max abs difference 0\.1 "),
        (lambda: _gaussian(BatchCentred()), r"'batch independence': max abs difference"),
        (lambda: _gaussian(GlobalNoise()), r"'randomness': .*global generator"),
        (lambda: _gaussian(Leaky()), r"'zero at observed positions': max abs value"),
        (lambda: _gaussian(Single()), r"'masked_log_prob output': returned torch.float32"),
        (lambda: _gaussian(Overconfident()), r"'identity': max abs difference"),
    ],
)
def test_broken_models_fail_with_the_property_named(build, message):
    model, X = build()
    with pytest.raises(AssertionError, match=message):
        check_masked_model(model, X)


def test_check_rejects_what_is_not_a_model():
    with pytest.raises(TypeError, match="masked_log_prob"):
        check_masked_model(*_gaussian(object()))
    with pytest.raises(ValueError, match="two samples"):
        check_masked_model(BatchCentred(), torch.zeros(1, 3, dtype=torch.float64))


def test_the_base_class_needs_the_reference():
    class Nothing(MaskedModel):
        pass

    with pytest.raises(TypeError, match="masked_log_prob"):
        Nothing()


# ---------------------------------------------------------------------------- estimators
def _fitted(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X)


def _scores(estimator, X):
    masks = np.eye(X.shape[1], dtype=bool)
    return [estimator.score_samples(X), estimator.mpt_curve(X)[1], estimator.log_marginal_likelihood(X),
            estimator.conditional_log_prob(X, masks), estimator.transform(X)]


def test_scoring_a_vae_from_threads_gives_the_numbers_of_scoring_alone():
    X = make_ppca(60, 5, 2, random_state=0).data
    vae = _fitted(MaskedVAE(hidden_layer_sizes=(8,), max_epochs=2, score_masks=3, n_lml_samples=20,
                            random_state=0), X)
    alone = _scores(vae, X[:20])
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: _scores(vae, X[:20]), range(8)))
    for result in results:
        for got, expected in zip(result, alone, strict=True):
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "estimator",
    [
        MaskedPPCA(n_components=1, max_epochs=2, score_masks=2, random_state=0),
        MaskedLinearVAE(n_components=1, likelihood="gaussian", n_quadrature=5, max_epochs=2, random_state=0),
        MaskedVAE(n_components=1, hidden_layer_sizes=(4,), max_epochs=2, score_masks=2, n_lml_samples=5,
                  random_state=0),
    ],
    ids=type,
)
def test_scoring_never_changes_the_estimator(estimator):
    X = make_ppca(40, 4, 1, random_state=0).data
    _fitted(estimator, X)
    assert check_masked_model(estimator, X[:5])["batch independence"] <= 1e-9
    before = {key: value for key, value in vars(estimator).items() if key != "module_"}
    state = {key: value.clone() for key, value in estimator.module_.state_dict().items()}
    module_vars = dict(vars(estimator.module_))
    _scores(estimator, X[:5])
    assert vars(estimator).keys() == before.keys() | {"module_"}
    assert dict(vars(estimator.module_)).keys() == module_vars.keys()
    for key, value in estimator.module_.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_the_bring_your_own_model_page_runs():
    import doctest
    from pathlib import Path

    page = Path(__file__).parents[2] / "docs" / "user_guide" / "own_model.rst"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10 and result.failed == 0


# ---------------------------------------------------------------------------- the declared contract
class DuckGaussians(torch.nn.Module):
    """A user's model that is not a MaskedModel: independent Gaussians, with no generator= or
    observed= anywhere, an encoder that returns the prior and a likelihood that ignores z (so the
    ELBO and the IWAE bound are log p(x) exactly)."""

    def __init__(self, n_features):
        super().__init__()
        self.mean = torch.nn.Parameter(torch.linspace(-1.0, 1.0, n_features, dtype=torch.float64))
        self.log_std = torch.nn.Parameter(torch.linspace(-0.5, 0.5, n_features, dtype=torch.float64))

    def _token(self, X):
        return torch.distributions.Normal(self.mean, self.log_std.exp()).log_prob(X)

    def masked_log_prob(self, X, masks):
        token = self._token(X).unsqueeze(1)
        return torch.where(masks, token, torch.zeros_like(token))

    def log_marginal(self, X):
        return self._token(X).sum(-1)

    def encode(self, X):
        return X.new_zeros(X.shape[0], 1), X.new_zeros(X.shape[0], 1)

    def log_likelihood(self, X, Z):
        return self.log_marginal(X).reshape(X.shape[0], *([1] * (Z.ndim - 2)))


def _duck():
    g = torch.Generator().manual_seed(0)
    return DuckGaussians(4), torch.randn(5, 4, generator=g, dtype=torch.float64)


def test_a_duck_typed_model_is_wrapped_once_and_scored_through_every_objective(monkeypatch):
    from skmpt.masks import uniform_size_masks
    from skmpt.models import MaskedModelAdapter, as_masked_model, provides

    model, X = _duck()
    wrapped = as_masked_model(model)
    assert isinstance(wrapped, MaskedModel) and wrapped.model is model and as_masked_model(wrapped) is wrapped
    assert [provides(wrapped, name) for name in ("log_marginal", "encode", "posterior", "chain_log_prob")] == [
        True, True, False, False]
    # The same model as a MaskedModel subclass, sharing the parameters: the reference of every number.
    subclass = type("SubclassGaussians", (MaskedModel,), {
        name: vars(DuckGaussians)[name] for name in ("_token", "masked_log_prob", "log_marginal", "encode",
                                                     "log_likelihood")})()
    subclass.mean, subclass.log_std = model.mean, model.log_std
    built = []
    original = MaskedModelAdapter.__init__
    monkeypatch.setattr(MaskedModelAdapter, "__init__", lambda self, m: built.append(m) or original(self, m))
    masks = uniform_size_masks((len(X), 3), 4, random_state=0)
    seeded = {"generator": torch.Generator().manual_seed(0)}
    calls = {
        **{f"cumulative_score/{method}": lambda m, method=method: objectives.cumulative_score(
            m, X, score_method=method, score_masks=2, random_state=0) for method in objectives.SCORE_METHODS},
        "mpt_curve": lambda m: objectives.mpt_curve(m, X, score_method="sweep", score_masks=2, random_state=0),
        "score_at_size": lambda m: objectives.score_at_size(m, X, 2),
        "fixed_rate_bias": lambda m: objectives.fixed_rate_bias(m, X, 0.5),
        "masked_log_prob_sum": lambda m: objectives.masked_log_prob_sum(m, X, masks),
        **{name: lambda m, f=f, name=name: f(m, X, masks) if name == "mpt" else f(m, X, **seeded)
           for name, f in objectives.OBJECTIVES.items()},
    }
    exact = model.log_marginal(X).detach()
    with torch.no_grad():
        for name, call in calls.items():
            built.clear()
            value = call(model)
            assert len(built) == 1, name  # one adapter per call, made where the model enters
            seeded["generator"].manual_seed(0)
            np.testing.assert_array_equal(value.numpy(), call(subclass).numpy(), err_msg=name)
            seeded["generator"].manual_seed(0)
            if name in ("cumulative_score/exhaustive", "cumulative_score/chain", "lml", "elbo", "iwae"):
                np.testing.assert_allclose(value.numpy(), exact.numpy(), rtol=1e-12, err_msg=name)
    assert check_masked_model(model, X)["identity"] < 1e-12


class NoKeywords(MaskedModel):
    """A subclass whose methods take neither generator= nor observed=."""

    def masked_log_prob(self, X, masks):
        token = torch.distributions.Normal(0.0, 1.0).log_prob(X).unsqueeze(1)
        return torch.where(masks, token, torch.zeros_like(token))

    def log_marginal(self, X):
        return torch.distributions.Normal(0.0, 1.0).log_prob(X).sum(-1)


@pytest.mark.parametrize("make", [NoKeywords, lambda: __import__("skmpt").models.as_masked_model(DuckGaussians(3))],
                         ids=["subclass", "duck-typed"])
def test_a_model_without_generator_or_observed_parameters_accepts_both(make):
    import inspect

    model = make()
    X = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    masks = torch.tensor([[True, False, True], [False, True, False]])
    for name in ("masked_log_prob", "log_marginal"):
        parameters = inspect.signature(getattr(model, name)).parameters
        assert {"generator", "observed"} <= parameters.keys() and parameters["observed"].kind.name == "KEYWORD_ONLY"
    plain = model.masked_log_prob(X, masks)
    same = model.masked_log_prob(X, masks, generator=torch.Generator().manual_seed(1), observed=None)
    assert torch.equal(plain, same)
    assert torch.equal(model.log_marginal(X, generator=None, observed=None), model.log_marginal(X))
    assert not model.handles_missing
    observed = torch.ones(4, 3, dtype=torch.bool)
    owner = "NoKeywords" if isinstance(model, NoKeywords) else "DuckGaussians"
    for call in (lambda: model.masked_log_prob(X, masks, observed=observed),
                 lambda: objectives.cumulative_score(model, X, score_method="exhaustive",
                                                     observed=~torch.eye(4, 3).bool())):
        with pytest.raises(NotImplementedError, match=rf"{owner}\.masked_log_prob takes no observed="):
            call()
    report = check_masked_model(model, X)
    assert report["incomplete rows"].startswith("skipped: handles_missing is False")


def test_the_declared_defaults():
    from skmpt.models import CONTRACT_KEYWORDS, provides
    from skmpt.testing import TabularJoint

    class Minimal(MaskedModel):
        def masked_log_prob(self, X, masks, *, generator=None, observed=None):
            return torch.zeros(X.shape[0], *masks.shape[-2:], dtype=X.dtype)

    model = Minimal()
    assert (model.stochastic, model.mask_chunk, model.handles_missing, model.shared_mask_chunk(10)) == (
        False, None, True, None)
    X, observed = torch.zeros(2, 3, dtype=torch.float64), torch.ones(2, 3, dtype=torch.bool)
    optional = {
        "log_marginal": lambda: model.log_marginal(X),
        "posterior": lambda: model.posterior(X),
        "decode": lambda: model.decode(X[:, :1]),
        "encode": lambda: model.encode(X),
        "log_likelihood": lambda: model.log_likelihood(X, X[:, :1]),
        "impute": lambda: model.impute(X, observed),
        "sample_missing": lambda: model.sample_missing(X, observed, 2),
        "unstandardize_": lambda: model.unstandardize_(X[0], torch.tensor(1.0)),
    }
    for name, call in optional.items():
        assert not provides(model, name)
        with pytest.raises(NotImplementedError, match=rf"Minimal does not provide {name}, an optional member"):
            call()
    with pytest.raises(NotImplementedError, match="Minimal does not provide log_marginal"):
        objectives.log_marginal(model, X)
    with pytest.raises(ValueError, match="'fill' is not a method of the masked-model contract"):
        provides(model, "fill")
    # Every skmpt model takes every keyword the contract declares, in its own signature.
    import inspect

    for make in (*MODELS.values(), lambda: (TabularJoint.random(2, random_state=0), None)):
        module = make()[0]
        for name, keywords in CONTRACT_KEYWORDS.items():
            if provides(module, name):
                own = inspect.signature(inspect.unwrap(getattr(type(module), name))).parameters
                assert set(keywords) <= own.keys(), (type(module).__name__, name)


def test_the_package_exports_what_users_call_and_the_unused_helpers_warn():
    """skmpt.models exports the contract and the models; 0.1.0's Gaussian helpers warn for 0.2.0."""
    import skmpt.models
    from skmpt.models import contract

    assert sorted(skmpt.models.__all__) == sorted([
        "CONTRACT_KEYWORDS", "FactorAnalysisModule", "GaussianMixtureModule", "LinearGaussianModule",
        "LinearVAEModule", "MaskedModel", "MaskedModelAdapter", "PPCAModule", "VAEModule", "as_masked_model",
        "importance_diagnostics", "provides"])
    from skmpt.models import importance

    for name in ("conditioning_set", "gaussian_log_prob", "has_own_chain", "has_own_weighted_sum",
                 "importance_log_weights", "model_name", "reference_chain_log_prob", "standard_normal",
                 "standard_normal_log_prob", "pareto_k_threshold", "pareto_khat"):
        module = importance if name.startswith("pareto") else contract
        with pytest.warns(FutureWarning, match=rf"skmpt.models.{name} is deprecated since 0.2.0 .*"
                                                rf"\({module.__name__}.{name}\)"):
            assert getattr(skmpt.models, name) is getattr(module, name)
