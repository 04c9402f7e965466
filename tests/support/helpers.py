"""Small helpers shared by the tests."""

import pytest
import torch


def make_ppca_module(components, mean, noise_variance):
    from skmpt.models import PPCAModule

    return PPCAModule(
        torch.as_tensor(components, dtype=torch.float64),
        torch.as_tensor(mean, dtype=torch.float64),
        float(noise_variance),
    )


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
