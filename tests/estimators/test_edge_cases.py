"""The array estimators at the edges: offsets and scales per dtype, streaming with the defaults,
a model changed with set_params after fit, and errors raised by torch during training."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.decomposition import PCA, FactorAnalysis
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedPPCA
from skmpt.datasets import make_ppca

SOURCES = {
    "pca": (lambda: PCA(2), MaskedPPCA),
    "factor_analysis": (lambda: FactorAnalysis(2, random_state=0), MaskedFactorAnalysis),
    "gaussian_mixture": (lambda: GaussianMixture(2, random_state=0), MaskedGaussianMixture),
}


def _data(offset, scale, n_samples=200, n_features=4):
    rng = np.random.RandomState(0)
    X = rng.randn(n_samples, 2) @ rng.randn(2, n_features) + 0.5 * rng.randn(n_samples, n_features)
    return scale * X + offset


@settings(max_examples=12)
@given(
    source=st.sampled_from(sorted(SOURCES)),
    offset=st.sampled_from([0.0, 1e3, 1e6, 1e8, -1e7]),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_offsets_and_scales_keep_their_precision(source, offset, scale, dtype):
    """from_estimator in either dtype gives scikit-learn's log-likelihood, whatever the offset:
    float32 loses its ~7 digits on the data's spread, not on the offset."""
    # Beyond an offset of 1e9 spreads float64 itself, and scikit-learn with it, loses the data.
    assume(abs(offset) / scale <= 1e9)
    make, cls = SOURCES[source]
    X = _data(offset, scale)
    fitted = make().fit(X)
    converted = cls.from_estimator(fitted, dtype=dtype, device="cpu")
    # measured: at most 2e-5 nats in float32, at any offset; float64 agrees to 1e-7 or better
    tolerance = 1e-3 if dtype == "float32" else 1e-6
    np.testing.assert_allclose(converted.log_marginal_likelihood(X), fitted.score_samples(X), atol=tolerance)
    # The fitted attributes are in the data's units, in float64.
    mean = converted.means_ if source == "gaussian_mixture" else converted.mean_
    assert mean.dtype == np.float64
    np.testing.assert_allclose(mean, fitted.means_ if source == "gaussian_mixture" else fitted.mean_, rtol=1e-6)


