"""Variance per forward pass of the estimators of ``log p(continuation | context)`` and of ``sum_M S(x; M)``.

For a continuation (or a text) of ``T = 12`` tokens the model is run once on every one of its
``2**T - 1 = 4095`` masks, each target's log-probability kept: a table from which any estimator's
draws are read without another forward pass. Each estimator (:mod:`skmpt.text.strategies`, the
copies the lm-eval backend runs) is then repeated with ``--runs`` seeds at a budget of
``--passes`` forward passes, and the spread of its estimates is its variance; the exact value is
the enumeration's. The table gives, per estimator, the mean, the variance, the passes it used and
LLaDA's variance per pass over its own (``stratified`` is LLaDA's count-stratified estimator,
here with sizes rounded down; ``llada_round`` is LLaDA's own rounding, halves to even; ``auto``
is the budgeted estimator itself (:class:`skmpt.text.estimation.BudgetedEstimator`, run over the table):
the default of the lm-eval model, of ``MLMCurveScorer.conditional_score_samples`` and of the conditional
functions, a pilot of 16 copies or an eighth of the passes and the estimator it chose on
the rest: ``nested`` for a continuation given a context where the pilot does not choose ``controlled``
and two antithetic pairs of orderings fit). ``sweep`` at 120 passes is what
``conditional_score_samples`` ran in skmpt 0.1.0 (the scorer's ``score_method="sweep"``, 10 masks per size).
Each title line also says how far balancing positions
within sizes could divide the variance (:func:`balance_bound`).
Three models:

- ``joint``: a masked LM whose conditionals come from an explicit joint over 14 binary words
  (:class:`skmpt.testing.TabularJoint`), 12 words given 2 and 12 words alone;
- ``antiberty``: AntiBERTy (installed offline), a VH chain's last 12 residues given the rest of
  the chain, and the same 12 residues alone; ``--chains`` adds held-out chains (:data:`CHAINS`:
  trastuzumab's VH and VL and adalimumab's VH, the 12 residues that end each CDR3 given the
  residues before them);
- ``diffusion``: the tiny masked diffusion LM that ``examples/plot_masked_diffusion.py`` trains
  (``mask_rate="uniform"``) at its small size, a held-out sentence's last 12 tokens given the
  rest and 12 tokens alone; ``--sentences 0,1,2`` takes the first, second and third such test sentences.

``--estimators`` picks the rows (LLaDA's is always there) and ``--chain-weights 0.5,1`` adds
``nested`` at those chain weights (``nested@0.5``) to the tables given a context.

Run ``python benchmarks/text_estimator_variance.py`` (4095 passes per table; AntiBERTy's take a
few minutes on one CPU thread).
"""

import argparse
import functools
import time
import types

import numpy as np
import torch

from skmpt.testing import TabularJoint
from skmpt.masks import masks_of_sizes
from skmpt.text import EncodedTexts, MaskedLMRunner, encode_pairs, encode_texts, load_masked_lm
from skmpt.text.estimation import BudgetedEstimator
from skmpt.text.strategies import ESTIMATOR_METHODS, ExhaustiveMasks, NestedMasks, StratifiedSizeMasks

ESTIMATORS = ("llada_round", "stratified", "uniform", "low_discrepancy", "time", "sweep", "chain", "nested",
              "controlled", "antithetic", "balanced", "auto")
VH = "EVQLVESGGGLVQPGGSLRLSCAASGFTFSSYAMSWVRQAPGKGLEWVSAISGSGGSTYYADSVKGRFTISRDNSKNTLYLQMNSLRAEDTAVYYCAK"
#: AntiBERTy's chains (``--chains``): each chain and its 12-residue window, scored given the residues before it.
#: ``vh`` (a germline VH3-23 chain's last 12 residues) is the table ``NestedMasks``' chain weight was first tuned on;
#: the others are held out: the end of each therapeutic antibody's CDR3, not the chain's end.
CHAINS = {
    "vh": (VH, VH[-12:]),
    "trastuzumab_vh": ("EVQLVESGGGLVQPGGSLRLSCAASGFNIKDTYIHWVRQAPGKGLEWVARIYPTNGYTRYADSVKGRFTISADTSKNTAYLQMNSLRAEDTAVY"
                       "YCSRWGGDGFYAMDYWGQGTLVTVSS", "RWGGDGFYAMDY"),
    "adalimumab_vh": ("EVQLVESGGGLVQPGRSLRLSCAASGFTFDDYAMHWVRQAPGKGLEWVSAITWNSGHIDYADSVEGRFTISRDNAKNSLYLQMNSLRAEDTAVYY"
                      "CAKVSYLSTASSLDYWGQGTLVTVSS", "VSYLSTASSLDY"),
    "trastuzumab_vl": ("DIQMTQSPSSLSASVGDRVTITCRASQDVNTAVAWYQQKPGKAPKLLIYSASFLYSGVPSRFSGSRSGTDFTLTISSLQPEDFATYYCQQHYTT"
                       "PPTFGQGTKVEIK", "YYCQQHYTTPPT"),
}


