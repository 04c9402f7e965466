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

Then float32 against bfloat16, in this process, on the CPU (and on CUDA when available): each
dtype's matmul rate (one (2048 x 768) @ (768 x 3072) product, in the layout of
``torch.nn.Linear`` and as a plain product; the faster is the rate), and for AntiBERTy
(``skmpt.text.load_antiberty``) and a random BERT of its shape (8 layers, 512 hidden units,
2048 intermediate) on ``--dtype-tokens`` residues of an antibody: the PLL's and the MPT
curve's time (sweep, one mask per size), the bare encoder's over the same masked copies in the
same dtype and batches, their ratios, their fractions of that dtype's matmul rate, and the
largest difference per token of the PLL and the curve from float32's. Two variants: float32
(what ``dtype="auto"`` runs for a float32 checkpoint) and ``dtype="bfloat16"`` (the model cast).
The rate counts the encoder's
multiply-adds (x 2 flops) from the configuration, per token of a copy of padded length ``L``
and per layer: the attention projections ``4 h^2``, the feed-forward block ``2 h I``, the
attention scores and weighted values ``2 L h``; plus the LM head ``h^2 + h V`` at each scored
position (``L`` per text for the PLL, ``L (L + 1) / 2`` for the curve), none for the bare
encoder. Embeddings, layer norms, softmax and activations are not counted. The issue's targets
(bfloat16 scoring at >= 60 % of the bfloat16 matmul rate, within 1.15x of the bare bfloat16
encoder) are printed with the values measured.

    python benchmarks/mlm_curve.py --minicons-python /tmp/minicons/bin/python
    python benchmarks/mlm_curve.py --quick                  # about 2 minutes
    python benchmarks/mlm_curve.py --dtype-only --dtype-texts 2 --dtype-repeats 2
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
from _common import interleaved_minimum

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
        scorer.set_params(score_method="sweep", score_masks=1, random_state=0).fit()  # options act at fit
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
    parser.add_argument("--dtype-tokens", type=int, default=120, help="residues of each antibody scored in each dtype")
    parser.add_argument("--dtype-texts", type=int, choices=[1, 2], default=1, help="antibodies scored in each dtype")
    parser.add_argument("--dtype-repeats", type=int, default=1, help="interleaved repeats of the dtype comparison")
    parser.add_argument("--matmul-repeats", type=int, default=3, help="interleaved repeats of the matmul rates")
    parser.add_argument("--dtype-models", default="antiberty,random",
                        help="models compared in each dtype: 'antiberty', 'random' (AntiBERTy's shape) or both")
    parser.add_argument("--dtype-only", action="store_true", help="only the float32 against bfloat16 comparison")
    parser.add_argument("--no-dtypes", action="store_true", help="skip the float32 against bfloat16 comparison")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, one repeat: 4 texts, a 64-token long sentence, 16-residue antibodies")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_texts, args.long_tokens, args.dtype_tokens, args.repeats, args.matmul_repeats = 4, 64, 16, 1, 1
    import torch

    torch.set_num_threads(args.threads)
    if not args.dtype_only:
        compare_scorers(args)
    if not args.no_dtypes:
        dtype_section(args)


def compare_scorers(args):
    """skmpt against the bare encoder and minicons: speed, agreement, memory (each in a child process)."""
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


# ----- float32 against bfloat16: each dtype's matmul rate, the scorer's fraction of it, its error -----

#: Antibody variable domains (trastuzumab's heavy and light chains), scored by AntiBERTy.
ANTIBODIES = (
    "EVQLVESGGGLVQPGGSLRLSCAASGFNIKDTYIHWVRQAPGKGLEWVARIYPTNGYTRYADSVKGRFTISADTSKNTAYLQMNSLRAEDTAVYYCSRWGGDGFYAMDYWGQGTLVTVSS",
    "DIQMTQSPSSLSASVGDRVTITCRASQDVNTAVAWYQQKPGKAPKLLIYSASFLYSGVPSRFSGSRSGTDFTLTISSLQPEDFATYYCQQHYTTPPTFGQGTKVEIK",
)
#: The issue's targets for bfloat16 scoring.
RATE_TARGET, BARE_TARGET = 0.60, 1.15
MATMUL_SHAPE = (2048, 768, 3072)


def _clock(device):
    """CPU seconds (one thread) on the CPU; wall-clock seconds after a synchronisation on CUDA."""
    import torch

    if device.type != "cuda":
        return time.process_time
    return lambda: (torch.cuda.synchronize(device), time.perf_counter())[1]