@pytest.mark.parametrize("cls", [MaskedPPCA, MaskedFactorAnalysis, MaskedGaussianMixture])
def test_float32_fit_does_not_depend_on_an_offset(cls):
    X = _data(0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        near = cls(2, dtype="float32", max_epochs=5, random_state=0, device="cpu").fit(X)
        far = cls(2, dtype="float32", max_epochs=5, random_state=0, device="cpu").fit(X + 1e6)
    assert abs(near.score(X) - far.score(X + 1e6)) < 1e-3
    np.testing.assert_allclose(far.inverse_transform(far.transform(X[:3] + 1e6)) - 1e6,
                               near.inverse_transform(near.transform(X[:3])), atol=1e-2)


def test_partial_fit_with_the_defaults_converges_as_fit_does():
    """Streaming keeps fit's step-size schedule across calls: with a constant step it ended
    0.2 nats per sample short of the optimum on 20000 x 20; the schedule gets within 0.01."""
    X = make_ppca(3000, 10, 2, random_state=0).data
    optimum = PCA(2).fit(X).score(X)
    chunks = np.array_split(np.random.RandomState(0).permutation(len(X)), 10)
    streaming = MaskedPPCA(2, random_state=0, device="cpu")
    for _ in range(8):
        for chunk in chunks:
            streaming.partial_fit(X[chunk])
    # measured: 0.003 nats per sample (fit: 0.0002); the step size was halved several times
    assert optimum - streaming.log_marginal_likelihood(X).mean() < 0.01
    rates = [record["learning_rate"] for record in streaming.history_]
    assert rates[0] == 0.03 and rates[-1] < 0.03 / 4
    # A learning rate set between calls restarts the schedule from it.
    streaming.set_params(learning_rate=0.001).partial_fit(X[chunks[0]])
    assert streaming.history_[-1]["learning_rate"] == 0.001


def test_partial_fit_warns_about_a_first_chunk_that_cannot_set_the_units():
    X = make_ppca(400, 5, 2, random_state=0).data
    X[:100, 1] = 3.0
    ppca = MaskedPPCA(2, random_state=0, device="cpu")
    with pytest.warns(UserWarning, match=r"first partial_fit chunk \(100 samples\) is constant in feature\(s\) \[1\]"):
        ppca.partial_fit(X[:100])
    with pytest.warns(UserWarning, match="spread is .* times the first chunk's"):
        ppca.partial_fit(1000 * X[100:200])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ppca.partial_fit(X[200:300])


def test_dtype_cannot_change_between_partial_fit_calls():
    X = make_ppca(200, 5, 2, random_state=0).data
    ppca = MaskedPPCA(2, random_state=0, device="cpu").partial_fit(X[:100])
    ppca.set_params(dtype="float32")
    with pytest.raises(ValueError, match="dtype='float32' was set after partial_fit started in float64"):
        ppca.partial_fit(X[100:])


def test_set_params_after_fit_does_not_change_the_fitted_model():
    X = pd.DataFrame(make_ppca(100, 5, 2, random_state=0).data, columns=list("abcde"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ppca = MaskedPPCA(2, max_epochs=3, random_state=0, device="cpu").set_output(transform="pandas").fit(X)
    ppca.set_params(n_components=3)
    Z = ppca.transform(X)
    assert list(Z.columns) == ["maskedppca0", "maskedppca1"] == list(ppca.get_feature_names_out())
    assert ppca.n_components_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "not writable" warning on a pandas view
        assert ppca.inverse_transform(Z).shape == (100, 5)


# Factor analysis from the moments of these rows no longer diverges at this rate: its noise floor holds it.
@pytest.mark.parametrize("estimator", [MaskedPPCA(2), MaskedFactorAnalysis(2, solver="minibatch")], ids=["ppca", "fa"])
def test_divergence_is_the_librarys_error_not_torchs(estimator):
    X = make_ppca(200, 5, 2, random_state=0).data
    with pytest.raises(FloatingPointError, match=r"(?i)(diverged|became).*lower learning_rate \(now 1000.0\)"):
        estimator.set_params(learning_rate=1e3, max_epochs=50, random_state=0, device="cpu").fit(X)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_masks": True}, r"'n_masks' parameter of MaskedPPCA must be an int in the range \[1, inf\); got True"),
        ({"score_masks": 0}, "'score_masks' parameter"),
        ({"score_masks": False}, "'score_masks' parameter"),
    ],
)
def test_booleans_are_not_counts(params, message):
    with pytest.raises(ValueError, match=message):
        MaskedPPCA(**params).fit(np.random.RandomState(0).randn(20, 3))


def test_binary_first_chunks_are_not_warned_about():
    """A pixel that is always 0 in the first chunk is ordinary binary data: no units to set."""
    from skmpt import MaskedLinearVAE

    X = (np.random.RandomState(0).rand(100, 6) > 0.5).astype(float)
    X[:, 0] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        MaskedLinearVAE(1, n_quadrature=6, random_state=0, device="cpu").partial_fit(X[:50]).partial_fit(X[50:])


def test_partial_fit_refuses_another_latent_dimension():
    X = make_ppca(200, 5, 2, random_state=0).data
    ppca = MaskedPPCA(2, random_state=0, device="cpu").partial_fit(X[:100])
    ppca.set_params(n_components=3)
    with pytest.raises(ValueError, match="n_components=3 was set after partial_fit started with 2"):
        ppca.partial_fit(X[100:])


@pytest.mark.parametrize("mib", [float("inf"), float("nan"), 0, -1, True])
def test_working_memory_must_be_positive_and_finite(mib):
    import skmpt

    with pytest.raises(ValueError, match="working_memory must be a positive, finite number"):
        with skmpt.working_memory(mib):
            pass


def test_negative_verbose_is_refused():
    with pytest.raises(ValueError, match="'verbose' parameter of MaskedPPCA must be a non-negative int"):
        MaskedPPCA(verbose=-1).fit(np.random.RandomState(0).randn(20, 3))
