"""Seconds per epoch of MaskedVAE for each objective and for scoring; CPU, and CUDA when present.

Digits from scikit-learn (1797 x 64, Gaussian likelihood), the default architecture (256, 128),
16 particles. For each device: one epoch of MPT (importance and pseudo-Gibbs conditionals),
ELBO and IWAE training, then ``score_samples`` (the sweep, 10 masks per size) and
``log_marginal_likelihood`` (100 importance samples) on all images. Ratios are against the
ELBO epoch, measured in the same process. With CUDA (float64 on both), the scores of the same
fitted model on CPU and GPU are compared.

    python benchmarks/vae.py [--epochs 2]
"""

import argparse
import copy
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedVAE

RUNS = [
    ("elbo", dict(objective="elbo")),
    ("iwae", dict(objective="iwae")),
    ("mpt, importance", dict(objective="mpt")),
    ("mpt, pseudo-Gibbs", dict(objective="mpt", conditional="pseudo_gibbs")),
]


def seconds_per_epoch(X, device, epochs, params):
    # n_lml_samples=1: the per-epoch LML diagnostic costs next to nothing, so the seconds are
    # the training steps (and, for MPT, the stopping rule's pass over fixed masks).
    vae = MaskedVAE(max_epochs=epochs, device=device, n_lml_samples=1, random_state=0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        vae.fit(X)
    return np.median([h["seconds"] for h in vae.history_]), vae


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv=None):
    parser = argparse.ArgumentParser(description="MaskedVAE speed per objective, CPU and CUDA")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args(argv)
    X = load_digits().data
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; digits {X.shape}, float64")
    fitted = None
    for device in devices:
        print(f"\n{device}: {'run':<20} {'s/epoch':>8} {'vs elbo':>8}")
        base = None
        for name, params in RUNS:
            seconds, vae = seconds_per_epoch(X, device, args.epochs, params)
            base = base or seconds
            print(f"{'':<{len(device) + 2}}{name:<20} {seconds:>8.2f} {seconds / base:>7.1f}x")
            if name == "mpt, importance":
                fitted = fitted or vae
        model = fitted if device == "cpu" else copy.deepcopy(fitted)
        if device != "cpu":
            model.module_.to(device)
            model.device_ = torch.device(device)
        score_seconds, scores = timed(lambda m=model: m.score_samples(X))
        lml_seconds, _ = timed(lambda m=model: m.log_marginal_likelihood(X))
        print(f"{'':<{len(device) + 2}}{'score_samples':<20} {score_seconds:>8.2f} s for {len(X)} images")
        print(f"{'':<{len(device) + 2}}{'log_marginal (100)':<20} {lml_seconds:>8.2f} s for {len(X)} images")
        if device == "cpu":
            cpu_scores = scores
        else:
            print(f"  CPU/GPU scores of the same model: max |difference| {np.abs(scores - cpu_scores).max():.2e} nats")


if __name__ == "__main__":
    main()
