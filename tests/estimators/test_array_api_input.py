"""Torch tensors (and other array-API arrays) as input to MaskedPPCA, MaskedFactorAnalysis and
MaskedGaussianMixture, which keep them under ``array_api_dispatch``, and to the other estimators
(MaskedVAE here), which take them and give NumPy (skmpt/estimators/_base.py and _data.py's plumbing).

A tensor is validated and computed on its device, never through NumPy. Without scikit-learn's
``array_api_dispatch`` the outputs are NumPy arrays, as for any input; with it, the fitted
attributes and the outputs are arrays of the input's namespace on its device, and a method called
with another namespace is refused. Dispatch needs ``SCIPY_ARRAY_API=1`` before scipy is imported:
the tests marked ``dispatch`` run in this process when it is set, and otherwise in a subprocess
that sets it (:func:`test_dispatch_tests_in_a_process_with_scipy_array_api`).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sklearn
import torch
from sklearn.utils.estimator_checks import check_array_api_input, check_array_api_same_namespace

from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedPPCA, MaskedVAE

ESTIMATORS = [MaskedPPCA, MaskedFactorAnalysis]
#: The estimators that train on rows: their fits are short here (the checks compare two fits that
#: must be the same, not good ones).
ROW_ESTIMATORS = {MaskedGaussianMixture: {"max_epochs": 5}, MaskedVAE: {"max_epochs": 3, "hidden_layer_sizes": (8,)}}
ROOT = Path(__file__).resolve().parents[2]
SCIPY_ARRAY_API = os.environ.get("SCIPY_ARRAY_API") == "1"
dispatch = pytest.mark.skipif(not SCIPY_ARRAY_API, reason="run in a subprocess with SCIPY_ARRAY_API=1")


def _data(holes=False):
    rng = np.random.RandomState(0)
    X = rng.randn(200, 2) @ rng.randn(2, 6) + 0.5 * rng.randn(200, 6)
    if holes:
        X[rng.rand(*X.shape) < 0.1] = np.nan
    return X


def _fit(cls, X, **params):
    return cls(2, **{"random_state": 0, "device": "auto", "max_epochs": 30, **params}).fit(X)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("holes", [False, True])
def test_tensor_without_dispatch_gives_numpy_as_an_array_does(cls, holes):
    X = _data(holes)
    tensor = torch.tensor(X)
    from_array, from_tensor = _fit(cls, X, device="cpu"), _fit(cls, tensor)
    assert from_tensor.device_ == tensor.device
    for name in ("components_", "mean_", "offset_"):
        assert isinstance(getattr(from_tensor, name), np.ndarray)
        np.testing.assert_array_equal(getattr(from_tensor, name), getattr(from_array, name))
    for method in ("transform", "score_samples", "impute"):
        out = getattr(from_tensor, method)(tensor)
        assert isinstance(out, np.ndarray), method
        np.testing.assert_array_equal(out, getattr(from_array, method)(X))
    assert torch.isnan(tensor).any() == holes  # the caller's tensor is never written


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("cls", ROW_ESTIMATORS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_row_estimators_fit_a_tensor_as_its_array(cls, dtype):
    # A float32 tensor fitted in float64 keeps its values (no pass through a lower precision), and
    # a float64 tensor fitted in float32 is the float64 array's fit: the tensor is cast as the array is.
    X = _data(holes=True)
    tensor = torch.tensor(X, dtype=torch.float32 if dtype == "float64" else torch.float64)
    reference = X.astype(np.float32) if dtype == "float64" else X
    params = {"random_state": 0, "device": "cpu", "dtype": dtype, **ROW_ESTIMATORS[cls]}
    from_array, from_tensor = cls(2, **params).fit(reference), cls(2, **params).fit(tensor)
    assert isinstance(from_tensor.offset_, np.ndarray)
    # In float32 the data are centred in float64 first, the tensor's mean summed by torch (to the last
    # bit of float64 the NumPy mean), so the fits agree to float32's precision; in float64 bit for bit.
    rtol = 0 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(from_tensor.offset_, from_array.offset_, rtol=1e-15)
    for method in ("transform", "score_samples", "impute"):
        out = getattr(from_tensor, method)(tensor)
        assert isinstance(out, np.ndarray), method
        np.testing.assert_allclose(out, getattr(from_array, method)(reference), rtol=rtol, atol=rtol)


@dispatch
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_dispatch_mixture_keeps_tensors():
    X = _data(holes=True)
    tensor = torch.tensor(X)
    for cls, params in [(MaskedGaussianMixture, ROW_ESTIMATORS[MaskedGaussianMixture])]:
        reference = cls(2, random_state=0, device="cpu", **params).fit(X)
        with sklearn.config_context(array_api_dispatch=True):
            fitted = cls(2, random_state=0, device="cpu", **params).fit(tensor)
            assert isinstance(fitted.offset_, torch.Tensor)
            for method in ("transform", "score_samples", "impute"):
                out = getattr(fitted, method)(tensor)
                assert isinstance(out, torch.Tensor) and out.device == tensor.device, method
                np.testing.assert_allclose(out.numpy(), getattr(reference, method)(X), rtol=1e-12, atol=1e-12)
            for name in ("means_", "weights_", "covariances_"):
                assert isinstance(getattr(fitted, name), torch.Tensor), name
                np.testing.assert_array_equal(getattr(fitted, name).numpy(), getattr(reference, name))
            labels = fitted.predict(tensor)
            assert isinstance(labels, torch.Tensor)
            np.testing.assert_array_equal(labels.numpy(), reference.predict(X))
            samples, labels = fitted.sample(5)
            assert isinstance(samples, torch.Tensor) and isinstance(labels, torch.Tensor)
            np.testing.assert_array_equal(samples.numpy(), reference.sample(5)[0])
        fitted.set_params(warm_start=True).fit(X)  # a warm start from a fit under dispatch
        assert isinstance(fitted.offset_, np.ndarray)  # refitted without dispatch: NumPy again


@dispatch
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_dispatch_attributes_and_outputs_are_tensors(cls):
    X = _data(holes=True)
    tensor = torch.tensor(X)
    reference = _fit(cls, X, device="cpu")
    with sklearn.config_context(array_api_dispatch=True):
        fitted = _fit(cls, tensor)
        for name in ("components_", "mean_", "offset_", "explained_variance_"):
            value = getattr(fitted, name)
            assert isinstance(value, torch.Tensor) and value.device == tensor.device, name
            np.testing.assert_array_equal(value.numpy(), getattr(reference, name))
        Z = fitted.transform(tensor)
        assert isinstance(Z, torch.Tensor)
        np.testing.assert_allclose(Z.numpy(), reference.transform(X), rtol=1e-12)
        assert isinstance(fitted.inverse_transform(Z), torch.Tensor)
        for method in ("get_covariance", "get_precision"):
            value = getattr(fitted, method)()
            assert isinstance(value, torch.Tensor) and value.device == tensor.device, method
            np.testing.assert_allclose(value.numpy(), getattr(reference, method)(), rtol=1e-12)
        imputed = fitted.impute(tensor)
        seen = ~np.isnan(X)
        assert isinstance(imputed, torch.Tensor)
        np.testing.assert_array_equal(imputed.numpy()[seen], X[seen])  # bit for bit
        assert isinstance(fitted.score(tensor), float)
        assert fitted.score(tensor) == pytest.approx(reference.score(X), rel=1e-12)
        with pytest.raises(ValueError, match=rf"{cls.__name__}.transform\(\) must use the same namespace"):
            fitted.transform(X)
    # Refitting without dispatch turns the attributes back into NumPy arrays.
    fitted.fit(X)
    assert isinstance(fitted.components_, np.ndarray) and isinstance(fitted.offset_, np.ndarray)
    assert isinstance(fitted.get_covariance(), np.ndarray) and isinstance(fitted.get_precision(), np.ndarray)


def test_tensor_input_errors_name_the_problem():
    X = torch.tensor(_data())
    X[0, 0] = float("inf")
    with pytest.raises(ValueError, match="infinity"):
        MaskedPPCA(2).fit(X)
    with pytest.raises(ValueError, match="2-D tensor"):
        MaskedPPCA(2).fit(torch.ones(5))
    X = torch.tensor(_data())
    X[:, 3] = float("nan")
    with pytest.raises(ValueError, match=r"Feature\(s\) \[3\]"):
        MaskedPPCA(2).fit(X)


@dispatch
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_dispatch_cuda_tensor_stays_on_its_device(cls):
    X = _data(holes=True)
    tensor = torch.tensor(X, device="cuda")
    with sklearn.config_context(array_api_dispatch=True):
        fitted = _fit(cls, tensor)
        assert fitted.device_.type == "cuda" and fitted.components_.device.type == "cuda"
        assert fitted.transform(tensor).device.type == "cuda"
    np.testing.assert_allclose(fitted.components_.cpu().numpy(), _fit(cls, X, device="cpu").components_,
                               rtol=1e-6, atol=1e-8)


@dispatch
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("cls", [*ESTIMATORS, MaskedGaussianMixture])
@pytest.mark.parametrize(("namespace", "device", "dtype"), [
    ("torch", "cpu", "float64"), ("torch", "cpu", "float32"),
    ("array_api_strict", "CPU_DEVICE", "float64"), ("array_api_strict", "device1", "float32"),
])
def test_dispatch_scikit_learn_array_api_checks(cls, namespace, device, dtype):
    pytest.importorskip(namespace)
    assert cls().__sklearn_tags__().array_api_support
    params = ROW_ESTIMATORS.get(cls, {"max_epochs": 20})  # the fits only need to be the same
    estimator = cls(2, random_state=0, device="cpu", **params)
    check_array_api_input(cls.__name__, estimator, namespace, device_name=device, dtype_name=dtype, check_values=True)
    check_array_api_same_namespace(cls.__name__, estimator, "array_api_strict")


@pytest.mark.skipif(SCIPY_ARRAY_API, reason="the dispatch tests run in this process")
def test_dispatch_tests_in_a_process_with_scipy_array_api():
    pytest.importorskip("array_api_strict")
    environment = {**os.environ, "SCIPY_ARRAY_API": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-k", "dispatch"],
        capture_output=True, text=True, env=environment, timeout=600, cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


@dispatch
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", ["MaskedLinearVAE", "MaskedVAE", "MaskedMixedMixture"])
def test_dispatch_estimators_without_array_api_support_give_numpy(name):
    import skmpt

    tensor = torch.tensor(_data())
    with sklearn.config_context(array_api_dispatch=True):
        fitted = getattr(skmpt, name)(2, random_state=0, device="cpu", max_epochs=3).fit(tensor)
        assert not fitted.__sklearn_tags__().array_api_support
        assert isinstance(fitted.offset_, np.ndarray)
        assert isinstance(fitted.score_samples(tensor), np.ndarray)
