"""How the cost of each estimator grows with D, K, n and the number of masks, from one command.

For each estimator a base configuration is timed while one factor at a time takes three
values; the exponent ``b`` of ``time ~ factor**b`` is the least-squares slope of log time
against log factor. Times are CPU seconds (``time.process_time``, one torch thread, the
minimum of ``--repeats`` calls): ``score`` is ``score_samples`` of a fitted estimator with its
default scoring method, ``epoch`` one training epoch (``fit`` with ``max_epochs=1``, so it
includes the estimator's per-epoch bookkeeping). For MaskedPPCA the cumulative score (the
sweep, ``P = score_masks * D`` shared masks) is also given as a fraction of the rate of a
float64 matmul of the baseline's multiply-add count ``n P D K``.

MLMCurveScorer (a BERT built from a configuration: 2 layers, a 1000-piece WordPiece
vocabulary) is timed the same way with ``D`` the tokens per text, ``K`` the hidden size,
``n`` the number of texts and ``masks`` the sweep's masks per size; it has no epoch.

    python benchmarks/scaling.py [--repeats 2]
"""

import argparse
from functools import partial
import warnings

import numpy as np
import torch

from _common import interleaved_minimum
from skmpt import MaskedFactorAnalysis, MaskedGaussianMixture, MaskedLinearVAE, MaskedPPCA, MaskedVAE


def data(estimator, n, D, K, rng):
    Z = rng.randn(n, K)
    X = Z @ rng.randn(K, D) + 0.5 * rng.randn(n, D)
    if estimator is MaskedLinearVAE:
        return (X > 0).astype(float)
    return X


#: estimator, fixed parameters, base (D, K, n, masks), the values each factor takes, masks parameter
CONFIGS = [
    (
        MaskedPPCA, {}, dict(D=256, K=8, n=512, masks=1),
        dict(D=[128, 256, 512], K=[4, 8, 16], n=[256, 512, 1024], masks=[1, 2, 4]),
    ),
    (
        MaskedLinearVAE, {}, dict(D=64, K=2, n=1024, masks=1),
        dict(D=[32, 64, 128], K=[1, 2, 3], n=[512, 1024, 2048], masks=[1, 2, 4]),
    ),
    (
        MaskedFactorAnalysis, {}, dict(D=64, K=4, n=512, masks=1),
        dict(D=[32, 64, 128], K=[2, 4, 8], n=[256, 512, 1024], masks=[1, 2, 4]),
    ),
    (
        MaskedGaussianMixture, {}, dict(D=16, K=4, n=512, masks=1),
        dict(D=[8, 16, 32], K=[2, 4, 8], n=[256, 512, 1024], masks=[1, 2, 4]),
    ),
    (
        MaskedVAE,
        {"hidden_layer_sizes": (128,), "n_particles": 8, "n_lml_samples": 10},
        dict(D=32, K=4, n=512, masks=1),
        dict(D=[16, 32, 64], K=[2, 4, 8], n=[256, 512, 1024], masks=[1, 2, 4]),
    ),
]


def measure(estimator, fixed, D, K, n, masks, repeats, rng):
    X = data(estimator, n, D, K, rng)
    params = dict(fixed, n_components=K, score_masks=masks, random_state=0, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (epoch,) = interleaved_minimum([lambda: estimator(max_epochs=1, **params).fit(X)], repeats)
        fitted = estimator(max_epochs=1, **params).fit(X)
        with torch.no_grad():
            (score,) = interleaved_minimum([partial(fitted.score_samples, X)], repeats)
    return score, epoch


def mlm_setup():
    """A WordPiece tokenizer and a pool of WordNet words to cut texts of a given length from."""
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    sentences = load_wordnet_sentences()
    return make_wordpiece_tokenizer(sentences[:5000], vocab_size=1000), " ".join(sentences[5000:8000]).split()


def mlm_texts(tokenizer, words, n, length):
    """``n`` texts of about ``length`` tokens each, consecutive runs of ``words``."""
    texts, start = [], 0
    for _ in range(n):
        stop = start + 1
        while len(tokenizer(" ".join(words[start:stop]), add_special_tokens=False)["input_ids"]) < length:
            stop += 1
        texts.append(" ".join(words[start:stop]))
        start = stop
    return texts


def measure_mlm(tokenizer, words, D, K, n, masks, repeats):
    from transformers import BertConfig, BertForMaskedLM

    from skmpt import MLMCurveScorer

    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=K, num_hidden_layers=2, num_attention_heads=max(1, K // 32),
        intermediate_size=4 * K, max_position_embeddings=512,
    )
    torch.manual_seed(0)
    model = BertForMaskedLM(config).eval()
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, score_masks=masks, random_state=0, device="cpu").fit()
    texts = mlm_texts(tokenizer, words, n, D)
    return interleaved_minimum([partial(scorer.score_samples, texts)], repeats)[0]


def slope(values, times):
    return np.polyfit(np.log(values), np.log(times), 1)[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.RandomState(0)
    print(f"torch {torch.__version__}, 1 thread, CPU seconds, minimum of {args.repeats}")
    print("| estimator | factor | values | score s | score exponent | epoch s | epoch exponent |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for estimator, fixed, base, grid in CONFIGS:
        for factor, values in grid.items():
            scores, epochs = [], []
            for value in values:
                s, e = measure(estimator, fixed, **dict(base, **{factor: value}), repeats=args.repeats, rng=rng)
                scores.append(s)
                epochs.append(e)
            print(
                f"| {estimator.__name__} | {factor} | {', '.join(map(str, values))} | "
                f"{', '.join(f'{t:.3g}' for t in scores)} | {slope(values, scores):.2f} | "
                f"{', '.join(f'{t:.3g}' for t in epochs)} | {slope(values, epochs):.2f} |",
                flush=True,
            )
    tokenizer, words = mlm_setup()
    base = dict(D=32, K=64, n=8, masks=1)
    for factor, values in dict(D=[16, 32, 64], K=[32, 64, 128], n=[4, 8, 16], masks=[1, 2, 4]).items():
        scores = [measure_mlm(tokenizer, words, **dict(base, **{factor: v}), repeats=args.repeats) for v in values]
        print(
            f"| MLMCurveScorer | {factor} | {', '.join(map(str, values))} | "
            f"{', '.join(f'{t:.3g}' for t in scores)} | {slope(values, scores):.2f} | | |",
            flush=True,
        )
    print("\nMaskedPPCA score (sweep, P = masks * D shared masks) as a fraction of the matmul rate:")
    print("| D | K | n | P | score s | matmul s | fraction |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for D, K, n, masks in [(128, 4, 256, 1), (256, 8, 512, 2), (512, 16, 512, 1), (512, 2, 512, 1)]:
        X = data(MaskedPPCA, n, D, K, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = MaskedPPCA(
                n_components=K, score_method="sweep", score_masks=masks, max_epochs=1, random_state=0, device="cpu"
            ).fit(X)
        a, b = torch.randn(n, D, dtype=torch.float64), torch.randn(D, masks * D * K, dtype=torch.float64)
        functions = [partial(fitted.score_samples, X), partial(torch.matmul, a, b)]
        score, matmul = interleaved_minimum(functions, args.repeats + 1)
        print(f"| {D} | {K} | {n} | {masks * D} | {score:.4f} | {matmul:.4f} | {matmul / score:.1%} |", flush=True)


if __name__ == "__main__":
    main()