def matmul_rates(dtype, device, repeats):
    """GFLOP/s of one (2048 x 768) @ (768 x 3072) product in ``dtype``, in the two layouts torch uses:
    ``x @ W.T`` with ``W`` of shape (3072, 768) (``torch.nn.Linear``'s) and ``x @ B`` with ``B`` (768, 3072)."""
    import torch

    n, k, m = MATMUL_SHAPE
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, k, generator=generator).to(device=device, dtype=dtype)
    weight = torch.randn(m, k, generator=generator).to(device=device, dtype=dtype)
    b = weight.T.contiguous()
    products = [lambda: torch.nn.functional.linear(x, weight), lambda: x @ b]
    with torch.inference_mode():
        for product in products:
            product()
        seconds = interleaved_minimum(products, repeats, clock=_clock(device))
    return [2 * n * k * m / s / 1e9 for s in seconds]


def encoder_macs(config, lengths, n_targets):
    """Multiply-adds of the encoder over copies of ``lengths`` tokens, and of the LM head at ``n_targets``.

    Per token and layer: the attention projections ``4 h^2`` (query, key, value, output), the
    feed-forward block ``2 h I`` and the attention's scores and weighted values ``2 L h``
    (``L`` the copy's padded length); the LM head ``h^2 + h V`` per target (its transform and
    decoder). Embeddings, layer norms, softmax and activations are not counted.
    """
    h, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    encoder = sum(layers * length * (4 * h * h + 2 * h * inter + 2 * length * h) for length in lengths)
    return encoder, n_targets * (h * h + h * config.vocab_size)


