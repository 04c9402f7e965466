"""Variance per forward pass of the estimators of ``log p(continuation | context)`` and of ``sum_M S(x; M)``.

For a continuation (or a text) of ``T = 12`` tokens (``--window`` for the held-out tables) the
model is run once on every one of its ``2**T - 1`` masks, each target's log-probability kept: a
table from which any estimator's draws are read without another forward pass. Each estimator is
then repeated with ``--runs`` seeds at a budget of ``--passes`` forward passes, and the spread of
its estimates is its variance; the exact value is the enumeration's. The table gives, per
estimator, its bias against the enumeration (with its standard error), its variance, the passes
it used and the variance per pass of the reference over its own, with a bootstrap 90 % interval.

The reference, ``llada``, is LLaDA's ``eval_llada.py`` estimator: batches of 32 copies, each
batch's sizes evenly spread from its own random start (rounded as LLaDA rounds, halves to even).
The estimators of the field beside it, all at the same passes: ``llada_round`` (one start for
every copy), ``stratified`` (the same, sizes rounded down: skmpt's), ``uniform`` (LLaDA's
independent sizes, RADD's ``k_DCE``), ``low_discrepancy`` (Dream's and MDLM's evenly spaced
masking rates, ``t_k = (u + k) / n``, each token masked with probability ``t_k``), ``vrpo``
(antithetic time steps, ``t`` and ``1 - t``, as LLaDA 1.5's VRPO shares its time steps),
``complementary`` (a mask and its complement), ``chain`` (the chain rule along random orderings),
``ar_ftb`` (the chain rule left to right: SMDM's ``chain_rule``, Dream's ``ar_ftb``; no
variance, and a bias where the conditionals are not one joint's), and skmpt's ``time``,
``sweep``, ``nested``, ``controlled``, ``antithetic``, ``balanced``, ``allocated`` (the
all-masked copy once, the other sizes' copies in proportion to ``M**-1/4``, each size's mean)
and ``adjusted`` (``allocated`` with a control variate per token, its coefficient fitted on the
other copies). ``auto`` is the budgeted estimator itself
(:class:`skmpt.text.estimation.BudgetedEstimator`, run over the table): the default of the
lm-eval model, of ``MLMCurveScorer.conditional_score_samples`` and of the conditional
functions, which runs its standard (``adjusted``) unless candidates are added to its pilot;
``auto_rounds`` is the same drawing in rounds of 16 copies (``target_se`` too small to reach:
the rounds of ``target_se`` and of a question's choices with ``adaptive=True``).
Each title line also says how far balancing positions within sizes could divide the variance
(:func:`balance_bound`). The models:

- ``joint``: a masked LM whose conditionals come from an explicit joint over 14 binary words
  (:class:`skmpt.testing.TabularJoint`), 12 words given 2 and 12 words alone;
- ``antiberty``: AntiBERTy (installed offline), a VH chain's last 12 residues given the rest of
  the chain, and the same 12 residues alone; ``--chains`` adds :data:`CHAINS` (trastuzumab's VH
  and VL and adalimumab's VH, the 12 residues that end each CDR3 given the residues before them);
- ``heldout``: the held-out protocol. The tuning set is :data:`TUNING_SMALL` (chains the
  estimator's earlier rules were written on, and :data:`SEEN_CHAINS`, held out by an earlier
  version and seen since); the held-out set (:data:`HELDOUT_SMALL`, or with ``--heldout all``
  every chain of :data:`HELDOUT_CHAINS` at every region with a full and a 12-residue context)
  holds antibody chains copied from files anyone can check (each with its source), never used
  to choose anything, windows in CDR1, FR3 and before FR4's motif, given every residue before
  them or only some, and alone. It ends with LLaDA/auto's variance ratio per pass on each case,
  with its bootstrap 90 % interval;
- ``diffusion``: the tiny masked diffusion LM that ``examples/plot_masked_diffusion.py`` trains
  (``mask_rate="uniform"``) at its small size, a held-out sentence's last 12 tokens given the
  rest and 12 tokens alone; ``--sentences 0,1,2`` takes the first, second and third such test sentences.

``--estimators`` picks the rows (LLaDA's is always there) and ``--chain-weights 0.5,1`` adds
``nested`` at those chain weights (``nested@0.5``) to the tables given a context.

Run ``python benchmarks/text_estimator_variance.py`` (4095 passes per table; AntiBERTy's take a
few minutes on one CPU thread). The held-out protocol at full size (about 48 tables of 4095
AntiBERTy passes: hours on one CPU thread, minutes on a GPU)::

    python benchmarks/text_estimator_variance.py --models heldout --heldout all --window 12 --runs 400 \
        --passes 128 --cache tables

and at the small size whose figures the user guide quotes (8 residues, 255 passes per table, about
ten minutes on a loaded two-core machine)::

    python benchmarks/text_estimator_variance.py --models heldout --window 8 --runs 150 --passes 128 \
        --cache tables
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
from skmpt.text.strategies import ESTIMATOR_METHODS, ExhaustiveMasks, NestedMasks, StratifiedSizeMasks, TimeMasks

ESTIMATORS = ("llada_round", "stratified", "uniform", "low_discrepancy", "vrpo", "complementary", "time", "sweep",
              "chain", "ar_ftb", "nested", "controlled", "antithetic", "balanced", "allocated", "adjusted", "auto",
              "auto_rounds")
#: The reference every ratio is taken against: LLaDA's ``eval_llada.py`` estimator, batches of 32 copies, each with
#: one random start and its sizes evenly spread from it (rounded as LLaDA rounds, halves to even).
REFERENCE = "llada"
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


#: Chains typed from memory in an earlier round (variable domains named after public therapeutic antibodies, not
#: checked residue by residue against IMGT/mAb-DB or DrugBank: realistic antibody chains, not a reference for those
#: drugs). They were held out once and have since been looked at, so they are tuning chains now (:data:`TUNING_SMALL`).
SEEN_CHAINS = {
    "bevacizumab_vh": ("EVQLVESGGGLVQPGGSLRLSCAASGYTFTNYGMNWVRQAPGKGLEWVGWINTYTGEPTYAADFKRRFTFSLDTSKSTAY"
        "LQMNSLRAEDTAVYYCAKYPHYYGSSHWYFDVWGQGTLVTVSS"),
    "bevacizumab_vl": ("DIQMTQSPSSLSASVGDRVTITCSASQDISNYLNWYQQKPGKAPKVLIYFTSSLHSGVPSRFSGSGSGTDFTLTISSLQP"
        "EDFATYYCQQYSTVPWTFGQGTKVEIK"),
    "pembrolizumab_vh": ("QVQLVQSGVEVKKPGASVKVSCKASGYTFTNYYMYWVRQAPGQGLEWMGGINPSNGGTNFNEKFKNRVTLTTDSSTTTAY"
        "MELKSLQFDDTAVYYCARRDYRFDMGFDYWGQGTTVTVSS"),
    "pembrolizumab_vl": ("EIVLTQSPATLSLSPGERATLSCRASKGVSTSGYSYLHWYQQKPGQAPRLLIYLASYLESGVPARFSGSGSGTDFTLTIS"
        "SLEPEDFAVYYCQHSRDLPLTFGGGTKVEIK"),
    "nivolumab_vh": ("QVQLVESGGGVVQPGRSLRLDCKASGITFSNSGMHWVRQAPGKGLEWVAVIWYDGSKRYYADSVKGRFTISRDNSKNTLF"
        "LQMNSLRAEDTAVYYCATNDDYWGQGTLVTVSS"),
    "nivolumab_vl": ("EIVLTQSPATLSLSPGERATLSCRASQSVSSYLAWYQQKPGQAPRLLIYDASNRATGIPARFSGSGSGTDFTLTISSLEP"
        "EDFAVYYCQQSSNWPRTFGQGTKVEIK"),
    "rituximab_vh": ("QVQLQQPGAELVKPGASVKMSCKASGYTFTSYNMHWVKQTPGRGLEWIGAIYPGNGDTSYNQKFKGKATLTADKSSSTAY"
        "MQLSSLTSEDSAVYYCARSTYYGGDWYFNVWGAGTTVTVSA"),
    "rituximab_vl": ("QIVLSQSPAILSASPGEKVTMTCRASSSVSYIHWFQQKPGSSPKPWIYATSNLASGVPVRFSGSGSGTSYSLTISRVEAE"
        "DAATYYCQQWTSNPPTFGGGTKLEIK"),
}
#: The held-out chains (``--models heldout``), copied from files anyone can check, none of which any rule or constant
#: of the budgeted estimator was chosen on: each entry is ``(chain, where it was copied from)``.
HELDOUT_CHAINS = {
    "antiberty_vh": ("EVQLVQSGPEVKKPGTSVKVSCKASGFTFMSSAVQWVRQARGQRLEWIGWIVIGSGNTNYAQKFQERVTITRDMSTSTAYMELSS"
        "LRSEDTAVYYCAAPYCSSISCNDGFDIWGQGTMVTVS", "the antiberty 0.1.3 package's README (its PyPI metadata, "
        "antiberty-0.1.3.dist-info/METADATA, section Usage), first sequence"),
    "antiberty_vl": ("DVVMTQTPFSLPVSLGDQASISCRSSQSLVHSNGNTYLHWYLQKPGQSPKLLIYKVSNRFSGVPDRFSGSGSGTDFTLKISRV"
        "EAEDLGVYFCSQSTHVPYTFGGGTKLEIK", "the same README, second sequence"),
    "ablang_vh": ("EVQLVESGPGLVQPGKSLRLSCVASGFTFSGYGMHWVRQAPGKGLEWIALIIYDESNKYYADSVKGRFTISRDNSKNTLYLQMSS"
        "LRAEDTAVFYCAKVKFYDPTAPNDYWGQGTLVTVSS", "github.com/oxpig/AbLang README.md (commit bfcc915), the "
        "restored sequence; also matsengrp/epam tests/test_models.py, parent_seqs[0]"),
    "epam_vh": ("QVQLVQSGAEVKKPGASVKVSCKASGYTFTSYGISWVRQAPGQGLEWMGWISAYNGNTNYAQKLQGRVTMTTDTSTSTAYMELRSLR"
        "SDDTAVYYCARVLGWGSMDVWGQGTTVTVSS", "github.com/matsengrp/epam tests/test_models.py (commit 78d042e), "
        "parent_seqs[1]"),
    "anarci_vh": ("EVQLQQSGAEVVRSGASVKLSCTASGFNIKDYYIHWVKQRPEKGLEWIGWIDPEIGDTEYVPKFQGKATMTADTSSNTAYLQLSSL"
        "TSEDTAVYYCNAGHDYDRGRFPYWGQGTLVTVSA", "github.com/oxpig/ANARCI README.md (commit a526ec1), "
        "'Numbering a single sequence'"),
    "nc10_vh": ("QVQLQQSGAELVKPGASVRMSCKASGYTFTNYNMYWVKQSPGQGLEWIGIFYPGNGDTSYNQKFKDKATLTADKSSNTAYMQLSSLTS"
        "EDSAVYYCARSGGSYRYDGGFDYWGQGTTVTV", "the same README, the hit table's 1a14_H (NC10 Fv heavy chain)"),
}
#: The held-out cases of the small run: (chain, region, context) with region ``cdr3`` (the residues before FR4's
#: W/FGxG motif), ``cdr1`` (from residue 24) or ``fr3`` (from residue 66), and context ``"full"`` (every residue
#: before the window) or a number of residues before it; each with a full context is also scored alone.
#: ``--heldout all`` runs every held-out chain at every region with a full and a 12-residue context.
HELDOUT_SMALL = (("antiberty_vh", "cdr1", "full"), ("antiberty_vl", "fr3", 12), ("ablang_vh", "cdr3", "full"),
                 ("epam_vh", "fr3", 30), ("anarci_vh", "cdr1", 12), ("nc10_vh", "cdr3", 20),
                 ("antiberty_vl", "cdr3", "full"))
#: The tuning set: a chain the estimator's earlier rules were written on, the cases a first version of the measured
#: choice was judged on, and those the second version was held out on (:data:`SEEN_CHAINS`; seen since).
TUNING_SMALL = (("trastuzumab_vh", "cdr3", "full"), ("bevacizumab_vh", "cdr3", "full"),
                ("pembrolizumab_vl", "cdr1", "full"), ("nivolumab_vh", "fr3", "full"),
                ("rituximab_vl", "cdr3", 12), ("bevacizumab_vl", "fr3", "full"), ("pembrolizumab_vh", "cdr3", 12),
                ("nivolumab_vl", "cdr1", "full"), ("rituximab_vh", "cdr3", "full"))


def window_of(chain, region, length):
    """``(before, window)``: the ``length`` residues of ``region`` in ``chain`` and every residue before them."""
    import re

    if region == "cdr3":  # a chain without FR4 (a germline V gene): its end
        motif = re.search(r"[WF]G.G", chain[90:])
        start = (len(chain) if motif is None else motif.start() + 90) - length
    else:
        start = {"cdr1": 23, "fr3": 65}[region]
    return chain[:start], chain[start : start + length]


class LLaDARounding(StratifiedSizeMasks):
    """LLaDA's sizes exactly as its evaluation code draws them (``torch.round``: halves to even)."""

    def copies(self, length, generator, word_ids=None):
        start = int(torch.randint(1, length + 1, (), generator=generator))
        sizes = torch.round(torch.linspace(float(start), start + (self.score_masks - 1) * (length / self.score_masks),
                                           self.score_masks, dtype=torch.float64)).long()
        masked = masks_of_sizes(((sizes - 1) % length + 1).numpy(), length, random_state=generator)
        return masked, masked


