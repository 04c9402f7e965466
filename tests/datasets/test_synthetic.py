"""skmpt.datasets.synthetic: data drawn from the models."""


import numpy as np
import pytest

from skmpt import datasets


def test_make_ppca_draws_what_it_says_and_validates_its_parameters():
    from skmpt._validation import InvalidParameterError

    bunch = datasets.make_ppca(300, 4, 2, noise_variance=0.25, random_state=0)
    assert bunch.data.shape == (300, 4) and bunch.latent.shape == (300, 2)
    residual = bunch.data - bunch.latent @ bunch.components - bunch.mean
    assert abs(residual.var() - 0.25) < 0.05
    np.testing.assert_array_equal(datasets.make_ppca(5, 3, 1, random_state=1).data,
                                  datasets.make_ppca(5, 3, 1, random_state=np.random.RandomState(1)).data)
    for bad, name in [({"n_samples": 0}, "n_samples"), ({"noise_variance": 0.0}, "noise_variance"),
                      ({"n_components": 1.5}, "n_components"), ({"random_state": 2**40}, "random_state"),
                      ({"random_state": np.random.default_rng(0)}, "random_state")]:
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of make_ppca"):
            datasets.make_ppca(**bad)
