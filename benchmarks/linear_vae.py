"""Time per epoch and peak memory of MaskedLinearVAE's MPT training against a direct implementation.

Setting of the paper's Fig. 3 (upper row): D=784 binary pixels, N=2000, K=2 on a 32 x 32 grid,
one uniform-size mask per sample, mini-batches of 200. The direct implementation builds the
per-sample table log p(x_d | z_g) of shape (samples, grid, features) for a chunk of samples at
a time (--chunk, default 25: about 160 MB per table) and conditions on it with log-sum-exps;
skmpt's uses matrix products against (features, grid) tables and never builds it. Both train
the same module from the same start on the same batches and masks; the epoch times are
measured in this process, the peak resident memory of each in a child process of its own.
Data: random binary pixels with the density of Fashion-MNIST (the timing does not depend on
the values).

    python benchmarks/linear_vae.py [--n-samples 2000] [--chunk 25]
"""

import argparse
import resource
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from skmpt.masks import uniform_size_masks
from skmpt.models import LinearVAEModule
from skmpt.objectives import mpt_objective


def direct_mpt_objective(module, X, masks, chunk):
    """The straightforward way: a (samples, grid, features) table of log p(x_d | z_g) per chunk."""
    a = module._activations()  # (G, D)
    out = []
    for start in range(0, len(X), chunk):
        x, m = X[start : start + chunk], masks[start : start + chunk, 0]
        table = x.unsqueeze(1) * a - F.softplus(a)  # (n, G, D)
        observed = (table * (~m).unsqueeze(1)).sum(-1) + module.log_weights  # (n, G)
        log_post = torch.log_softmax(observed, -1)
        predictive = torch.logsumexp(log_post.unsqueeze(-1) + table, dim=1)  # (n, D)
        sums = (predictive * m).sum(-1)
        out.append(sums * X.shape[1] / m.sum(-1))
    return torch.cat(out)


def peak_resident_kib():
    """Peak resident memory of this process in KiB.

    Linux's VmHWM belongs to the address space, which exec replaces, so it is this program's
    own; ru_maxrss (the fallback) survives exec and may include the parent's pages at fork.
    """
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def setup(n_samples, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = (torch.rand(n_samples, 784, generator=g) < 0.35).double()
    module = LinearVAEModule(0.1 * torch.randn(2, 784, generator=g, dtype=torch.float64),
                             torch.zeros(784, dtype=torch.float64), 32)
    masks = uniform_size_masks((n_samples, 1), 784, random_state=seed)
    return X, module, masks


def epoch(objective, X, module, masks, batch_size=200):
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01)
    start = time.perf_counter()
    for i in range(0, len(X), batch_size):
        optimizer.zero_grad()
        loss = -objective(module, X[i : i + batch_size], masks[i : i + batch_size]).mean()
        loss.backward()
        optimizer.step()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description="MaskedLinearVAE training speed and memory against a direct version")
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=25, help="samples per (samples, grid, features) table")
    parser.add_argument("--only", choices=["skmpt", "direct"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    objectives = {"skmpt": mpt_objective, "direct": lambda m, x, k: direct_mpt_objective(m, x, k, args.chunk)}

    if args.only:  # child process: one epoch, then report the peak resident memory
        X, module, masks = setup(args.n_samples)
        epoch(objectives[args.only], X, module, masks)
        print(peak_resident_kib())
        return

    X, module, masks = setup(args.n_samples)
    with torch.no_grad():
        a = objectives["skmpt"](module, X[:200], masks[:200])
        b = objectives["direct"](module, X[:200], masks[:200])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float64; N={args.n_samples}, D=784, "
          f"K=2, 32 x 32 grid; max |difference| of the objectives {float((a - b).abs().max()):.2e}")
    times = {}
    for name, objective in objectives.items():
        X, module, masks = setup(args.n_samples)
        times[name] = min(epoch(objective, X, module, masks) for _ in range(2))
    peaks = {}
    for name in objectives:
        command = [sys.executable, __file__, "--only", name, "--n-samples", str(args.n_samples)]
        command += ["--chunk", str(args.chunk)]
        peaks[name] = int(subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()[-1]) / 1024
    print(f"{'':<8} {'s/epoch':>9} {'peak MiB':>9}")
    for name in objectives:
        print(f"{name:<8} {times[name]:>9.2f} {peaks[name]:>9.0f}")
    print(f"skmpt is {times['direct'] / times['skmpt']:.1f}x faster and uses "
          f"{peaks['direct'] / peaks['skmpt']:.1f}x less peak memory (process peak, torch included)")


if __name__ == "__main__":
    main()