class LLaDABatches(StratifiedSizeMasks):
    """LLaDA's ``eval_llada.py``: batches of ``batch`` (32) copies, each batch's sizes stratified from its start."""

    batch = 32

    def copies(self, length, generator, word_ids=None):
        sizes = []
        for start in range(0, self.score_masks, self.batch):
            count = min(self.batch, self.score_masks - start)
            first = int(torch.randint(1, length + 1, (), generator=generator))
            spread = torch.linspace(float(first), first + (count - 1) * (length / count), count, dtype=torch.float64)
            sizes.append((torch.round(spread).long() - 1) % length + 1)
        masked = masks_of_sizes(torch.cat(sizes).numpy(), length, random_state=generator)
        return masked, masked


class VRPOTimes(TimeMasks):
    """Antithetic time steps (LLaDA 1.5's VRPO shares its time steps): times ``t`` and ``1 - t`` in pairs.

    Each time masks every token with its probability, weighed by ``(L + 1) / M`` as :class:`TimeMasks`; a pair is
    one draw. ``score_masks`` is even.
    """

    def copies(self, length, generator, word_ids=None):
        half = torch.rand(self.score_masks // 2, generator=generator, dtype=torch.float64)
        times = torch.stack([half, 1 - half], 1).reshape(-1)
        masked = torch.rand((len(times), length), generator=generator, dtype=torch.float64) < times[:, None]
        return masked, masked

    def draws(self, masked, values):
        return super().draws(masked, values).reshape(-1, 2).mean(1)


class ComplementaryMasks(StratifiedSizeMasks):
    """Complementary masks: the all-masked copy once, then pairs of a mask of ``M`` in ``1..L - 1`` and its complement.

    Each mask of a pair is a uniformly random set of a uniformly random size in ``1..L - 1``: the pair's mean of
    ``((L - 1) / M) sum_masked log p``, plus ``S(x; L)`` from the all-masked copy, is unbiased. ``score_masks`` is
    the number of copies, odd.
    """

    def copies(self, length, generator, word_ids=None):
        pairs = (self.score_masks - 1) // 2
        sizes = torch.randint(1, length, (pairs,), generator=generator).numpy()
        first = masks_of_sizes(sizes, length, random_state=generator)
        masked = torch.cat([torch.ones((1, length), dtype=torch.bool), torch.stack([first, ~first], 1)
                            .reshape(-1, length)])
        return masked, masked

    def draws(self, masked, values):
        values = np.asarray(values, dtype=np.float64)
        length = masked.shape[1]
        terms = (length - 1) / masked[1:].sum(1).numpy() * values[1:]
        return terms.reshape(-1, 2).mean(1) + values[0] / length


class LeftToRight(StratifiedSizeMasks):
    """The chain rule left to right (SMDM's ``chain_rule``, Dream's ``ar_ftb``): token ``j`` given those before it.

    ``L`` copies, no randomness: its variance is 0, and for a model whose conditionals are not one joint's it
    estimates another quantity than ``sum_M S(x; M)`` (its bias is reported).
    """

    def n_copies(self, length, word_ids=None):
        return length

    def copies(self, length, generator, word_ids=None):
        masked = torch.arange(length)[None, :] >= torch.arange(length)[:, None]
        return masked, torch.eye(length, dtype=torch.bool)

    def draws(self, masked, values):
        return np.array([float(np.sum(values))])


#: The estimators of the field this script adds to the library's, by name: the factory of ``score_masks`` and the
#: copies that many take for ``length`` tokens.
FIELD = {"llada": LLaDABatches, "llada_round": None, "vrpo": VRPOTimes, "complementary": ComplementaryMasks,
         "ar_ftb": LeftToRight}


def strategy(name, length, passes):
    """The estimator ``name`` at ``passes`` forward passes for ``length`` tokens (at least two draws).

    A registered name is sized as the budgeted estimator sizes it (:meth:`BudgetedEstimator.strategy`);
    ``nested@w`` is ``nested`` with ``chain_weight=w``.
    """
    if name in ESTIMATOR_METHODS:
        return BudgetedEstimator.strategy(name, length, passes)
    if name.startswith("nested@"):
        factory = functools.partial(NestedMasks, chain_weight=float(name.partition("@")[2]))
        count = max(4, passes // (length - 1) // 2 * 2)  # antithetic pairs of orderings, two at least
        while count > 4 and factory(count).n_copies(length) > passes:
            count -= 2
        return factory(count)
    if name == "complementary":  # the all-masked copy and pairs
        return ComplementaryMasks(passes if passes % 2 else passes - 1)
    if name == "vrpo":
        return VRPOTimes(passes // 2 * 2)
    if name == "ar_ftb":
        return LeftToRight(1)
    return (FIELD.get(name) or LLaDARounding)(passes)  # llada, llada_round: a copy each


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
    """Mean, variance, passes and estimates of the estimator ``name`` over ``runs`` seeds, copies read from ``table``.

    ``auto`` is the budgeted estimator (:class:`BudgetedEstimator`) at ``passes`` forward passes with its
    defaults, the pilot's passes counted; the others are each strategy at ``passes`` copies.
    """
    length = table.shape[1]
    estimates, spent = [], []
    encoded = EncodedTexts([torch.zeros(length + 2, dtype=torch.long)], [torch.arange(1, length + 1)])
    for seed in range(runs):
        if name in ("auto", "auto_rounds"):
            estimator = BudgetedEstimator(TableRunner(table), max_forward_passes=passes, seed=seed,
                                          target_se=1e-9 if name == "auto_rounds" else None)
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
    return estimates.mean(), estimates.var(ddof=1), int(np.mean(spent)), estimates


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


def size_weights_gain(table, passes):
    """How much less variance LLaDA's rounded sizes have than sizes spread evenly, from the sizes alone.

    Given its sizes, an estimator that draws ``n_M`` uniformly random masks of size ``M`` and
    averages their terms ``(T / M) sum_masked log p`` has variance ``sum_M n_M var_M / N**2``
    (``var_M``: the terms' variance over all masks of size ``M``, from the table). With the
    ``N / T`` masks per size of ``stratified`` it is unbiased; LLaDA's rounding of halves to even
    (``eval_llada.py``, batches of 32) gives some sizes more masks than others (for ``T = 8``: 5 to
    the even sizes, 3 to the odd ones, per 32), which moves its expectation (its bias) and, where
    the over-weighted sizes spread less (the all-masked copy does not spread at all), its variance.
    Returns stratified's variance over LLaDA's at ``passes`` copies: above 1 where LLaDA's biased
    weights buy variance, a gap that an estimator falling back to ``stratified`` does not close.
    """
    length = table.shape[1]
    masked = ~np.isnan(table)
    sizes = masked.sum(1)
    terms = length / sizes * np.nansum(table, 1)
    spread = np.array([terms[sizes == size].var() for size in range(1, length + 1)])
    counts = np.zeros(length)
    for first in range(1, length + 1):  # each batch's random start, equally likely
        grid = torch.linspace(float(first), first + 31 * (length / 32), 32, dtype=torch.float64)
        counts += np.bincount(((torch.round(grid).long() - 1) % length + 1).numpy(), minlength=length + 1)[1:]
    counts *= passes / counts.sum()
    return (spread.sum() / length / passes) / max((counts * spread).sum() / passes**2, 1e-300)


def ratio_interval(reference, estimates, passes, level=0.9, n_boot=1000, seed=0):
    """A bootstrap ``level`` interval of the variance per pass of ``reference`` over that of ``estimates``.

    ``reference`` and ``estimates`` are ``(estimates, passes)`` of independent runs; each is resampled on its own.
    """
    rng = np.random.default_rng(seed)
    (ref, ref_passes), found = reference, np.asarray(estimates)
    ratios = []
    for _ in range(n_boot):
        a = rng.choice(ref, len(ref)).var(ddof=1) * ref_passes
        b = rng.choice(found, len(found)).var(ddof=1) * passes
        ratios.append(a / b if b > 0 else np.inf)
    return tuple(np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2]))


def report(title, table, args, given=False):
    """Print every estimator's row on ``table``; returns LLaDA/auto's (and auto_rounds') variance ratio per pass and
    its interval, by name."""
    exact = ExhaustiveMasks(max_tokens=table.shape[1]).draws(torch.from_numpy(~np.isnan(table)),
                                                            np.nansum(table, 1))[0]
    names = [*args.estimators, *(f"nested@{weight:g}" for weight in args.chain_weights if given)]
    rows = {name: simulate(table, name, args.passes, args.runs, given) for name in (REFERENCE, *names)}
    reference = rows[REFERENCE][1] * rows[REFERENCE][2]
    print(f"\n{title}: exact {exact:.4f} ({args.passes} forward passes, {args.runs} runs; balancing positions "
          f"within sizes could divide the variance by {balance_bound(table):.3g} at most; LLaDA's rounded sizes "
          f"alone give it {size_weights_gain(table, args.passes):.2f} times stratified's variance)")
    print(f"{'estimator':<16} {'bias':>9} {'+-':>7} {'variance':>10} {'passes':>7} {'LLaDA/it per pass [90 %]':>26}")
    for name, (mean, variance, passes, estimates) in rows.items():
        if variance <= 1e-20 * max(1.0, mean**2):
            ratio = "exact" if abs(mean - exact) < 1e-9 else "no variance"
        else:
            low, high = ratio_interval((rows[REFERENCE][3], rows[REFERENCE][2]), estimates, passes)
            ratio = f"{reference / (variance * passes):.2f} [{low:.2f}, {high:.2f}]"
        print(f"{name:<16} {mean - exact:9.4f} {np.sqrt(variance / len(estimates)):7.4f} {variance:10.4g} "
              f"{passes:7d} {ratio:>26}")
    found = {}
    for name in ("auto", "auto_rounds"):
        if name in rows:
            _, variance, passes, estimates = rows[name]
            interval = ratio_interval((rows[REFERENCE][3], rows[REFERENCE][2]), estimates, passes)
            found[name] = (reference / (variance * passes), interval)
    return found


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


def heldout(args):
    """LLaDA/auto's variance ratio per pass, with its bootstrap interval, on the tuning set and on the held-out set."""
    from skmpt.text import load_antiberty

    model, tokenizer = load_antiberty()
    predictor, tokenizer = load_masked_lm(model, tokenizer=tokenizer, device=torch.device("cpu"))
    runner = MaskedLMRunner(predictor, tokenizer, torch.device("cpu"), score_batch_size=64)
    chains = {**{name: chain for name, (chain, _) in CHAINS.items()}, **SEEN_CHAINS,
              **{name: chain for name, (chain, _) in HELDOUT_CHAINS.items()}}
    if args.heldout == "all":
        cases = [(name, region, context) for name in HELDOUT_CHAINS for region in ("cdr1", "fr3", "cdr3")
                 for context in ("full", 12)]
    else:
        cases = list(HELDOUT_SMALL)
    for name, (_, source) in HELDOUT_CHAINS.items():
        print(f"held-out chain {name}: from {source}")
    summary = []
    for part, chosen in (("tuning", TUNING_SMALL), ("held out", cases)):
        for name, region, context in chosen:
            before, window = window_of(chains[name], region, args.window)
            visible = before if context == "full" else before[-context:]
            given, alone = tables(runner, visible, window, window)
            where = f"{name} {region} ({len(before) + 1}-{len(before) + args.window})"
            ratios = report(f"[{part}] AntiBERTy {where} given {len(visible)} residues before", given, args, True)
            summary.extend((name, part, f"{where} given {len(visible)}", *ratio) for name, ratio in ratios.items())
            if context == "full":
                ratios = report(f"[{part}] AntiBERTy {where} alone", alone, args)
                summary.extend((name, part, f"{where} alone", *ratio) for name, ratio in ratios.items())
    for chosen in ("auto", "auto_rounds"):
        if not any(name == chosen for name, *_ in summary):
            continue
        print(f"\nLLaDA / {chosen}, variance per forward pass at {args.passes} passes, {args.window} residues, "
              f"{args.runs} runs (bootstrap 90 % interval):")
        for name, part, where, ratio, (low, high) in summary:
            if name == chosen:
                print(f"  [{part}] {where:<48} {ratio:6.2f} [{low:.2f}, {high:.2f}]")
        held = [ratio for name, part, _, ratio, _ in summary if part == "held out" and name == chosen]
        print(f"  held out: median {np.median(held):.2f}, min {min(held):.2f} over {len(held)} cases")


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
    parser.add_argument("--estimators", default=",".join(ESTIMATORS), help="the rows besides LLaDA's (llada)")
    parser.add_argument("--chain-weights", default="", help="nested's chain weights to add as rows (given a context)")
    parser.add_argument("--window", type=int, default=12, help="residues scored in the held-out tables (heldout)")
    parser.add_argument("--heldout", default="small", choices=("small", "all"), help="the held-out cases")
    args = parser.parse_args(argv)
    args.chains = args.chains.split(",")
    if unknown := sorted(set(args.chains) - set(CHAINS)):
        parser.error(f"unknown chain(s) {unknown}; choose from {', '.join(CHAINS)}")
    args.estimators = [name for name in args.estimators.split(",") if name != REFERENCE]
    if unknown := sorted(set(args.estimators) - set(ESTIMATORS)):
        parser.error(f"unknown estimator(s) {unknown}; choose from {', '.join(ESTIMATORS)}")
    args.sentences = [int(index) for index in args.sentences.split(",")]
    args.chain_weights = [float(weight) for weight in args.chain_weights.split(",") if weight]
    CACHE["folder"] = args.cache
    torch.set_num_threads(1)
    start = time.process_time()
    for name in args.models.split(","):
        {"joint": joint_model, "antiberty": antiberty, "diffusion": diffusion, "heldout": heldout}[name](args)
    print(f"\nCPU time {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