def bare_encoder(model, tokenizer, texts, dtype, device, score_batch_size=64, max_batch_tokens=16384):
    """A function that runs ``model.base_model`` (cast to ``dtype``) over the PLL's masked copies of
    ``texts``, batched as the scorer batches them; and the copies' lengths."""
    import copy

    import torch

    encoder = copy.deepcopy(model).to(device=device, dtype=dtype).base_model.eval()
    ids = tokenizer(texts)["input_ids"]
    copies = sorted((len(row), row, position) for row in ids for position in range(1, len(row) - 1))
    batches, i = [], 0
    while i < len(copies):
        count = max(1, min(score_batch_size, max_batch_tokens // copies[i][0]))
        chunk = copies[i : i + count]
        batch = torch.full((len(chunk), max(n for n, _, _ in chunk)), tokenizer.pad_token_id)
        for r, (n, row, position) in enumerate(chunk):
            batch[r, :n] = torch.tensor(row)
            batch[r, position] = tokenizer.mask_token_id
        batches.append((batch.to(device), (batch != tokenizer.pad_token_id).long().to(device)))
        i += count

    def run():
        with torch.inference_mode():
            for batch, mask in batches:
                encoder(input_ids=batch, attention_mask=mask)

    return run, [batch.shape[1] for batch, _ in batches for _ in batch]


#: (name, dtype of the scorer) of every variant measured; the first is the reference.
DTYPE_VARIANTS = [("float32", "float32"), ("bfloat16", "bfloat16")]


def measure_variant(model, tokenizer, texts, variant, device, repeats):
    """Seconds of the PLL, the curve (sweep, one mask per size) and the bare encoder; their scores; MACs."""
    from skmpt import MLMCurveScorer

    name, dtype = variant
    scorer = MLMCurveScorer(model, tokenizer=tokenizer, device=str(device), dtype=dtype, score_method="sweep",
                            score_masks=1, random_state=0).fit()
    scorer.pseudo_log_likelihood([texts[0][:8]])  # first calls set up the kernels
    bare, lengths = bare_encoder(scorer.model_, tokenizer, texts, scorer.model_.dtype, device)
    results = {}
    functions = [lambda: results.update(pll=scorer.pseudo_log_likelihood(texts)),
                 lambda: results.update(curve=scorer.score_samples(texts)), bare]
    pll_s, curve_s, bare_s = interleaved_minimum(functions, repeats, clock=_clock(device))
    n_tokens = [len(ids) - 2 for ids in tokenizer(texts)["input_ids"]]
    config = scorer.model_.config
    encoder, pll_head = encoder_macs(config, lengths, sum(n_tokens))
    _, curve_head = encoder_macs(config, lengths, sum(n * (n + 1) // 2 for n in n_tokens))
    return dict(name=name, pll_s=pll_s, curve_s=curve_s, bare_s=bare_s, pll=results["pll"], curve=results["curve"],
                n_tokens=np.array(n_tokens), pll_macs=encoder + pll_head, curve_macs=encoder + curve_head,
                bare_macs=encoder)


def print_dtype_table(model_name, rows, rates):
    """One line per dtype: times, fractions of that dtype's matmul rate, ratios to the bare encoder, errors."""
    reference = rows[0]
    print(f"  {model_name}: {len(reference['n_tokens'])} text(s) of {', '.join(map(str, reference['n_tokens']))} "
          f"tokens; GMAC: scorer PLL {rows[0]['pll_macs'] / 1e9:.2f}, curve {rows[0]['curve_macs'] / 1e9:.2f}, "
          f"bare encoder {rows[0]['bare_macs'] / 1e9:.2f}")
    print(f"  {'dtype':14s} {'PLL s':>8s} {'curve s':>8s} {'bare s':>8s} {'PLL/bare':>8s} {'crv/bare':>8s} "
          f"{'PLL %':>6s} {'curve %':>7s} {'bare %':>6s} {'max dPLL':>9s} {'max dcurve':>10s}")
    for row in rows:
        rate = rates["float32" if row["name"] == "float32" else "bfloat16"] * 1e9
        fraction = {key: 2 * row[f"{key}_macs"] / row[f"{key}_s"] / rate for key in ("pll", "curve", "bare")}
        d_pll = np.max(np.abs(row["pll"] - reference["pll"]) / row["n_tokens"])
        d_curve = np.max(np.abs(row["curve"] - reference["curve"]) / row["n_tokens"])
        row.update(fraction=fraction, d_pll=d_pll, d_curve=d_curve)
        print(f"  {row['name']:14s} {row['pll_s']:8.2f} {row['curve_s']:8.2f} {row['bare_s']:8.2f} "
              f"{row['pll_s'] / row['bare_s']:8.2f} {row['curve_s'] / row['bare_s']:8.2f} {100 * fraction['pll']:6.1f} "
              f"{100 * fraction['curve']:7.1f} {100 * fraction['bare']:6.1f} {d_pll:9.1e} {d_curve:10.1e}")


def print_targets(results):
    """The targets for bfloat16 scoring beside the values measured."""
    for model_name, rows in results:
        for row in rows[1:]:
            fraction = min(row["fraction"]["pll"], row["fraction"]["curve"])
            ratio = max(row["pll_s"], row["curve_s"]) / row["bare_s"]
            error = max(row["d_pll"], row["d_curve"])
            met = {True: "met", False: "NOT met"}
            print(f"  {model_name}, {row['name']}: >= {100 * RATE_TARGET:.0f} % of the bf16 matmul rate: "
                  f"{100 * fraction:.1f} % ({met[fraction >= RATE_TARGET]}); within {BARE_TARGET}x of the bare "
                  f"bf16 encoder: {ratio:.2f}x ({met[ratio <= BARE_TARGET]}); error {error:.1e} nats/token")


def dtype_section(args):
    """For each device (the CPU, and CUDA when available): each dtype's matmul rate, then per model the
    scorer's PLL and curve against the bare encoder, their fraction of that rate, and their error."""
    import torch

    import skmpt.text

    try:
        models = [(name, *skmpt.text.load_antiberty(pretrained=pretrained, random_state=0))
                  for key, name, pretrained in [("antiberty", "AntiBERTy", True),
                                                ("random", "random BERT of its shape", False)]
                  if key in args.dtype_models.split(",")]
    except ImportError as exc:
        print(f"float32 against bfloat16: not measured ({exc})")
        return
    texts = [sequence[: args.dtype_tokens] for sequence in ANTIBODIES[: args.dtype_texts]]
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        clock = "CPU seconds, 1 thread" if device.type == "cpu" else "wall-clock seconds"
        print(f"\nfloat32 against bfloat16 on {device} ({clock}); "
              f"% = the encoder's multiply-adds x 2 / seconds / that dtype's matmul rate:")
        rates = {}
        for name in ("float32", "bfloat16"):
            linear, plain = matmul_rates(getattr(torch, name), device, args.matmul_repeats)
            rates[name] = max(linear, plain)
            print(f"  matmul {MATMUL_SHAPE[0]}x{MATMUL_SHAPE[1]} @ {MATMUL_SHAPE[1]}x{MATMUL_SHAPE[2]} in {name}: "
                  f"{linear:7.1f} GFLOP/s as x @ W.T (nn.Linear), {plain:7.1f} as x @ B; rate {rates[name]:.1f}")
        results = []
        for model_name, model, tokenizer in models:
            rows = [measure_variant(model, tokenizer, texts, variant, device, args.dtype_repeats)
                    for variant in DTYPE_VARIANTS]
            print_dtype_table(model_name, rows, rates)
            results.append((model_name, rows))
        print("  targets (bfloat16 scoring):")
        print_targets(results)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"({time.perf_counter() - start:.0f} s in all)")
