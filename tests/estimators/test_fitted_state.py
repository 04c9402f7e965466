"""A fitted estimator's numbers come from its fitted state: ``set_params`` after ``fit`` acts at the
next ``fit``, as in scikit-learn, for every parameter of every registered estimator and of the
imputer; and ``fit`` leaves no temporary attribute behind."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedImputer, MaskedLinearVAE, MaskedPPCA
from skmpt.estimators import ESTIMATORS

CONFIGURATIONS = [
    pytest.param(cls, params, id=f"{name}-{i}")
    for name, (cls, configurations) in ESTIMATORS.items()
    for i, params in enumerate(configurations)
]

#: Two valid values of every parameter: set_params takes the first one that differs from the
#: fitted value. A new parameter without an entry fails the test, so none is forgotten.
OTHER_VALUES = {
    "n_components": [2, 1],
    "covariance_type": ["diag", "full"],
    "n_init": [2, 1],
    "categorical_features": [[3], None],
    "categories": [[], "auto"],
    "count_features": [[2], None],
    "algorithm": ["mpt", "em"],
    "init_params": ["random", "kmeans"],
    "warm_start": [True, False],
    "reg_covar": [1e-3, 1e-6],
    "noise_variance_init": [np.full(4, 0.5), None],
    "noise_floor": [0.1, 1e-2],
    "likelihood": ["bernoulli", "gaussian"],
    "binarize": [0.5, 0.0],
    "objective": ["elbo", "mpt"],
    "n_quadrature": [4, "auto"],
    "hidden_layer_sizes": [(3,), (4,)],
    "activation": ["tanh", "relu"],
    "conditional": ["pseudo_gibbs", "importance"],
    "n_particles": [7, 3],
    "n_gibbs": [2, 5],
    "n_lml_samples": [9, 5],
    "mask_rate": [0.5, "uniform"],
    "n_masks": [3, 1],
    "score_masks": [5, 2],
    "score_method": ["sweep", "chain"],
    "solver": ["moments", "auto"],
    "max_epochs": [7, 3],
    "batch_size": [8, "auto"],
    "learning_rate": [0.5, 0.01],
    "tol": [0.5, 1e-3],
    "n_iter_no_change": [2, 10],
    "monitor": ["lml", None],
    "monitor_every": [2, 1],
    "dtype": ["float32", "float64"],
    "device": ["cpu", "auto"],
    "random_state": [1, 0],
    "verbose": [1, 0],
}


def _other(name, value):
    return next(v for v in OTHER_VALUES[name] if not (v is value or (type(v) is type(value) and np.all(v == value))))


def _data():
    rng = np.random.RandomState(0)
    X = rng.randn(12, 4) @ rng.randn(4, 4)
    X_missing = X.copy()
    X_missing[rng.rand(*X.shape) < 0.2] = np.nan
    X_missing[:, 0][np.isnan(X_missing).all(1)] = X[:, 0][np.isnan(X_missing).all(1)]
    return X, X_missing


def _outputs(estimator, X, X_missing):
    """Everything the fitted estimator computes, by method."""
    masks = np.eye(X.shape[1], dtype=bool)
    outputs = {
        "score_samples": estimator.score_samples(X),
        "log_marginal_likelihood": estimator.log_marginal_likelihood(X),
        "conditional_log_prob": estimator.conditional_log_prob(X[:3], masks),
        "transform": estimator.transform(X),
        "inverse_transform": estimator.inverse_transform(np.ones((2, estimator.n_components_))),
        "impute": estimator.impute(X_missing),
        "sample_missing": estimator.sample_missing(X_missing, random_state=0),
        "fixed_rate_bias": estimator.fixed_rate_bias(X[:3], 0.5, score_masks=2),
        "feature_names_out": estimator.get_feature_names_out(),
    }
    if hasattr(estimator, "bic"):
        outputs["bic"] = estimator.bic(X)
    if hasattr(estimator, "sample"):
        outputs["sample"], outputs["sample_labels"] = estimator.sample(3)
    return outputs


@pytest.mark.parametrize("cls, params", CONFIGURATIONS)
def test_set_params_after_fit_changes_no_number_until_the_next_fit(cls, params):
    X, X_missing = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        estimator = cls(**params, random_state=0, device="cpu").fit(X)
        # fit leaves no temporary attribute: only the parameters and fitted attributes (ending in _)
        assert {k for k in vars(estimator) if not k.endswith("_")} == set(estimator.get_params(deep=False))
        before = _outputs(estimator, X, X_missing)
        fitted = estimator.get_params(deep=False)
        missing = set(fitted) - set(OTHER_VALUES)
        assert not missing, f"add the new parameter(s) {missing} to OTHER_VALUES"
        for name, value in fitted.items():
            estimator.set_params(**{name: _other(name, value)})
            after = _outputs(estimator, X, X_missing)
            for method, output in before.items():
                np.testing.assert_array_equal(
                    after[method], output, err_msg=f"set_params({name}=...) changed {method} of a fitted {cls.__name__}"
                )
            estimator.set_params(**{name: value})


def test_linear_vae_likelihood_set_after_fit_acts_at_the_next_fit():
    """The reproducer: fitted with likelihood="gaussian", set to "bernoulli" without refitting."""
    X, _ = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        vae = MaskedLinearVAE(1, likelihood="gaussian", n_quadrature=6, max_epochs=3, random_state=0).fit(X)
        score = vae.score(X)
        assert vae.set_params(likelihood="bernoulli").score(X) == score
        assert vae.params_["likelihood"] == "gaussian" and hasattr(vae, "noise_variance_")
        refitted = vae.fit(X).score(X)
    assert vae.params_["likelihood"] == "bernoulli" and refitted != score


def test_score_options_are_those_of_the_last_fit():
    X, _ = _data()
    ppca = MaskedPPCA(1, score_method="sweep", score_masks=1, max_epochs=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca.fit(X)
        score = ppca.score(X)
        assert ppca.set_params(score_masks=20, random_state=1).score(X) == score
        assert ppca.fit(X).params_["score_masks"] == 20
    assert ppca.score(X) != score


def test_imputer_set_params_after_fit_changes_nothing_until_the_next_fit():
    X, X_missing = _data()
    marked = np.where(np.isnan(X_missing), -1.0, X_missing)
    imputer = MaskedImputer(MaskedPPCA(1, max_epochs=3, random_state=0), missing_values=-1.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        imputer.fit(marked)
    before = imputer.transform(marked), imputer.score(marked)
    for name, other in {"missing_values": np.nan, "sample_posterior": True, "add_indicator": True,
                        "keep_empty_features": True, "random_state": 1, "estimator": MaskedPPCA(2)}.items():
        value = imputer.get_params(deep=False)[name]
        imputer.set_params(**{name: other})
        np.testing.assert_array_equal(imputer.transform(marked), before[0], err_msg=name)
        assert imputer.score(marked) == before[1], name
        imputer.set_params(**{name: value})
