"""Pseudo-log-likelihood of MLMCurveScorer against minicons' MaskedLMScorer: agreement, speed, memory.

Both score the same model (a BERT built from a configuration, BERT-base's vocabulary size
30522, saved to a temporary directory) on the same sentences (skmpt's WordNet sentences joined
four at a time, about 40 tokens each). minicons 0.3.39 needs transformers < 5, so it runs in a
virtual environment of its own, given by ``--minicons-python``; make one with

    python -m venv /tmp/minicons
    /tmp/minicons/bin/pip install torch==2.13.0 "transformers==4.57.6" minicons==0.3.39

Prints: skmpt's pseudo-log-likelihood and MPT curve (sweep, one mask per size: as many
copies as the PLL) against the bare encoder (``model.base_model``, no LM head) run over the same
masked copies in batches of the same size, the work no scorer can skip; the largest difference
of the PLLs per token; tokens scored per second by each and
their ratio (each timed in its own process, best of ``--repeats``); and the peak resident
memory (above the loaded model) of one 512-token sentence's full PLL, each in a child
process; minicons' child runs under an address-space limit (``--memory-limit`` GiB) so that
its all-copies-at-once forward pass fails cleanly instead of taking the machine down. With
CUDA (``--device cuda``) the peak is torch's allocated GPU memory. ``--bert-base`` scores a
BERT-base-sized model (768 hidden, 12 layers) instead of the default small one, and
``--long-tokens`` shortens the long sentence. With ``--threads 1`` (the default) every time is
the CPU time of one torch thread; with more threads, wall-clock time.

    python benchmarks/mlm_curve.py --minicons-python /tmp/minicons/bin/python
"""

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

SKMPT_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    import torch
    from skmpt import MLMCurveScorer
    args = json.loads(sys.argv[1])
    torch.set_num_threads(args["threads"])
    texts = json.load(open(args["texts"]))
    scorer = MLMCurveScorer(args["model"], device=args["device"], max_batch_tokens=args["max_batch_tokens"]).fit()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best, pll = float("inf"), None
    clock = time.process_time if args["threads"] == 1 else time.perf_counter
    for _ in range(args["repeats"]):
        start = clock()
        pll = scorer.pseudo_log_likelihood(texts)
        best = min(best, clock() - start)
    curve = float("inf")
    if args.get("curve"):  # the MPT curve's sum with one mask per size: L copies per text, as for the PLL
        scorer.set_params(score_method="sweep", score_masks=1, random_state=0)
        for _ in range(args["repeats"]):
            start = clock()
            scorer.score_samples(texts)
            curve = min(curve, clock() - start)
    gpu = torch.cuda.max_memory_allocated() if scorer.device_.type == "cuda" else None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"pll": pll.tolist(), "seconds": best, "curve_seconds": curve, "rss_kib": [before, peak],
                      "gpu_bytes": gpu}))
    """
)

MINICONS_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    args = json.loads(sys.argv[1])
    if args["memory_limit"]:
        limit = int(args["memory_limit"] * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import torch
    torch.set_num_threads(args["threads"])
    from minicons import scorer
    from transformers import AutoModelForMaskedLM, PreTrainedTokenizerFast
    texts = json.load(open(args["texts"]))
    # the tokenizer files were written by transformers 5; build the same tokenizer from tokenizer.json
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=args["model"] + "/tokenizer.json", pad_token="[PAD]", unk_token="[UNK]",
        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
    )
    model = AutoModelForMaskedLM.from_pretrained(args["model"])
    mlm = scorer.MaskedLMScorer(model, device=args["device"], tokenizer=tokenizer)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best, pll, error = float("inf"), [], None
    clock = time.process_time if args["threads"] == 1 else time.perf_counter
    try:
        for _ in range(args["repeats"]):
            start, pll = clock(), []
            for i in range(0, len(texts), args["batch_size"]):
                pll += mlm.sequence_score(texts[i : i + args["batch_size"]], reduction=lambda x: x.sum(0).item(),
                                          PLL_metric="original")
            best = min(best, clock() - start)
    except (MemoryError, RuntimeError) as exc:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    gpu = torch.cuda.max_memory_allocated() if args["device"].startswith("cuda") else None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"pll": pll, "seconds": best, "rss_kib": [before, peak], "gpu_bytes": gpu, "error": error}))
    """
)


