"""Seconds per epoch of MaskedVAE for each objective and for scoring; CPU, and CUDA when present.

Digits from scikit-learn (1797 x 64, Gaussian likelihood), the default architecture (256, 128),
16 particles. For each device: one epoch of MPT (importance and pseudo-Gibbs conditionals),
ELBO and IWAE training, then ``score_samples`` (the sweep, 10 masks per size) and
``log_marginal_likelihood`` (100 importance samples) on all images. Ratios are against the
ELBO epoch, measured in the same process. With CUDA (float64 on both), the scores of the same
fitted model on CPU and GPU are compared.

    python benchmarks/vae.py [--epochs 2]
    python benchmarks/vae.py --monitoring [--repeats 3]

``--monitoring`` (issue 15): CPU seconds per epoch of a Bernoulli MaskedVAE and of a
MaskedLinearVAE at D=784, N=2000 (digits upsampled to 28 x 28 and binarised), one torch thread,
the minimum of interleaved repeats, with today's defaults (stopping objective on a quarter of
the samples, no LML) against the old configuration run in the same process (the stopping
objective on all the samples, and for MaskedVAE the 100-sample importance-sampled LML every
epoch), with the share of the epoch the stopping pass takes; then the peak resident memory of
three identical default MaskedVAE fits, each in a child process of its own.
"""

import argparse
import copy
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from skmpt import MaskedLinearVAE, MaskedVAE

RUNS = [
    ("elbo", dict(objective="elbo")),
    ("iwae", dict(objective="iwae")),
    ("mpt, importance", dict(objective="mpt")),
    ("mpt, pseudo-Gibbs", dict(objective="mpt", conditional="pseudo_gibbs")),
]


def seconds_per_epoch(X, device, epochs, params):
    # The seconds are the training steps and the stopping rule's pass (no LML monitor).
    vae = MaskedVAE(max_epochs=epochs, device=device, random_state=0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        vae.fit(X)
    return np.median([h["seconds"] for h in vae.history_]), vae


def binary_784(n_samples=2000):
    """Digits upsampled to 28 x 28 (nearest neighbour) and binarised: 784 binary pixels."""
    images = load_digits().data.reshape(-1, 8, 8)
    images = np.concatenate([images] * (n_samples // len(images) + 1))[:n_samples]
    big = np.kron(images, np.ones((4, 4)))[:, 2:30, 2:30]
    return (big > 7).reshape(n_samples, 784).astype(float)


def epoch_cpu_seconds(X, old, estimator=MaskedVAE, epochs=2):
    """CPU seconds per epoch of a default fit, and the share of them the stopping pass took."""
    params = dict(max_epochs=epochs, random_state=0, device="cpu")
    if estimator is MaskedVAE:
        params.update(likelihood="bernoulli", monitor="lml" if old else None)
    model = estimator(**params)
    if old:
        model._monitor_fraction = 1.0  # the old stopping pass: every training sample
    stopping_seconds = []
    stopping_objective = model._stopping_objective

    def timed_stopping(*args):
        start = time.process_time()
        value = stopping_objective(*args)
        stopping_seconds.append(time.process_time() - start)
        return value

    model._stopping_objective = timed_stopping
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X)
    total = time.process_time() - start
    return total / epochs, sum(stopping_seconds) / total


def peak_rss_mib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def monitoring(repeats):
    import subprocess
    import sys

    torch.set_num_threads(1)
    X = binary_784()
    print(f"D=784, N=2000 binary pixels, 1 thread, CPU s/epoch (min of {repeats} interleaved repeats)")
    for estimator in (MaskedVAE, MaskedLinearVAE):
        times = {"old": [], "new": []}
        for _ in range(repeats):  # interleaved
            for name in times:
                times[name].append(epoch_cpu_seconds(X, name == "old", estimator))
        (old, old_share), (new, new_share) = min(times["old"]), min(times["new"])
        what = "LML every epoch, " if estimator is MaskedVAE else ""
        print(f"{estimator.__name__}")
        print(f"  old ({what}stopping pass on all): {old:.2f}   stopping pass {old_share:.1%} of it")
        print(f"  new defaults: {new:.2f}   stopping pass {new_share:.1%} of it   {old / new:.2f}x faster")
    peaks = [float(subprocess.run([sys.executable, __file__, "--peak-child"], capture_output=True, text=True,
                                  check=True).stdout.split()[-1]) for _ in range(3)]
    print("MaskedVAE peak RSS of 3 identical default fits (MiB): " + ", ".join(f"{p:.0f}" for p in peaks))


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv=None):
    parser = argparse.ArgumentParser(description="MaskedVAE speed per objective, CPU and CUDA")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--monitoring", action="store_true", help="default stopping rule against the old monitoring")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peak-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peak_child:
        torch.set_num_threads(1)
        epoch_cpu_seconds(binary_784(), old=False)
        print(peak_rss_mib())
        return
    if args.monitoring:
        monitoring(args.repeats)
        return
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