class LLaDARounding(StratifiedSizeMasks):
    """LLaDA's sizes exactly as its evaluation code draws them (``torch.round``: halves to even)."""

    def copies(self, length, generator, word_ids=None):
        start = int(torch.randint(1, length + 1, (), generator=generator))
        sizes = torch.round(torch.linspace(float(start), start + (self.score_masks - 1) * (length / self.score_masks),
                                           self.score_masks, dtype=torch.float64)).long()
        masked = masks_of_sizes(((sizes - 1) % length + 1).numpy(), length, random_state=generator)
        return masked, masked


def strategy(name, length, passes):
    """The estimator ``name`` at ``passes`` forward passes for ``length`` tokens (at least two draws).

    A registered name is sized as the budgeted estimator sizes it (:meth:`BudgetedEstimator.strategy`);
    ``nested@w`` is ``nested`` with ``chain_weight=w``.
    """
    if name in ESTIMATOR_METHODS:
        return BudgetedEstimator.strategy(name, length, passes)
    factory = LLaDARounding
    if name.startswith("nested@"):
        factory = functools.partial(NestedMasks, chain_weight=float(name.partition("@")[2]))
    step = 2 if factory(4).paired else 1  # orderings in pairs
    per_copy = max(1, factory(2).n_copies(length) // 2)
    count = max(2, passes // per_copy // step * step)
    while count > 2 and factory(count).n_copies(length) > passes:  # nested: the all-masked copy once more
        count -= step
    return factory(count)


def mask_table(runner, encoded):
    """Each target's log-probability under each of the ``2**T - 1`` masks: shape (2**T - 1, T), NaN if unmasked."""
    length = int(encoded.n_tokens[0])
    copies = ExhaustiveMasks(max_tokens=length).copies(length, None)
    return runner.run_copies(encoded, [copies], per_target=True)[0]


def lookup(table, masked, targets):
    """Each copy's target log-probabilities read from ``table`` (NaN at the other tokens), shape (n_copies, T)."""
    codes = masked.numpy() @ (2 ** np.arange(table.shape[1]))
    return np.where(targets.numpy(), table[np.maximum(codes, 1) - 1], np.nan)


class TableRunner:
    """A runner whose forward passes are read from a mask table: what the budgeted estimator runs on here."""

    def __init__(self, table):
        self.table = table

    def run_copies(self, encoded, copies, *, per_target=False, progress=None):
        values = [lookup(self.table, masked, targets) for masked, targets in copies]
        return values if per_target else [np.nansum(value, 1) for value in values]


def simulate(table, name, passes, runs, given=False):
    """Mean, variance and passes of the estimator ``name`` over ``runs`` seeds, its copies read from ``table``.

    ``auto`` is the budgeted estimator (:class:`BudgetedEstimator`) at ``passes`` forward passes with its
    defaults, the pilot's passes counted; the others are each strategy at ``passes`` copies.
    """
    length = table.shape[1]
    estimates, spent = [], []
    encoded = EncodedTexts([torch.zeros(length + 2, dtype=torch.long)], [torch.arange(1, length + 1)])
    for seed in range(runs):
        if name == "auto":
            estimator = BudgetedEstimator(TableRunner(table), max_forward_passes=passes, seed=seed)
            estimate = estimator.estimate(encoded, ["table"], given={0} if given else set())[0]
            estimates.append(estimate.log_likelihood)
            spent.append(estimate.forward_passes)
            continue
        generator = torch.Generator().manual_seed(seed)
        chosen = strategy(name, length, passes)
        masked, targets = chosen.copies(length, generator)
        values = lookup(table, masked, targets)
        if not chosen.per_target:
            values = np.nansum(values, 1)  # each copy's summed target log-probabilities (0 for an empty mask)
        estimates.append(chosen.draws(masked, values).mean())
        spent.append(chosen.n_copies(length))
    estimates = np.array(estimates)
    return estimates.mean(), estimates.var(ddof=1), int(np.mean(spent))


def balance_bound(table):
    """How much balancing positions within sizes could divide the spread of masks drawn size by size, at most.

    Within each size ``M < T`` the masks' terms ``(1/M) sum_masked log p`` are fitted by least squares
    on which tokens are masked (an additive model: each token's own difficulty and its effect on the
    others' when masked). A design that masks every token equally often within a size cancels that
    additive part and nothing else, so with equal copies per size the variance can shrink at most by
    the ratio of the terms' total variance to the residuals' (over all masks of each size).
    """
    length = table.shape[1]
    masked = ~np.isnan(table)
    sizes = masked.sum(1)
    terms = np.nansum(table, 1) / sizes
    total = residual = 0.0
    for size in range(1, length):
        rows = sizes == size
        design = np.column_stack([np.ones(rows.sum()), masked[rows]])
        fitted = design @ np.linalg.lstsq(design, terms[rows], rcond=None)[0]
        total += terms[rows].var()
        residual += (terms[rows] - fitted).var()
    return total / max(residual, 1e-300)


def report(title, table, args, given=False):
    exact = ExhaustiveMasks(max_tokens=table.shape[1]).draws(torch.from_numpy(~np.isnan(table)),
                                                            np.nansum(table, 1))[0]
    names = [*args.estimators, *(f"nested@{weight:g}" for weight in args.chain_weights if given)]
    rows = {name: simulate(table, name, args.passes, args.runs, given) for name in ("llada_round", *names)}
    reference = rows["llada_round"][1] * rows["llada_round"][2]
    print(f"\n{title}: exact {exact:.4f} ({args.passes} forward passes, {args.runs} runs; balancing positions "
          f"within sizes could divide the variance by {balance_bound(table):.3g} at most)")
    print(f"{'estimator':<16} {'mean':>10} {'variance':>10} {'passes':>7} {'LLaDA/it per pass':>18}")
    for name, (mean, variance, passes) in rows.items():
        ratio = "exact" if variance <= 1e-20 * max(1.0, mean**2) else f"{reference / (variance * passes):.2f}"
        print(f"{name:<16} {mean:10.4f} {variance:10.4g} {passes:7d} {ratio:>18}")


#: Where the tables are kept between runs (``--cache``), or None.
CACHE = {"folder": None}


def tables(runner, context, continuation, alone):
    """The mask tables of ``continuation`` given ``context`` and of ``alone`` (read from ``--cache`` if there)."""
    import hashlib
    from pathlib import Path

    key = hashlib.sha1(f"{runner.tokenizer.name_or_path}|{len(runner.tokenizer)}|{context}|{continuation}|{alone}"
                       .encode()).hexdigest()[:12]
    path = None if CACHE["folder"] is None else Path(CACHE["folder"]) / f"tables_{key}.npz"
    if path is not None and path.exists():
        saved = np.load(path)
        return saved["given"], saved["alone"]
    conditional = encode_pairs([context], [continuation], runner.tokenizer, runner.max_length)
    unconditional = encode_texts([alone], runner.tokenizer, runner.max_length)
    given, alone = mask_table(runner, conditional), mask_table(runner, unconditional)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, given=given, alone=alone)
    return given, alone


class JointLM(torch.nn.Module):
    """A masked LM over the words ``a`` and ``b`` whose logits are an explicit joint's conditionals."""

    def __init__(self, joint, tokenizer):
        super().__init__()
        self.joint, self.tokenizer = joint, tokenizer
        self.a, self.b = tokenizer.convert_tokens_to_ids(["a", "b"])

    def forward(self, input_ids, attention_mask):
        words = input_ids[:, 1:-1]
        masks = (words == self.tokenizer.mask_token_id).unsqueeze(1)
        logits = torch.full((*input_ids.shape, len(self.tokenizer)), -torch.inf, dtype=torch.float64)
        for value, token in ((0.0, self.a), (1.0, self.b)):
            X = torch.where(words == self.b, 1.0, 0.0).double()
            X[masks[:, 0]] = value
            logits[:, 1:-1, token] = self.joint.masked_log_prob(X, masks)[:, 0]
        return types.SimpleNamespace(logits=logits)


def binary_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def joint_model(args):
    words = " ".join("ab"[bit] for bit in np.random.default_rng(0).integers(0, 2, 14))
    found = []
    for n_words, context, continuation in ((14, words[:3], words[3:]), (12, None, words[4:])):
        tokenizer = binary_tokenizer()
        joint = TabularJoint.random(n_words, concentration=0.3, random_state=0)
        predictor, tokenizer = load_masked_lm(JointLM(joint, tokenizer), tokenizer=tokenizer,
                                              device=torch.device("cpu"), mask_token_id=tokenizer.mask_token_id)
        runner = MaskedLMRunner(predictor, tokenizer, torch.device("cpu"), max_length=16)
        if context is None:
            found.append(mask_table(runner, encode_texts([continuation], tokenizer, 16)))
        else:
            found.append(mask_table(runner, encode_pairs([context], [continuation], tokenizer, 16)))
    report("explicit joint: 12 words given 2", found[0], args, given=True)
    report("explicit joint: 12 words alone", found[1], args)


def antiberty(args):
    from skmpt.text import load_antiberty

    model, tokenizer = load_antiberty()
    predictor, tokenizer = load_masked_lm(model, tokenizer=tokenizer, device=torch.device("cpu"))
    runner = MaskedLMRunner(predictor, tokenizer, torch.device("cpu"), score_batch_size=64)
    for name in args.chains:
        chain, window = CHAINS[name]
        before = chain[:chain.index(window)]
        given, alone = tables(runner, before, window, window)
        where = "last" if chain.endswith(window) else f"residues {len(before) + 1}-{len(before) + 12} of {len(chain)},"
        report(f"AntiBERTy ({name}): a chain's {where} 12 residues given the ones before", given, args, given=True)
        report(f"AntiBERTy ({name}): the same 12 residues alone", alone, args)


def diffusion(args):
    from sklearn.model_selection import train_test_split
    from transformers import BertConfig

    from skmpt import MLMCurveScorer
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    train, test = train_test_split(load_wordnet_sentences(), test_size=40, random_state=0)
    train = train[:3000]
    tokenizer = make_wordpiece_tokenizer(train, vocab_size=250)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    scorer = MLMCurveScorer(config, tokenizer=tokenizer, device="cpu", random_state=0, max_length=128,
                            mask_rate="uniform", max_steps=args.steps, batch_size=32, learning_rate=3e-3).fit(train)
    runner = scorer.runner_
    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in test]
    longs = [text for text, tokens in zip(test, ids, strict=True) if len(tokens) >= 18]
    twelves = [text for text, tokens in zip(test, ids, strict=True) if len(tokens) == 12]
    for index in args.sentences:  # 0 is the sentence of the first tables; the others are held out
        long, twelve = longs[index], twelves[index]
        offsets = tokenizer(long, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        cut = offsets[-12][0]
        given, alone = tables(runner, long[:cut].rstrip(), " " + long[cut:].lstrip(), twelve)
        report(f"diffusion LM ({args.steps} steps), test sentence {index}: its last 12 tokens given the rest",
               given, args, given=True)
        report(f"diffusion LM, test sentence {index}: a 12-token sentence alone", alone, args)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=48, help="forward passes per estimate")
    parser.add_argument("--runs", type=int, default=2000, help="repeats (seeds) per estimator")
    parser.add_argument("--steps", type=int, default=300, help="training steps of the diffusion LM")
    parser.add_argument("--models", default="joint,antiberty,diffusion")
    parser.add_argument("--cache", default=None, help="folder to keep the mask tables in between runs")
    parser.add_argument("--chains", default="vh", help=f"AntiBERTy's chains, of {', '.join(CHAINS)}")
    parser.add_argument("--sentences", default="0", help="the diffusion LM's test sentences (indices, e.g. 0,1,2)")
    parser.add_argument("--estimators", default=",".join(ESTIMATORS), help="the rows besides LLaDA's")
    parser.add_argument("--chain-weights", default="", help="nested's chain weights to add as rows (given a context)")
    args = parser.parse_args(argv)
    args.chains = args.chains.split(",")
    if unknown := sorted(set(args.chains) - set(CHAINS)):
        parser.error(f"unknown chain(s) {unknown}; choose from {', '.join(CHAINS)}")
    args.estimators = [name for name in args.estimators.split(",") if name != "llada_round"]
    if unknown := sorted(set(args.estimators) - set(ESTIMATORS)):
        parser.error(f"unknown estimator(s) {unknown}; choose from {', '.join(ESTIMATORS)}")
    args.sentences = [int(index) for index in args.sentences.split(",")]
    args.chain_weights = [float(weight) for weight in args.chain_weights.split(",") if weight]
    CACHE["folder"] = args.cache
    torch.set_num_threads(1)
    start = time.process_time()
    for name in args.models.split(","):
        {"joint": joint_model, "antiberty": antiberty, "diffusion": diffusion}[name](args)
    print(f"\nCPU time {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