BARE_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    args = json.loads(sys.argv[1])
    torch.set_num_threads(args["threads"])
    texts = json.load(open(args["texts"]))
    tokenizer = AutoTokenizer.from_pretrained(args["model"])
    encoder = AutoModelForMaskedLM.from_pretrained(args["model"]).base_model.to(args["device"]).eval()
    ids = tokenizer(texts, truncation=True, max_length=512)["input_ids"]
    # every masked copy (one per own token: [CLS] and [SEP] excluded), grouped by length as skmpt does
    copies = sorted((len(row), row) for row in ids for _ in range(len(row) - 2))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best = float("inf")
    clock = time.process_time if args["threads"] == 1 else time.perf_counter
    for _ in range(args["repeats"]):
        start = clock()
        with torch.inference_mode():
            i = 0
            while i < len(copies):
                length = copies[i][0]
                count = max(1, min(args["batch_size"], args["max_batch_tokens"] // length))
                chunk = copies[i : i + count]
                width = max(n for n, _ in chunk)
                batch = torch.full((len(chunk), width), tokenizer.pad_token_id)
                for r, (n, row) in enumerate(chunk):
                    batch[r, :n] = torch.tensor(row)
                    batch[r, 1 + r % (n - 2)] = tokenizer.mask_token_id
                mask = (batch != tokenizer.pad_token_id).long()
                encoder(input_ids=batch.to(args["device"]), attention_mask=mask.to(args["device"]))
                i += count
        best = min(best, clock() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": best, "rss_kib": [before, peak]}))
    """
)


def run_child(python, code, **args):
    result = subprocess.run([python, "-c", code, json.dumps(args)], capture_output=True, text=True)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        return {"error": f"exit {result.returncode}: {result.stderr.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1])


def build_model(directory, args):
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    sentences = load_wordnet_sentences()
    tokenizer = make_wordpiece_tokenizer(sentences, vocab_size=8000)
    hidden, layers = (768, 12) if args.bert_base else (args.hidden_size, args.n_layers)
    config = BertConfig(
        vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=hidden // 64,
        intermediate_size=4 * hidden, max_position_embeddings=512,
    )
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    rng = np.random.default_rng(0)
    picked = rng.choice(len(sentences), 4 * args.n_texts, replace=False)
    texts = [" ".join(sentences[j] for j in picked[4 * i : 4 * i + 4]) for i in range(args.n_texts)]
    # the longest run of whole words that fits BERT's 512 positions with [CLS] and [SEP]
    words = " ".join(sentences[j] for j in rng.choice(len(sentences), 200, replace=False)).split()
    low, high = 1, len(words)
    while low < high:
        middle = (low + high + 1) // 2
        fits = len(tokenizer(" ".join(words[:middle]))["input_ids"]) <= min(args.long_tokens, 512)
        low, high = (middle, high) if fits else (low, middle - 1)
    long_text = " ".join(words[:low])
    n_tokens = sum(len(ids) - 2 for ids in tokenizer(texts)["input_ids"])
    return texts, long_text, n_tokens, f"BERT {hidden} hidden x {layers} layers, vocabulary 30522"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minicons-python", default=None, help="python of a venv with minicons and transformers<5")
    parser.add_argument("--n-texts", type=int, default=32)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--n-layers", type=int, default=4)
    parser.add_argument("--bert-base", action="store_true", help="768 hidden units, 12 layers")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--minicons-batch", type=int, default=8, help="texts per minicons call")
    parser.add_argument("--max-batch-tokens", type=int, default=16384)
    parser.add_argument("--memory-limit", type=float, default=16, help="GiB of address space for minicons' 512 run")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; with 1, times are CPU seconds, otherwise wall-clock seconds")
    parser.add_argument("--long-tokens", type=int, default=512, help="tokens of the long sentence, at most 512")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        model_dir, texts_file, long_file = f"{tmp}/model", f"{tmp}/texts.json", f"{tmp}/long.json"
        texts, long_text, n_tokens, description = build_model(model_dir, args)
        Path(texts_file).write_text(json.dumps(texts))
        Path(long_file).write_text(json.dumps([long_text]))
        clock = "CPU seconds, 1 thread" if args.threads == 1 else f"wall-clock seconds, {args.threads} threads"
        print(f"{description}; {len(texts)} texts, {n_tokens} tokens; device {args.device}; {clock}")
        common = dict(model=model_dir, device=args.device, repeats=args.repeats, threads=args.threads)
        ours = run_child(
            sys.executable, SKMPT_CHILD, texts=texts_file, max_batch_tokens=args.max_batch_tokens, curve=True, **common
        )
        bare = run_child(sys.executable, BARE_CHILD, texts=texts_file, max_batch_tokens=args.max_batch_tokens,
                         batch_size=64, **common)
        print(f"skmpt    PLL: {n_tokens / ours['seconds']:9.0f} tokens/s, "
              f"peak RSS {ours['rss_kib'][1] / 2**20:.2f} GiB")
        print(f"bare encoder over the same masked copies: {n_tokens / bare['seconds']:9.0f} tokens/s, "
              f"peak RSS {bare['rss_kib'][1] / 2**20:.2f} GiB")
        print(f"PLL / bare encoder: {ours['seconds'] / bare['seconds']:.2f}x; MPT curve (sweep, one mask per size, "
              f"as many copies) / bare encoder: {ours['curve_seconds'] / bare['seconds']:.2f}x")
        theirs = None
        if args.minicons_python:
            theirs = run_child(args.minicons_python, MINICONS_CHILD, texts=texts_file, batch_size=args.minicons_batch,
                               memory_limit=None, **common)
            if theirs.get("error"):
                print(f"minicons failed: {theirs['error']}")
            else:
                lengths = np.array([len(t) for t in _token_counts(model_dir, texts)])
                diff = np.abs(np.array(ours["pll"]) - np.array(theirs["pll"])) / lengths
                print(f"minicons PLL: {n_tokens / theirs['seconds']:9.0f} tokens/s; skmpt is "
                      f"{theirs['seconds'] / ours['seconds']:.1f}x faster")
                print(f"largest |PLL difference| per token: {diff.max():.2e} nats (mean {diff.mean():.2e})")
        else:
            print("minicons not compared: pass --minicons-python (see the docstring)")

        long_length = len(_token_counts(model_dir, [long_text])[0])
        print(f"one long sentence ({long_length + 2} tokens with [CLS] and [SEP]), full PLL ({long_length} copies):")
        single = dict(model=model_dir, device=args.device, repeats=1, texts=long_file, threads=args.threads)
        report(" skmpt   ", run_child(sys.executable, SKMPT_CHILD, max_batch_tokens=args.max_batch_tokens, **single))
        if args.minicons_python:
            report(" minicons", run_child(args.minicons_python, MINICONS_CHILD, batch_size=1,
                                          memory_limit=args.memory_limit, **single))


def _token_counts(model_dir, texts):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return [ids[1:-1] for ids in tokenizer(texts, truncation=True, max_length=512)["input_ids"]]


def report(name, result):
    if result.get("error"):
        print(f"{name}: failed ({result['error']})")
        return
    before, peak = result["rss_kib"]
    line = f"{name}: {result['seconds']:7.2f} s, peak RSS {peak / 2**20:6.2f} GiB ({(peak - before) / 2**20:+.2f} GiB)"
    if result.get("gpu_bytes"):
        line += f", peak GPU memory {result['gpu_bytes'] / 2**30:.2f} GiB"
    print(line)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"({time.perf_counter() - start:.0f} s in all)")
